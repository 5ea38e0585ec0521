//! The head's relay as node calls, so the nodes pull while the head is still fetching:
//! `SpreadRelay` fetches the image's manifests from upstream, starts the copy into the head's
//! registry and the relay ([`Relay`]) on the cluster link's address (`--spread-relay-port`), and
//! returns at once; `SpreadRelayEnd` waits for the copy (its error is the spread's), stops the
//! relay and says what it sent. When the head's registry has the image whole already, nothing is
//! relayed: the nodes pull from the registry itself. Both are tasks of this agent process: they
//! end with the cluster command's channel, and the relay by itself after [`IDLE_LIMIT`] without
//! a request.

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::copy::{copy_listed, list_image, pinned_digest, record_served, SpreadCopied};
use super::registry::writer_client;
use super::relay::{Relay, RelayStats, RelayedImage};
use super::spool::Spools;
use crate::apply::interruptible;
use crate::error::{Error, Result};
use crate::image::reference::ImageRef;
use crate::link::ca;
use crate::link::home::RegistryHome;
use crate::link::kept_tasks::KeptTasks;
use crate::registry::RegistryClient;
use crate::settings::Settings;

/// A relay nobody asks for this long stops (a head that never sent the end).
const IDLE_LIMIT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadRelay {
    /// `repo@sha256:…`: the image as upstream names it.
    pub image: String,
    /// The head's registry, `IP:PORT` on the cluster link.
    pub registry: String,
    /// The relay's port, on the same address.
    pub port: u16,
    /// The toolbox it is for (prune keeps per toolbox).
    pub toolbox: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadRelaying {
    /// What `SpreadRelayEnd` names.
    pub id: u64,
    /// The relay, `IP:PORT` on the cluster link; None: the head's registry has the image whole,
    /// the nodes pull from there.
    pub relay: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadRelayEnd {
    pub id: u64,
    /// Stop the copy too rather than wait for it (the refresh was interrupted).
    pub cancel: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadRelayEnded {
    pub copied: SpreadCopied,
    /// Blob bytes the relay sent over the link.
    pub relayed: u64,
    pub requests: u64,
}

/// The relays this process runs, by id.
static RUNNING: KeptTasks<Running> = KeptTasks::new();

struct Running {
    copy: JoinHandle<Result<SpreadCopied>>,
    /// None: nothing relayed.
    relay: Option<(oneshot::Sender<()>, Arc<RelayStats>, JoinHandle<()>)>,
}

pub async fn spread_relay(settings: &Settings, request: &SpreadRelay) -> Result<SpreadRelaying> {
    let image = ImageRef::parse(&request.image)?;
    let digest = pinned_digest(&image, &request.image)?;
    let registry: SocketAddrV4 = request
        .registry
        .parse()
        .map_err(|_| Error::Internal(format!("{:?} is not the IP:PORT of the cluster registry", request.registry)))?;
    let home = RegistryHome::locate(&settings.paths)?;
    let lock = home.lock().await?;
    let head = writer_client(&home, &request.registry)?;
    let path = image.path();
    if head.has_manifest(&path, &digest).await? {
        record_served(&home, &path, &digest, &request.toolbox)?;
        let copied = SpreadCopied { digest, ..Default::default() };
        let id = RUNNING.keep(Running { copy: tokio::spawn(async move { Ok(copied) }), relay: None });
        return Ok(SpreadRelaying { id, relay: None });
    }
    let listing = async {
        let upstream = RegistryClient::upstream(&image, settings.engine.program()).await?;
        let listed = list_image(&upstream, &path, &digest).await?;
        Ok((upstream, listed))
    };
    let (upstream, listed) = interruptible(&format!("listing {} upstream", request.image), listing).await?;
    let spools = Spools::new(&home.dir.join("relay"), &listed.blobs)
        .map(Arc::new)
        .map_err(|e| Error::read(home.dir.join("relay"), e))?;
    let ca = ca::load_or_make(&home)?;
    let identity = ca::server_identity(&home, &ca, *registry.ip())?;
    let head = Arc::new(head);
    let relayed = RelayedImage {
        path: path.clone(),
        manifests: listed.manifests().map(|manifest| (manifest.digest.clone(), manifest.clone())).collect(),
        spools: spools.clone(),
        registry: head.clone(),
    };
    let address = SocketAddr::from((*registry.ip(), request.port));
    let relay = Relay::bind(address, relayed, &identity, &ca.cert_pem).await.map_err(|e| Error::Host {
        what: "the cluster link".into(),
        message: format!("cannot listen on {address} to relay the image to the other nodes: {e}"),
        fix: Some(format!("free port {} on the head, or choose another with --spread-relay-port", request.port)),
    })?;
    let address = relay.local_addr().map_err(|e| Error::Internal(format!("a listener without an address: {e}")))?;
    let (stop, stopped) = oneshot::channel();
    let stats = relay.stats();
    let serving = tokio::spawn(relay.run(stopped, IDLE_LIMIT));
    let toolbox = request.toolbox.clone();
    let copy = tokio::spawn(async move {
        let _lock = lock;
        let copied = copy_listed(&upstream, &head, &path, &listed, Some(&spools)).await;
        // Whatever it did not finish is cut: no node waits for bytes that will not come.
        spools.fail_unfinished("the head's copy from upstream failed");
        let copied = copied?;
        record_served(&home, &path, &digest, &toolbox)?;
        Ok::<_, Error>(copied)
    });
    let id = RUNNING.keep(Running { copy, relay: Some((stop, stats, serving)) });
    Ok(SpreadRelaying { id, relay: Some(address.to_string()) })
}

pub async fn spread_relay_end(request: &SpreadRelayEnd) -> Result<SpreadRelayEnded> {
    let Some(running) = RUNNING.take(request.id) else {
        return Err(Error::Internal(format!("no image relay {} runs on this node", request.id)));
    };
    if request.cancel {
        running.copy.abort();
    }
    let copied = match running.copy.await {
        Ok(copied) => copied,
        Err(error) if error.is_cancelled() => Err(Error::Internal("the head's copy from upstream was stopped".into())),
        Err(error) => Err(Error::Internal(format!("the head's copy from upstream failed: {error}"))),
    };
    let mut ended = SpreadRelayEnded::default();
    if let Some((stop, stats, serving)) = running.relay {
        let _ = stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), serving).await;
        ended.relayed = stats.bytes.load(Ordering::SeqCst);
        ended.requests = stats.requests.load(Ordering::SeqCst);
    }
    ended.copied = copied?;
    Ok(ended)
}
