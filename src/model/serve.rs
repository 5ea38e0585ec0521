//! The head's blob server as node calls: `ModelServe` starts it for one snapshot on the cluster
//! link's address and returns at once; `ModelServeStop` stops it and says what it sent. It is a
//! task of this agent process, so it also ends with the cluster command's channel, and by itself
//! after [`IDLE_LIMIT`] without a request.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::snapshot::manifest_here;
use crate::error::{Error, Result};
use crate::host::HostFacts;
use crate::link::read_link;
use crate::model::blob_server::{BlobServer, ServeStats};
use crate::model::cache::HubCache;
use crate::model::repo_id::RepoId;
use crate::model::revision::Commit;
use crate::serving::secret::Secret;
use crate::settings::Settings;
use crate::spec::Transport;

/// A server nobody asks for this long stops (a head that never sent the stop).
const IDLE_LIMIT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelServe {
    pub repo: RepoId,
    pub commit: Commit,
    /// The pull's key: a fetch without it is refused.
    pub access: Secret,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelServing {
    /// What `ModelServeStop` names.
    pub id: u64,
    /// On the cluster link.
    pub address: SocketAddr,
    pub blobs: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelServeStop {
    pub id: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelServeStopped {
    pub requests: u64,
    /// Blob bytes sent over the link.
    pub bytes: u64,
    pub refused: u64,
}

/// The servers this process runs, by id.
static RUNNING: Mutex<BTreeMap<u64, Running>> = Mutex::new(BTreeMap::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

struct Running {
    stop: oneshot::Sender<()>,
    stats: Arc<ServeStats>,
    task: tokio::task::JoinHandle<()>,
}

pub async fn model_serve(settings: &Settings, request: &ModelServe) -> Result<ModelServing> {
    let repo = HubCache::of_this_process()?.repo(&request.repo);
    let manifest = manifest_here(&repo, &request.commit)?;
    let blobs: BTreeMap<_, _> = manifest.blobs().into_keys().map(|name| (name.clone(), repo.blob(&name))).collect();
    let address = SocketAddr::from((link_address(settings).await?, 0));
    let server = BlobServer::bind(address, blobs.clone(), request.access.clone()).await.map_err(|e| Error::Host {
        what: "the cluster link".into(),
        message: format!("cannot listen on {address} for the other nodes: {e}"),
        fix: Some("check the cluster link's address (`strix-toolbox doctor`)".into()),
    })?;
    let address = server.local_addr().map_err(|e| Error::Internal(format!("a listener without an address: {e}")))?;
    let (stop, stopped) = oneshot::channel();
    let stats = server.stats();
    let task = tokio::spawn(server.run(stopped, IDLE_LIMIT));
    let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
    running().insert(id, Running { stop, stats, task });
    Ok(ModelServing { id, address, blobs: blobs.len() })
}

pub async fn model_serve_stop(request: &ModelServeStop) -> Result<ModelServeStopped> {
    let Some(server) = running().remove(&request.id) else {
        return Err(Error::Internal(format!("no blob server {} runs on this node", request.id)));
    };
    let _ = server.stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), server.task).await;
    let count = |counter: &AtomicU64| counter.load(Ordering::SeqCst);
    Ok(ModelServeStopped {
        requests: count(&server.stats.requests),
        bytes: count(&server.stats.bytes),
        refused: count(&server.stats.refused),
    })
}

fn running() -> std::sync::MutexGuard<'static, BTreeMap<u64, Running>> {
    RUNNING.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// This node's address on the cluster link: the only one the server listens on.
async fn link_address(settings: &Settings) -> Result<Ipv4Addr> {
    let facts = HostFacts::read(&settings.open_host_root()?)?;
    let transport = Transport::of(&facts);
    let no_link = |message: String| Error::Host {
        what: "the cluster link".into(),
        message,
        fix: Some("`strix-toolbox doctor` names what the cluster link lacks".into()),
    };
    let netdev = transport
        .netdev()
        .ok_or_else(|| no_link("this node has no cluster link (no ACTIVE RoCE port, no thunderbolt0 up)".into()))?;
    read_link(netdev)
        .await?
        .and_then(|link| link.address)
        .ok_or_else(|| no_link(format!("the cluster link {netdev} has no IPv4 address")))
}
