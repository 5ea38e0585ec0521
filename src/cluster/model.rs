//! `cluster model pull MODEL` (and `model pull` on one node): the model crosses the uplink once.
//! The head downloads it with huggingface_hub in its toolbox and verifies every blob; then it
//! serves that snapshot's blobs on the cluster link for the length of the pull, and every other
//! node fetches only the blobs it lacks or holds wrong, checking each against its hash, and
//! writes the same snapshot and ref. `cluster model list` shows each node's cache; `cluster
//! launch` uses [`ensure_everywhere`] so that vLLM can run with `HF_HUB_OFFLINE=1`.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use crate::error::{Error, MultiError, Result};
use crate::model::blob_fetch::BlobSource;
use crate::model::download::ModelDownload;
use crate::model::fetch::ModelFetch;
use crate::model::gguf_pick::GgufPick;
use crate::model::list::{ModelCacheReport, ModelList};
use crate::model::manifest::SnapshotFile;
use crate::model::repo_id::RepoId;
use crate::model::revision::{Commit, Revision};
use crate::model::serve::{ModelServe, ModelServeStop};
use crate::node::{Node, NodeCalls};
use crate::reporter::{Bytes, Reporter};
use crate::secret::Secret;

/// Between two looks at how far a transfer is.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);
/// The least time between two lines about the head's download.
const DOWNLOAD_NEWS_INTERVAL: Duration = Duration::from_secs(10);

/// What to pull, and how to reach the Hub.
#[derive(Debug, Clone)]
pub struct ModelPullRequest {
    pub toolbox: String,
    pub repo: RepoId,
    pub revision: Option<Revision>,
    /// The operator's `HF_*` settings for the head's download (`model::hub_env`).
    pub hub_env: BTreeMap<String, String>,
    pub hf_token: Option<Secret>,
    /// Only this GGUF's file(s), onto the head only (llama.cpp: the workers get tensors over RPC).
    pub gguf: Option<GgufPick>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPullReport {
    pub repo: RepoId,
    pub revision: Revision,
    pub commit: Commit,
    pub files: usize,
    /// The snapshot's blob bytes: the model's size.
    pub bytes: u64,
    pub head: HeadDownload,
    pub nodes: Vec<NodeFetch>,
    /// Blob bytes the head sent over the cluster link.
    pub link_bytes: u64,
    pub seconds: f64,
    /// The GGUF file(s) pulled (a GGUF pick), the model's first part first: each blob is its sha256.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gguf_files: Vec<SnapshotFile>,
}

/// The head's part: the one copy that came from the Hub.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadDownload {
    pub node: String,
    pub cache: String,
    pub hub_version: String,
    /// Blob bytes added to its cache by this pull (0 when it had the snapshot).
    pub downloaded_bytes: u64,
    /// Files whose blob was wrong on the head and came from the Hub again.
    pub repaired: Vec<String>,
}

/// Another node's part: what it received from the head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFetch {
    pub node: String,
    pub cache: String,
    pub fetched: usize,
    pub fetched_bytes: u64,
    pub kept: usize,
    /// Files whose blob was here but wrong, and was fetched again.
    pub repaired: Vec<String>,
}

