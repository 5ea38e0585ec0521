//! What a snapshot holds (each file's path, blob and size), as the head found it after its
//! download and verification: the list the other nodes fetch against, and the record each node
//! keeps of the snapshot it was given (`$XDG_STATE_HOME/strix-toolbox/models/`, beside the
//! serving records), so that a later listing can tell a complete snapshot from a partial one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::blob::BlobName;
use super::repo_id::RepoId;
use super::revision::Commit;
use crate::error::{Error, Result};
use crate::paths::Paths;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotFile {
    /// Inside the snapshot, `/`-separated.
    pub path: String,
    pub blob: BlobName,
    pub size: u64,
}

/// A snapshot's files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotManifest {
    pub repo: RepoId,
    pub commit: Commit,
    pub files: Vec<SnapshotFile>,
}

impl SnapshotManifest {
    /// Each blob once, with its size (two files may share one blob).
    pub fn blobs(&self) -> BTreeMap<BlobName, u64> {
        self.files.iter().map(|file| (file.blob.clone(), file.size)).collect()
    }

    /// The bytes of its blobs: what a node without any of them receives.
    pub fn blob_bytes(&self) -> u64 {
        self.blobs().values().sum()
    }
}

/// A node's record of the snapshot it verified last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    pub manifest: SnapshotManifest,
    /// When every blob was last hashed and matched (RFC 3339).
    pub verified: String,
}

/// Where the records live on this node.
#[derive(Debug, Clone)]
pub struct SnapshotRecords {
    dir: PathBuf,
}

impl SnapshotRecords {
    /// Under the XDG state directory.
    pub fn of(paths: &Paths) -> Result<SnapshotRecords> {
        Ok(SnapshotRecords::in_dir(&paths.state_dir("the record of a model's snapshot")?.join("models")))
    }

    pub fn in_dir(dir: &Path) -> SnapshotRecords {
        SnapshotRecords { dir: dir.to_path_buf() }
    }

    fn path(&self, repo: &RepoId, commit: &Commit) -> PathBuf {
        self.dir.join(repo.folder_name()).join(format!("{commit}.json"))
    }

    /// The record of `repo` at `commit`; None when there is none (or it cannot be read: a
    /// listing then says it does not know, rather than fail).
    pub fn read(&self, repo: &RepoId, commit: &Commit) -> Option<SnapshotRecord> {
        let text = std::fs::read_to_string(self.path(repo, commit)).ok()?;
        serde_json::from_str::<SnapshotRecord>(&text)
            .ok()
            .filter(|record| &record.manifest.repo == repo && &record.manifest.commit == commit)
    }

    /// Record `manifest` as verified now (replacing any earlier record atomically).
    pub fn write(&self, manifest: &SnapshotManifest) -> Result<()> {
        let record = SnapshotRecord {
            manifest: manifest.clone(),
            verified: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        };
        let path = self.path(&manifest.repo, &manifest.commit);
        let failed = |e: std::io::Error| {
            Error::host(
                path.display().to_string(),
                format!("cannot write {}: {e}", path.display()),
                "check that the home directory is writable and has room",
            )
        };
        let folder = path.parent().ok_or_else(|| Error::Internal("a record without a folder".into()))?;
        std::fs::create_dir_all(folder).map_err(failed)?;
        let text = serde_json::to_vec_pretty(&record)
            .map_err(|e| Error::Internal(format!("cannot encode the record: {e}")))?;
        let mut temporary = tempfile::NamedTempFile::new_in(folder).map_err(failed)?;
        std::io::Write::write_all(&mut temporary, &text).map_err(failed)?;
        temporary.persist(&path).map_err(|e| failed(e.error))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn manifest() -> SnapshotManifest {
        let blob = |hex: &str| BlobName::parse(hex).unwrap();
        SnapshotManifest {
            repo: RepoId::parse("acme/tiny").unwrap(),
            commit: Commit::parse("c12a728b0b9a3d8c0a9e6a1d5b1f4e2c3d4e5f60").unwrap(),
            files: vec![
                SnapshotFile { path: "a.txt".into(), blob: blob("ce013625030ba8dba906f756967f9e9ca394464a"), size: 6 },
                SnapshotFile { path: "b.txt".into(), blob: blob("ce013625030ba8dba906f756967f9e9ca394464a"), size: 6 },
                SnapshotFile {
                    path: "model.safetensors".into(),
                    blob: blob("5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"),
                    size: 100,
                },
            ],
        }
    }

    #[test]
    fn a_shared_blob_counts_once() {
        assert_eq!(manifest().blobs().len(), 2);
        assert_eq!(manifest().blob_bytes(), 106);
    }

    #[test]
    fn records_round_trip_per_repo_and_commit() {
        let dir = tempfile::tempdir().unwrap();
        let records = SnapshotRecords::in_dir(dir.path());
        let manifest = manifest();
        assert!(records.read(&manifest.repo, &manifest.commit).is_none());
        records.write(&manifest).unwrap();
        assert_eq!(records.read(&manifest.repo, &manifest.commit).unwrap().manifest, manifest);
        let other = Commit::parse(&"0".repeat(40)).unwrap();
        assert!(records.read(&manifest.repo, &other).is_none());
    }
}
