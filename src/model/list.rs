//! What this node's Hugging Face cache holds: each model, each snapshot with the refs that name
//! it, its files and size, whether it is complete (every file's blob here, and every file of the
//! last pull's list) and, when asked, whether every blob hashes to its name.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::snapshot::{bad_blobs, files_here, paths_of};
use crate::error::Result;
use crate::model::cache::{HubCache, RepoDir};
use crate::model::manifest::SnapshotRecords;
use crate::model::repo_id::RepoId;
use crate::model::revision::Commit;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelList {
    /// Only this model; None: every model in the cache.
    pub repo: Option<RepoId>,
    /// Hash every blob (reads every byte).
    pub verify: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelCacheReport {
    pub cache: String,
    pub repos: Vec<CachedRepo>,
}

impl ModelCacheReport {
    pub fn repo(&self, id: &RepoId) -> Option<&CachedRepo> {
        self.repos.iter().find(|repo| &repo.repo == id)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedRepo {
    pub repo: RepoId,
    pub revisions: Vec<CachedRevision>,
    /// Everything in its `blobs/`, partial downloads included.
    pub bytes_on_disk: u64,
}

impl CachedRepo {
    pub fn revision(&self, commit: &Commit) -> Option<&CachedRevision> {
        self.revisions.iter().find(|revision| &revision.commit == commit)
    }

    /// The commit `name` (a ref, or a commit itself) stands for here.
    pub fn commit_of(&self, name: &str) -> Option<&Commit> {
        self.revisions
            .iter()
            .find(|revision| revision.refs.iter().any(|r| r == name) || revision.commit.as_str() == name)
            .map(|revision| &revision.commit)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedRevision {
    pub commit: Commit,
    /// The refs naming it (`main`, `refs/pr/1`).
    pub refs: Vec<String>,
    pub files: usize,
    /// Its blobs' bytes.
    pub bytes: u64,
    /// Every file links to a blob that is here, and (when strix-toolbox pulled it) every file of
    /// that pull is there.
    pub complete: bool,
    /// The files that are not.
    pub missing: Vec<String>,
    /// Some when verified now: every blob hashes to its name.
    pub verified: Option<bool>,
    /// The files whose blob did not.
    pub bad: Vec<String>,
    /// When a pull last verified it on this node (RFC 3339).
    pub pulled: Option<String>,
}

impl CachedRevision {
    /// Complete, and not found bad.
    pub fn usable(&self) -> bool {
        self.complete && self.verified != Some(false)
    }
}

pub async fn model_list(request: &ModelList) -> Result<ModelCacheReport> {
    let cache = HubCache::of_this_process()?;
    let records = SnapshotRecords::of_this_process().ok();
    let ids = match &request.repo {
        Some(id) => cache.repos()?.into_iter().filter(|found| found == id).collect(),
        None => cache.repos()?,
    };
    let mut repos = Vec::new();
    for id in ids {
        let repo = cache.repo(&id);
        let mut revisions = Vec::new();
        for commit in repo.snapshots()? {
            revisions.push(revision(&repo, &commit, records.as_ref(), request.verify).await?);
        }
        repos.push(CachedRepo { repo: id, revisions, bytes_on_disk: repo.bytes_on_disk() });
    }
    Ok(ModelCacheReport { cache: cache.root().display().to_string(), repos })
}

async fn revision(
    repo: &RepoDir,
    commit: &Commit,
    records: Option<&SnapshotRecords>,
    verify: bool,
) -> Result<CachedRevision> {
    let refs = repo.refs()?.into_iter().filter(|(_, c)| c == commit).map(|(name, _)| name).collect();
    let (files, mut missing) = files_here(repo, commit)?;
    let record = records.and_then(|records| records.read(&repo.id, commit));
    if let Some(record) = &record {
        let here: BTreeSet<(&str, &str)> = files.iter().map(|f| (f.path.as_str(), f.blob.as_str())).collect();
        for file in &record.manifest.files {
            if !here.contains(&(file.path.as_str(), file.blob.as_str())) && !missing.contains(&file.path) {
                missing.push(file.path.clone());
            }
        }
    }
    let (verified, bad) = if verify {
        let bad = bad_blobs(repo, files.iter().map(|f| (f.blob.clone(), f.size)).collect()).await?;
        (Some(bad.is_empty()), paths_of(&files, &bad))
    } else {
        (None, Vec::new())
    };
    let blobs: std::collections::BTreeMap<_, _> = files.iter().map(|f| (&f.blob, f.size)).collect();
    let paths: BTreeSet<&str> =
        files.iter().map(|f| f.path.as_str()).chain(missing.iter().map(String::as_str)).collect();
    Ok(CachedRevision {
        commit: commit.clone(),
        refs,
        files: paths.len(),
        bytes: blobs.values().sum(),
        complete: missing.is_empty() && !files.is_empty(),
        missing,
        verified,
        bad,
        pulled: record.map(|record| record.verified),
    })
}
