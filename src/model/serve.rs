//! The head's blob server as node calls: `ModelServe` starts it for one snapshot on the cluster
//! link's address, over TLS with the head's certificate from the cluster CA (the registry's: one
//! CA, one certificate for the link address), and returns at once with that CA for the nodes to
//! check it against; `ModelServeStop` ends the pull's key, stops it and says what it sent. It is a
//! task of this agent process, so it also ends with the cluster command's channel, and by itself
//! after [`IDLE_LIMIT`] without a request.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::snapshot::manifest_here;
use crate::error::{Error, Result};
use crate::link::address::cluster_link;
use crate::link::ca;
use crate::link::home::RegistryHome;
use crate::link::kept_tasks::KeptTasks;
use crate::model::blob_server::{BlobServer, ServeStats};
use crate::model::cache::HubCache;
use crate::model::repo_id::RepoId;
use crate::model::revision::Commit;
use crate::secret::Secret;
use crate::settings::Settings;

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
    /// The cluster CA, which signed the server's certificate.
    pub ca_pem: String,
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
static RUNNING: KeptTasks<Running> = KeptTasks::new();

struct Running {
    stop: oneshot::Sender<()>,
    stats: Arc<ServeStats>,
    task: tokio::task::JoinHandle<()>,
}

pub async fn model_serve(settings: &Settings, request: &ModelServe) -> Result<ModelServing> {
    let repo = HubCache::of(&settings.paths)?.repo(&request.repo);
    let manifest = manifest_here(&repo, &request.commit)?;
    let blobs: BTreeMap<_, _> = manifest.blobs().into_keys().map(|name| (name.clone(), repo.blob(&name))).collect();
    // The cluster link's address alone: nothing off the link reaches the blobs.
    let ip = cluster_link(settings).await?.address()?;
    let home = RegistryHome::locate(&settings.paths)?;
    home.create()?;
    let ca = ca::load_or_make(&home)?;
    let identity = ca::server_identity(&home, &ca, ip)?;
    let address = SocketAddr::from((ip, 0));
    let server =
        BlobServer::bind(address, blobs.clone(), request.access.clone(), &identity).await.map_err(|e| Error::Host {
            what: "the cluster link".into(),
            message: format!("cannot listen on {address} for the other nodes: {e}"),
            fix: Some("check the cluster link's address (`strix-toolbox doctor`)".into()),
        })?;
    let address = server.local_addr().map_err(|e| Error::Internal(format!("a listener without an address: {e}")))?;
    let (stop, stopped) = oneshot::channel();
    let stats = server.stats();
    let task = tokio::spawn(server.run(stopped, IDLE_LIMIT));
    let id = RUNNING.keep(Running { stop, stats, task });
    Ok(ModelServing { id, address, ca_pem: ca.cert_pem, blobs: blobs.len() })
}

pub async fn model_serve_stop(request: &ModelServeStop) -> Result<ModelServeStopped> {
    let Some(server) = RUNNING.take(request.id) else {
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
