//! A snapshot on this node checked against its blobs: which entries link to a blob that is here,
//! and which blobs hash to their names. Hashing reads every byte (seconds per GB), so it runs on
//! the blocking pool.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};
use crate::model::blob::{file_matches, BlobName};
use crate::model::cache::{RepoDir, SnapshotEntry};
use crate::model::manifest::{SnapshotFile, SnapshotManifest};
use crate::model::revision::Commit;

/// A snapshot's files that link to a blob present here, and the paths that do not (a dangling
/// link, or an entry that is no link to a blob).
pub fn files_here(repo: &RepoDir, commit: &Commit) -> Result<(Vec<SnapshotFile>, Vec<String>)> {
    let mut files = Vec::new();
    let mut missing = Vec::new();
    for SnapshotEntry { path, blob } in repo.snapshot_entries(commit)? {
        match blob.and_then(|blob| Some((repo.blob_size(&blob)?, blob))) {
            Some((size, blob)) => files.push(SnapshotFile { path, blob, size }),
            None => missing.push(path),
        }
    }
    Ok((files, missing))
}

/// The manifest of a complete snapshot: every entry a link to a blob that is here.
pub fn manifest_here(repo: &RepoDir, commit: &Commit) -> Result<SnapshotManifest> {
    let (files, missing) = files_here(repo, commit)?;
    if !missing.is_empty() || files.is_empty() {
        return Err(Error::Verification {
            message: format!(
                "snapshot {commit} of {} is incomplete: {}",
                repo.id,
                if files.is_empty() {
                    "it has no files".to_string()
                } else {
                    format!("no blob for {}", missing.join(", "))
                }
            ),
            fix: Some(format!("pull it again (`strix-toolbox cluster model pull {}`)", repo.id)),
        });
    }
    Ok(SnapshotManifest { repo: repo.id.clone(), commit: commit.clone(), files })
}

/// The blobs among `blobs` (name → expected size) whose file here is missing, of another size, or
/// hashes to something else.
pub async fn bad_blobs(repo: &RepoDir, blobs: BTreeMap<BlobName, u64>) -> Result<BTreeSet<BlobName>> {
    let repo = repo.clone();
    tokio::task::spawn_blocking(move || {
        let mut bad = BTreeSet::new();
        for (name, size) in blobs {
            let path = repo.blob(&name);
            let good = repo.blob_size(&name) == Some(size) && file_matches(&path, &name).unwrap_or(false);
            if !good {
                bad.insert(name);
            }
        }
        bad
    })
    .await
    .map_err(|e| Error::Internal(format!("the blob check stopped: {e}")))
}

/// The paths of `files` whose blob is among `bad`.
pub fn paths_of(files: &[SnapshotFile], bad: &BTreeSet<BlobName>) -> Vec<String> {
    files.iter().filter(|file| bad.contains(&file.blob)).map(|file| file.path.clone()).collect()
}
