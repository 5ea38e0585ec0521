//! A Hub GGUF for llama.cpp (`owner/repo:QUANT`, `--file`): the picked file(s) only, downloaded
//! once on the head by the model pull (its token handling, commit pinning and blob checks), and
//! served from the head's cache. The workers get no copy: RPC sends them their tensors.

use super::model::{model_pull, ModelPullReport, ModelPullRequest};
use crate::error::{Error, Result};
use crate::model::cache::HubCache;
use crate::model::identity::ModelIdentity;
use crate::model::repo_id::RepoId;
use crate::node::Node;
use crate::reporter::Reporter;

/// The GGUF in the head's cache, as the launch serves it.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadGguf {
    pub repo: RepoId,
    /// The first file's path in the head's cache (the toolbox sees the home at the same path).
    pub path: String,
    /// The first file by its content: its blob name is its sha256.
    pub identity: ModelIdentity,
    pub pull: ModelPullReport,
}

/// The GGUF `pull` names (its `gguf` pick), pulled on the head alone.
pub async fn gguf_on_head(head: &dyn Node, pull: &ModelPullRequest, reporter: &dyn Reporter) -> Result<HeadGguf> {
    let pulled = model_pull(&[head], pull, reporter).await?;
    served_from(&pull.repo, pulled)
}

/// Where the pulled GGUF is, and what it is.
fn served_from(repo: &RepoId, pull: ModelPullReport) -> Result<HeadGguf> {
    let first = pull.gguf_files.first().ok_or_else(|| {
        Error::Internal(format!("the head's pull of {repo} named no GGUF file (an older strix-toolbox on the head?)"))
    })?;
    let snapshot = HubCache::at(&pull.head.cache).repo(repo).snapshot_dir(&pull.commit);
    let name = first.path.rsplit('/').next().unwrap_or(&first.path).to_string();
    Ok(HeadGguf {
        repo: repo.clone(),
        path: snapshot.join(&first.path).display().to_string(),
        identity: ModelIdentity::Gguf { name, sha256: first.blob.to_string() },
        pull,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::model::HeadDownload;
    use crate::model::blob::BlobName;
    use crate::model::manifest::SnapshotFile;
    use crate::model::revision::{Commit, Revision};

    #[test]
    fn the_first_part_is_served_from_the_heads_snapshot_and_named_by_its_sha256() {
        let repo = RepoId::parse("acme/tiny-GGUF").unwrap();
        let sha = "a".repeat(64);
        let file = |path: &str| SnapshotFile { path: path.into(), blob: BlobName::parse(&sha).unwrap(), size: 1 };
        let pull = ModelPullReport {
            repo: repo.clone(),
            revision: Revision::main(),
            commit: Commit::parse(&"c".repeat(40)).unwrap(),
            files: 2,
            bytes: 2,
            head: HeadDownload {
                node: "node1".into(),
                cache: "/home/me/.cache/huggingface/hub".into(),
                hub_version: "0.36.2".into(),
                downloaded_bytes: 2,
                repaired: Vec::new(),
            },
            nodes: Vec::new(),
            link_bytes: 0,
            seconds: 0.0,
            gguf_files: vec![file("Q8_0/t-Q8_0-00001-of-00002.gguf"), file("Q8_0/t-Q8_0-00002-of-00002.gguf")],
        };
        let served = served_from(&repo, pull.clone()).unwrap();
        assert_eq!(
            served.path,
            format!(
                "/home/me/.cache/huggingface/hub/models--acme--tiny-GGUF/snapshots/{}/Q8_0/t-Q8_0-00001-of-00002.gguf",
                "c".repeat(40)
            )
        );
        assert_eq!(served.identity, ModelIdentity::Gguf { name: "t-Q8_0-00001-of-00002.gguf".into(), sha256: sha });
        let none = ModelPullReport { gguf_files: Vec::new(), ..pull };
        assert!(served_from(&repo, none).is_err());
    }
}