/// Pull onto `nodes` (the first is the head, the one that downloads).
pub async fn model_pull(
    nodes: &[&dyn Node],
    request: &ModelPullRequest,
    reporter: &dyn Reporter,
) -> Result<ModelPullReport> {
    let started = Instant::now();
    let head = *nodes.first().ok_or_else(|| Error::Usage("no nodes to pull onto".into()))?;
    let download = ModelDownload {
        toolbox: request.toolbox.clone(),
        repo: request.repo.clone(),
        revision: request.revision.clone(),
        hub_env: request.hub_env.clone(),
        hf_token: request.hf_token.clone(),
        gguf: request.gguf.clone(),
    };
    reporter.step_started(head.name(), &format!("downloading {} from the Hub", request.repo));
    let downloaded = download_news(head, head.call(download), &request.repo, reporter).await.map_err(|error| {
        MultiError::one("the head could not download the model; no node changed", head.name(), error)
    })?;
    let manifest = downloaded.manifest;
    let gguf_files = downloaded
        .gguf_files
        .iter()
        .filter_map(|path| manifest.files.iter().find(|file| &file.path == path).cloned())
        .collect();
    let bytes = manifest.blob_bytes();
    reporter.step_finished(
        head.name(),
        &format!(
            "{} at {} verified: {} file(s), {} ({} from the Hub)",
            request.repo,
            manifest.commit.short(),
            manifest.files.len(),
            Bytes(bytes),
            Bytes(downloaded.downloaded_bytes)
        ),
    );
    let mut report = ModelPullReport {
        repo: request.repo.clone(),
        revision: downloaded.revision.clone(),
        commit: manifest.commit.clone(),
        files: manifest.files.len(),
        bytes,
        head: HeadDownload {
            node: head.name().to_string(),
            cache: downloaded.cache,
            hub_version: downloaded.hub_version,
            downloaded_bytes: downloaded.downloaded_bytes,
            repaired: downloaded.repaired,
        },
        nodes: Vec::new(),
        link_bytes: 0,
        seconds: 0.0,
        gguf_files,
    };
    if nodes.len() > 1 {
        let access = Secret::random()?;
        let serve = ModelServe { repo: request.repo.clone(), commit: manifest.commit.clone(), access: access.clone() };
        let serving = head
            .call(serve)
            .await
            .map_err(|error| MultiError::one("the head could not serve the model", head.name(), error))?;
        let source = BlobSource { address: serving.address, ca_pem: serving.ca_pem.clone(), access };
        let fetch = ModelFetch { manifest: manifest.clone(), revision: downloaded.revision, source };
        let fetches = nodes[1..].iter().map(|node| {
            reporter.step_started(node.name(), &format!("receiving {} from {}", request.repo, serving.address));
            fetch_progress(*node, node.call(fetch.clone()), &request.repo, bytes, reporter)
        });
        let results = join_all(fetches).await;
        reporter.finish();
        let stopped = head.call(ModelServeStop { id: serving.id }).await;
        let mut failed = MultiError::new("the model did not reach every node");
        for (node, result) in nodes[1..].iter().zip(results) {
            match result {
                Ok(fetched) => {
                    reporter.step_finished(
                        node.name(),
                        &format!(
                            "received {} in {} blob(s), kept {}",
                            Bytes(fetched.fetched_bytes),
                            fetched.fetched,
                            fetched.kept
                        ),
                    );
                    report.nodes.push(NodeFetch {
                        node: node.name().to_string(),
                        cache: fetched.cache,
                        fetched: fetched.fetched,
                        fetched_bytes: fetched.fetched_bytes,
                        kept: fetched.kept,
                        repaired: fetched.repaired,
                    });
                }
                Err(error) => failed.push(node.name(), error),
            }
        }
        match stopped {
            Ok(stopped) => report.link_bytes = stopped.bytes,
            Err(error) => reporter.warning(&format!("{}: its blob server did not stop cleanly: {error}", head.name())),
        }
        if !failed.is_empty() {
            return Err(failed
                .with_outcome(
                    "The nodes that received it keep it; pull again to finish the others (only what they lack moves).",
                )
                .into());
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Every node's cache (only `request.repo`'s entry when it names one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelListReport {
    pub nodes: Vec<NodeModels>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeModels {
    pub node: String,
    pub cache: Option<ModelCacheReport>,
    /// Why the node could not say (unreachable, no HOME...).
    pub error: Option<String>,
}

pub async fn model_list(nodes: &[&dyn Node], request: &ModelList) -> ModelListReport {
    let answers = join_all(nodes.iter().map(|node| node.call(request.clone()))).await;
    let nodes = nodes
        .iter()
        .zip(answers)
        .map(|(node, answer)| match answer {
            Ok(cache) => NodeModels { node: node.name().to_string(), cache: Some(cache), error: None },
            Err(error) => NodeModels { node: node.name().to_string(), cache: None, error: Some(error.to_string()) },
        })
        .collect();
    ModelListReport { nodes }
}

/// The model in every node's cache, as `launch` needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedEverywhere {
    pub commit: Commit,
    /// Each node's cache, in the nodes' order.
    pub caches: Vec<String>,
    /// The pull that put it there, when one was needed.
    pub pull: Option<ModelPullReport>,
}

/// The commit every node has a complete snapshot of for `revision` (a ref or a commit), with
/// each node's cache; None when some node lacks it or they disagree.
pub async fn cached_everywhere(
    nodes: &[&dyn Node],
    repo: &RepoId,
    revision: &Revision,
) -> Result<Option<CachedEverywhere>> {
    let list = ModelList { repo: Some(repo.clone()), verify: false };
    let answers = join_all(nodes.iter().map(|node| node.call(list.clone()))).await;
    let mut commits = Vec::new();
    let mut caches = Vec::new();
    for (node, answer) in nodes.iter().zip(answers) {
        let cache =
            answer.map_err(|error| MultiError::one("the nodes' model caches could not be read", node.name(), error))?;
        let usable = cache.repo(repo).and_then(|cached| {
            let commit = cached.commit_of(revision.as_str())?;
            cached.revision(commit).filter(|r| r.usable()).map(|r| r.commit.clone())
        });
        commits.push(usable);
        caches.push(cache.cache);
    }
    Ok(match commits.first() {
        Some(Some(first)) if commits.iter().all(|c| c.as_ref() == Some(first)) => {
            Some(CachedEverywhere { commit: first.clone(), caches, pull: None })
        }
        _ => None,
    })
}

/// The model on every node: as it is when every node has it, else pulled now.
pub async fn ensure_everywhere(
    nodes: &[&dyn Node],
    request: &ModelPullRequest,
    reporter: &dyn Reporter,
) -> Result<CachedEverywhere> {
    let revision = request.revision.clone().unwrap_or_else(Revision::main);
    if let Some(cached) = cached_everywhere(nodes, &request.repo, &revision).await? {
        return Ok(cached);
    }
    let pull = model_pull(nodes, request, reporter).await?;
    let mut caches = vec![pull.head.cache.clone()];
    caches.extend(pull.nodes.iter().map(|node| node.cache.clone()));
    Ok(CachedEverywhere { commit: pull.commit.clone(), caches, pull: Some(pull) })
}

/// Wait for the head's download, saying now and then how much has come.
async fn download_news<T>(
    head: &dyn Node,
    call: impl Future<Output = Result<T>>,
    repo: &RepoId,
    reporter: &dyn Reporter,
) -> Result<T> {
    let list = ModelList { repo: Some(repo.clone()), verify: false };
    let on_disk = |cache: &ModelCacheReport| cache.repo(repo).map_or(0, |r| r.bytes_on_disk);
    let before = head.call(list.clone()).await.map(|cache| on_disk(&cache)).unwrap_or(0);
    let mut said = (before, Instant::now());
    let mut ticker = tokio::time::interval(PROGRESS_INTERVAL);
    tokio::pin!(call);
    loop {
        tokio::select! {
            result = &mut call => return result,
            _ = ticker.tick() => {
                let Ok(cache) = head.call(list.clone()).await else { continue };
                let now = on_disk(&cache);
                if now != said.0 && said.1.elapsed() >= DOWNLOAD_NEWS_INTERVAL {
                    let so_far = Bytes(now.saturating_sub(before));
                    reporter.step_started(head.name(), &format!("downloading {repo}: {so_far} so far"));
                    said = (now, Instant::now());
                }
            }
        }
    }
}

/// Wait for a node's fetch, reporting its bytes against the snapshot's.
async fn fetch_progress<T>(
    node: &dyn Node,
    call: impl Future<Output = Result<T>>,
    repo: &RepoId,
    total: u64,
    reporter: &dyn Reporter,
) -> Result<T> {
    let list = ModelList { repo: Some(repo.clone()), verify: false };
    let mut ticker = tokio::time::interval(PROGRESS_INTERVAL);
    tokio::pin!(call);
    loop {
        tokio::select! {
            result = &mut call => {
                reporter.layer_done(node.name(), "Download complete");
                return result;
            }
            _ = ticker.tick() => {
                if let Ok(cache) = node.call(list.clone()).await {
                    let done = cache.repo(repo).map_or(0, |r| r.bytes_on_disk).min(total);
                    reporter.layer(node.name(), "Downloading", done, total);
                }
            }
        }
    }
}
