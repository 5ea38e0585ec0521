//! `cluster status`: per node, reachable, strix-toolbox version, and the toolbox it runs.

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use super::remote::RemoteNode;
use super::{close_all, connect_all, in_cluster_order, ClusterSettings};
use crate::error::Result;
use crate::node::call::Status;
use crate::node::NodeCalls;
use crate::ops::status::{StatusReport, ToolboxStatus};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    pub node: String,
    pub reachable: bool,
    /// Why the node could not be reached or asked.
    pub error: Option<String>,
    pub version: Option<String>,
    pub status: Option<StatusReport>,
}

impl NodeStatus {
    /// The cluster's toolbox on this node.
    pub fn toolbox(&self, name: &str) -> Option<&ToolboxStatus> {
        self.status.as_ref()?.toolboxes.iter().find(|t| t.name == name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterStatusReport {
    pub toolbox: String,
    pub nodes: Vec<NodeStatus>,
    /// What the nodes disagree on (empty: every node reachable, same version, same image and RCCL).
    pub disagreements: Vec<String>,
}

impl ClusterStatusReport {
    fn new(toolbox: &str, nodes: Vec<NodeStatus>) -> ClusterStatusReport {
        let mut disagreements = Vec::new();
        let unreachable: Vec<&str> = nodes.iter().filter(|n| !n.reachable).map(|n| n.node.as_str()).collect();
        if !unreachable.is_empty() {
            disagreements.push(format!("unreachable: {}", unreachable.join(", ")));
        }
        let without: Vec<&str> =
            nodes.iter().filter(|n| n.reachable && n.toolbox(toolbox).is_none()).map(|n| n.node.as_str()).collect();
        if !without.is_empty() {
            disagreements.push(format!("no toolbox {toolbox} on: {}", without.join(", ")));
        }
        let differs = |what: &str, value: &dyn Fn(&NodeStatus) -> Option<String>| {
            let values: std::collections::BTreeSet<_> = nodes.iter().filter(|n| n.reachable).map(value).collect();
            (values.len() > 1).then(|| format!("{what} differs between nodes"))
        };
        disagreements.extend(differs("strix-toolbox version", &|n| n.version.clone()));
        disagreements.extend(differs("image", &|n| n.toolbox(toolbox).map(|t| t.image_identity().to_string())));
        disagreements.extend(differs("RCCL", &|n| n.toolbox(toolbox).and_then(|t| t.rccl_sha256.clone())));
        ClusterStatusReport { toolbox: toolbox.to_string(), nodes, disagreements }
    }
}

pub async fn cluster_status(settings: &ClusterSettings, toolbox: &str) -> Result<ClusterStatusReport> {
    let (connected, unreachable) = connect_all(settings).await;
    let mut nodes: Vec<NodeStatus> = join_all(connected.iter().map(node_status)).await;
    nodes.extend(unreachable.into_iter().map(|(node, error)| NodeStatus {
        node,
        reachable: false,
        error: Some(error.to_string()),
        version: None,
        status: None,
    }));
    in_cluster_order(settings, &mut nodes, |n| &n.node);
    close_all(connected).await;
    Ok(ClusterStatusReport::new(toolbox, nodes))
}

async fn node_status(remote: &RemoteNode) -> NodeStatus {
    let version = remote.version().map(str::to_string);
    let status = remote.call(Status {}).await;
    let (status, error) = match status {
        Ok(status) => (Some(status), None),
        Err(error) => (None, Some(error.to_string())),
    };
    NodeStatus { node: remote.name.clone(), reachable: true, error, version, status }
}
