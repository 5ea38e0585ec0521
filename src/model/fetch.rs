//! A node receiving the head's snapshot: every blob it lacks, or whose hash is wrong, fetched
//! from the head's blob server over the cluster link; blobs already right are kept. Then the
//! snapshot's links and the revision's ref, as huggingface_hub would have written them, and this
//! node's record of the snapshot.

use serde::{Deserialize, Serialize};

use super::snapshot::{bad_blobs, paths_of};
use crate::error::Result;
use crate::model::blob_fetch::{fetch_blob, BlobSource};
use crate::model::cache::HubCache;
use crate::model::manifest::{SnapshotManifest, SnapshotRecords};
use crate::model::revision::Revision;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelFetch {
    /// The head's verified snapshot.
    pub manifest: SnapshotManifest,
    /// The ref to write (none when it is the commit itself).
    pub revision: Revision,
    pub source: BlobSource,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelFetched {
    pub cache: String,
    /// Blobs received from the head.
    pub fetched: usize,
    pub fetched_bytes: u64,
    /// Blobs already here and right.
    pub kept: usize,
    /// Files whose blob was here but wrong (and was fetched again).
    pub repaired: Vec<String>,
}

pub async fn model_fetch(request: &ModelFetch) -> Result<ModelFetched> {
    let manifest = &request.manifest;
    let cache = HubCache::of_this_process()?;
    let repo = cache.repo(&manifest.repo);
    let blobs = manifest.blobs();
    let wrong = bad_blobs(&repo, blobs.clone()).await?;
    let repaired = paths_of(&manifest.files, &wrong.iter().filter(|name| repo.blob(name).exists()).cloned().collect());
    let mut fetched_bytes = 0;
    for name in &wrong {
        repo.remove_blob(name)?;
        let size = blobs[name];
        fetch_blob(&request.source, &repo, name, size).await?;
        fetched_bytes += size;
    }
    for file in &manifest.files {
        repo.write_link(&manifest.commit, &file.path, &file.blob)?;
    }
    repo.write_ref(&request.revision, &manifest.commit)?;
    SnapshotRecords::of_this_process()?.write(manifest)?;
    Ok(ModelFetched {
        cache: cache.root().display().to_string(),
        fetched: wrong.len(),
        fetched_bytes,
        kept: blobs.len() - wrong.len(),
        repaired,
    })
}
