//! The cluster: what runs across nodes, on any [`Node`](crate::node::Node) (over ssh, or this
//! machine). This module adds only what needs more than one node: the same digest everywhere,
//! all-or-nothing phases, the spread, the model's transfer, launch/stop/logs, and the cross-node
//! checks.

pub(crate) mod bench;
pub(crate) mod canary;
pub(crate) mod checks;
pub(crate) mod disconnect;
pub(crate) mod doctor;
pub(crate) mod facts;
pub(crate) mod fit;
pub(crate) mod hub_gguf;
pub(crate) mod install;
pub(crate) mod interrupt;
pub(crate) mod keys;
pub(crate) mod launch;
pub(crate) mod logs;
pub(crate) mod measured;
pub mod metrics;
pub(crate) mod metrics_nodes;
pub(crate) mod model;
pub(crate) mod nodes;
pub(crate) mod on_demand;
pub(crate) mod proof;
pub(crate) mod recipe;
pub(crate) mod refresh;
pub(crate) mod router;
pub(crate) mod shared_home;
pub(crate) mod spread;
pub(crate) mod status;
pub(crate) mod stop;
#[cfg(test)]
pub(crate) mod testing;
pub(crate) mod top;
pub(crate) mod verify;
pub(crate) mod watch;

use std::sync::Arc;

use futures_util::future::join_all;

use crate::error::{Error, MultiError, Result};
use crate::node::remote::RemoteNode;
use crate::node::ssh::SshOptions;
use crate::node::Node;
use crate::reporter::Reporter;

/// The nodes and how to reach them, resolved once.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    /// ssh destinations, head first.
    pub nodes: Vec<String>,
    pub ssh: SshOptions,
    pub reporter: Arc<dyn Reporter>,
}

/// Connect to every node at once: the connected ones in the cluster's order, and the others with
/// why (one node down is not all down; each operation decides what that means).
pub async fn connect_all(settings: &ClusterSettings) -> (Vec<RemoteNode>, Vec<(String, Error)>) {
    let connecting = settings.nodes.iter().map(|node| RemoteNode::connect(node, &settings.ssh));
    let mut connected = Vec::new();
    let mut unreachable = Vec::new();
    for (node, outcome) in settings.nodes.iter().zip(join_all(connecting).await) {
        match outcome {
            Ok(remote) => connected.push(remote),
            Err(error) => unreachable.push((node.clone(), error)),
        }
    }
    (connected, unreachable)
}

/// Connect to every node, all of them reachable and running this strix-toolbox, or none: the
/// error names each node that is not, and `summary` says what it means ("nothing was changed").
async fn connect_ours(settings: &ClusterSettings, summary: &str) -> Result<Vec<RemoteNode>> {
    let (nodes, unreachable) = connect_all(settings).await;
    let mut problems = MultiError::new(summary);
    for (node, error) in unreachable {
        problems.push(node, error);
    }
    for node in &nodes {
        if let Err(error) = node.require_ours() {
            problems.push(&node.name, error);
        }
    }
    if problems.is_empty() {
        return Ok(nodes);
    }
    close_all(nodes).await;
    Err(problems.into())
}

/// Connect to every node, run `work` on those that answer (in the cluster's order; the others
/// with why: one node down is not all down, `work` decides what that means), and close them
/// whatever `work` returned.
pub async fn with_nodes<T>(
    settings: &ClusterSettings,
    work: impl AsyncFnOnce(&[&dyn Node], Vec<(String, Error)>) -> T,
) -> T {
    let (nodes, unreachable) = connect_all(settings).await;
    let result = work(&as_nodes(&nodes), unreachable).await;
    close_all(nodes).await;
    result
}

/// Connect to every node, all of them reachable and running this strix-toolbox, or none (the
/// error names each node that is not, and `summary` says what it means: "nothing was changed");
/// run `work` on them, and close them whatever it returned.
pub async fn with_our_nodes<T>(
    settings: &ClusterSettings,
    summary: &str,
    work: impl AsyncFnOnce(&[&dyn Node]) -> Result<T>,
) -> Result<T> {
    let nodes = connect_ours(settings, summary).await?;
    let result = work(&as_nodes(&nodes)).await;
    close_all(nodes).await;
    result
}

fn as_nodes(nodes: &[RemoteNode]) -> Vec<&dyn Node> {
    nodes.iter().map(|node| node as &dyn Node).collect()
}

/// Order per-node results as the cluster lists its nodes.
fn in_cluster_order<T>(settings: &ClusterSettings, items: &mut [T], node: impl Fn(&T) -> &str) {
    items.sort_by_key(|item| settings.nodes.iter().position(|n| n == node(item)));
}

/// Close every connected node (their master connections end).
pub async fn close_all(nodes: Vec<RemoteNode>) {
    join_all(nodes.into_iter().map(RemoteNode::close)).await;
}
