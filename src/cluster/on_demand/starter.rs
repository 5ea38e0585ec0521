//! What the router on the cluster's head starts and stops services on demand with: the cluster's
//! own launch and stop, run from the head. The head is this process's own node (its calls run in
//! this process, as `launch` on one node runs them); the service's other nodes are reached over
//! ssh as the head reaches them (the registration's `--ssh-config`, when the head has that file,
//! else the head's own ssh config), with this build of strix-toolbox on each.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::OnDemandLaunch;
use crate::cluster::launch::launch;
use crate::cluster::stop::{services_on, stop_service};
use crate::error::{MultiError, Result};
use crate::node::local::LocalNode;
use crate::node::remote::RemoteNode;
use crate::node::ssh::SshOptions;
use crate::node::Node;
use crate::paths::Paths;
use crate::reporter::Reporter;
use crate::router::routes::{Registered, RouterFiles};
use crate::router::Starter;
use crate::secret::Secret;
use crate::serving::room::Held;
use crate::settings::Settings;

/// How long the head's ssh master to a node stays up after a start or stop, for the next to
/// reuse (the look for room and the launch right after it, the next request's start).
const SSH_PERSIST: Duration = Duration::from_secs(300);

/// The router's starter on the cluster's head.
pub struct ClusterStarter {
    /// This node, as its own strix-toolbox sees it.
    settings: Settings,
    /// The router's files: its key is what a start's launch serves with.
    files: RouterFiles,
    /// The head's own Hub token and settings, for a start that pulls its model.
    hf_token: Option<Secret>,
    hub_env: BTreeMap<String, String>,
    reporter: Arc<dyn Reporter>,
}

impl ClusterStarter {
    pub fn new(
        settings: Settings,
        files: RouterFiles,
        hf_token: Option<Secret>,
        hub_env: BTreeMap<String, String>,
    ) -> ClusterStarter {
        let reporter = settings.reporter.clone();
        ClusterStarter { settings, files, hf_token, hub_env, reporter }
    }

    /// The cluster's head (this node) and the service's other nodes, connected.
    async fn connect(&self, registered: &Registered) -> Result<Connected> {
        let launch = OnDemandLaunch::read(&registered.launch, &registered.name)?;
        let head = LocalNode::named(&launch.head, self.settings.clone());
        let ssh = SshOptions {
            config_file: launch.ssh_config.clone().filter(|file| file.exists()),
            connect_timeout: Duration::from_secs(launch.connect_timeout_seconds),
            runtime_dir: Paths::of_this_process().runtime_path().to_path_buf(),
            persist: SSH_PERSIST,
        };
        let others: Vec<&String> = launch.on.iter().filter(|name| **name != launch.head).collect();
        let connecting = others.iter().map(|name| RemoteNode::connect(name, &ssh));
        let mut remote = Vec::new();
        let mut unreachable = MultiError::new(format!(
            "the cluster's head cannot reach {}'s nodes over ssh: nothing was started",
            registered.name
        ));
        for (name, outcome) in others.iter().zip(futures_util::future::join_all(connecting).await) {
            match outcome.and_then(|node| node.require_ours().map(|()| node)) {
                Ok(node) => remote.push(node),
                Err(error) => unreachable.push(name.as_str(), error),
            }
        }
        if !unreachable.is_empty() {
            crate::cluster::close_all(remote).await;
            return Err(unreachable.into());
        }
        Ok(Connected { launch, head, remote })
    }
}

/// A service's nodes, connected from the cluster's head.
struct Connected {
    launch: OnDemandLaunch,
    head: LocalNode,
    remote: Vec<RemoteNode>,
}

impl Connected {
    /// The head first, then the others.
    fn nodes(&self) -> Vec<&dyn Node> {
        std::iter::once(&self.head as &dyn Node).chain(self.remote.iter().map(|node| node as &dyn Node)).collect()
    }

    /// The service's own nodes.
    fn service_nodes(&self) -> Vec<&dyn Node> {
        self.nodes().into_iter().filter(|node| self.launch.on.iter().any(|n| n == node.name())).collect()
    }

    async fn close(self) {
        crate::cluster::close_all(self.remote).await;
    }
}

#[async_trait]
impl Starter for ClusterStarter {
    async fn held(&self, registered: &Registered) -> Result<Vec<Held>> {
        let connected = self.connect(registered).await?;
        let listed = services_on(&connected.service_nodes()).await;
        connected.close().await;
        let mut held = Vec::new();
        for (node, services) in listed {
            for state in services?.into_iter().filter(|state| state.active()) {
                held.push(Held { node: node.clone(), service: state.record.service, bytes: state.record.memory_bytes });
            }
        }
        Ok(held)
    }

    async fn start(&self, registered: &Registered) -> Result<std::net::SocketAddr> {
        let api_key = self.files.read_key()?;
        let connected = self.connect(registered).await?;
        let launched =
            match connected.launch.request(&registered.name, api_key, self.hf_token.clone(), self.hub_env.clone()) {
                Ok(request) => {
                    launch(&connected.nodes(), &request, self.reporter.as_ref()).await.map(|report| report.upstream)
                }
                Err(error) => Err(error),
            };
        connected.close().await;
        launched
    }

    async fn stop(&self, registered: &Registered) -> Result<()> {
        let connected = self.connect(registered).await?;
        let stopped = stop_service(&connected.service_nodes(), &registered.name).await.into_result();
        connected.close().await;
        stopped.map(drop)
    }
}
