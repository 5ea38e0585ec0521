//! `cluster status`: per node, reachable, strix-toolbox version, and the toolbox it runs; and what
//! the cluster serves: the engine and model, its endpoint, since when, Ray's nodes alive or each
//! RPC worker and whether it answers the head, whether `/health` answers; and the head's registry
//! (what the spread keeps there, and its size on disk).

use std::net::SocketAddr;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use super::{close_all, connect_all, in_cluster_order, ClusterSettings};
use crate::error::Result;
use crate::node::call::Status;
use crate::node::remote::RemoteNode;
use crate::node::NodeCalls;
use crate::ops::status::StatusReport;
use crate::secret::Secret;
use crate::serving::engine::EngineRef;
use crate::serving::http::HttpAnswer;
use crate::serving::logs::ServeLogs;
use crate::serving::probe::ServeProbe;
use crate::serving::ray::RayNodes;
use crate::serving::rccl_log::RcclNet;
use crate::serving::reach::{Reach, Reached};
use crate::serving::record::{Role, ServingRecord};
use crate::serving::state::{ServeCheck, ServingState};
use crate::spread::status::{RegistryStatus, SpreadStatus};
use crate::toolbox::status::ToolboxStatus;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    pub node: String,
    pub reachable: bool,
    /// Why the node could not be reached or asked.
    pub error: Option<String>,
    pub version: Option<String>,
    pub status: Option<StatusReport>,
    /// What a launch recorded on the node, and what of it runs.
    #[serde(default)]
    pub serving: Option<ServingState>,
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
    /// What the cluster serves, asked on its head (None: nothing was launched).
    #[serde(default)]
    pub serving: Option<ServingSummary>,
    /// What the nodes disagree on (empty: every node reachable, same version, same image and RCCL,
    /// and what was launched runs everywhere it was started).
    pub disagreements: Vec<String>,
    /// The head's registry, which the spread fills (None: it never served an image, or the head
    /// did not answer).
    #[serde(default)]
    pub registry: Option<HeadRegistry>,
}

/// The head's registry as its head reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadRegistry {
    pub node: String,
    #[serde(flatten)]
    pub status: RegistryStatus,
}

/// The serving cluster as its head sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServingSummary {
    #[serde(default)]
    pub engine: EngineRef,
    pub model: String,
    /// The name the endpoint serves it under.
    #[serde(default)]
    pub served: String,
    pub endpoint: String,
    /// When it was launched (RFC 3339).
    pub since: String,
    /// The head (the node that runs `vllm serve`).
    pub head: String,
    /// Nodes the launch started on.
    pub nodes: usize,
    /// Ray's nodes alive with a GPU, per Ray's own table (None: one node, no Ray; or Ray did not answer).
    pub ray_nodes_alive: Option<usize>,
    /// Each worker's server the head must reach (llama.cpp's `rpc-server`), and whether it does.
    #[serde(default)]
    pub workers: Vec<WorkerAnswer>,
    /// `GET /health` at the endpoint, asked on the head.
    pub health: HttpAnswer,
    /// `/health` is 200 and `/v1/models` lists the model (or, with no API key at hand for an
    /// endpoint that wants one, `/health` alone).
    pub serves: bool,
    /// `/v1/models` wants the API key, which this status was not given (`STRIX_API_KEY`).
    #[serde(default)]
    pub key_needed: bool,
    /// What is wrong while it serves: RCCL over sockets on a RoCE link (read from each rank's log).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One worker's server, as the head reaches it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerAnswer {
    pub node: String,
    pub process: String,
    pub address: std::net::SocketAddr,
    pub reached: Reached,
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
        for node in &nodes {
            let Some(state) = &node.serving else { continue };
            let lost = state.lost();
            if !lost.is_empty() {
                disagreements.push(format!(
                    "{}: {} of the launch of {} {} not running (`strix-toolbox cluster logs --node {}` says why; \
                     `cluster launch --replace` starts it again)",
                    node.node,
                    lost.join(" and "),
                    state.record.model,
                    if lost.len() == 1 { "is" } else { "are" },
                    node.node
                ));
            }
        }
        ClusterStatusReport { toolbox: toolbox.to_string(), nodes, serving: None, disagreements, registry: None }
    }
}

/// The cluster's status; `api_key` is sent to an endpoint that wants one.
pub async fn cluster_status(
    settings: &ClusterSettings,
    toolbox: &str,
    api_key: Option<Secret>,
) -> Result<ClusterStatusReport> {
    let (connected, unreachable) = connect_all(settings).await;
    let mut nodes: Vec<NodeStatus> = join_all(connected.iter().map(|node| node_status(node, toolbox))).await;
    nodes.extend(unreachable.into_iter().map(|(node, error)| NodeStatus {
        node,
        reachable: false,
        error: Some(error.to_string()),
        version: None,
        status: None,
        serving: None,
    }));
    in_cluster_order(settings, &mut nodes, |n| &n.node);
    let mut report = ClusterStatusReport::new(toolbox, nodes);
    report.serving = serving_summary(&connected, &report.nodes, toolbox, api_key).await;
    report.registry = head_registry(settings, &connected).await;
    if let Some(serving) = &report.serving {
        if !serving.serves {
            report.disagreements.push("the endpoint does not serve its model (`strix-toolbox cluster logs`)".into());
        }
        for worker in serving.workers.iter().filter(|w| w.reached != Reached::Answers) {
            let (why, _) = worker.reached.why();
            report.disagreements.push(format!(
                "{}: its {} at {} does not answer the head: {why}",
                worker.node, worker.process, worker.address
            ));
        }
    }
    close_all(connected).await;
    Ok(report)
}

/// The head's registry, asked on the head.
async fn head_registry(settings: &ClusterSettings, connected: &[RemoteNode]) -> Option<HeadRegistry> {
    let head = connected.iter().find(|node| Some(&node.name) == settings.nodes.first())?;
    let status = head.call(SpreadStatus {}).await.ok()??;
    Some(HeadRegistry { node: head.name.clone(), status })
}

/// Asked on the node whose record says it serves the endpoint: Ray's table, or whether every
/// worker's server answers it, and the endpoint.
async fn serving_summary(
    connected: &[RemoteNode],
    nodes: &[NodeStatus],
    toolbox: &str,
    api_key: Option<Secret>,
) -> Option<ServingSummary> {
    let (node, state) =
        nodes.iter().find_map(|n| n.serving.as_ref().filter(|s| s.record.role != Role::Worker).map(|s| (n, s)))?;
    let head = connected.iter().find(|r| r.name == node.node)?;
    let record = &state.record;
    let ray_nodes_alive = if record.backend.runs_ray() {
        let table = head.call(RayNodes { toolbox: toolbox.to_string() }).await.ok();
        table.map(|table| table.iter().filter(|n| n.alive && n.gpus >= 1.0).count())
    } else {
        None
    };
    let listeners: Vec<(String, String, SocketAddr)> = nodes
        .iter()
        .filter_map(|n| Some((n, n.serving.as_ref()?)))
        .filter(|(_, s)| s.record.role == Role::Worker && s.record.started == record.started)
        .flat_map(|(n, s)| s.record.processes.iter().filter_map(|p| Some((n.node.clone(), p.name.clone(), p.listens?))))
        .collect();
    let workers = if listeners.is_empty() {
        Vec::new()
    } else {
        let ask = Reach { addresses: listeners.iter().map(|(_, _, address)| *address).collect() };
        let answers = head.call(ask).await.unwrap_or_else(|e| vec![Reached::Unasked(e.to_string()); listeners.len()]);
        listeners
            .into_iter()
            .zip(answers)
            .map(|((node, process, address), reached)| WorkerAnswer { node, process, address, reached })
            .collect()
    };
    let address = SocketAddr::from((record.head_ip, record.port));
    let has_key = api_key.is_some();
    let probe = ServeProbe {
        toolbox: toolbox.to_string(),
        server: record.engine.server().to_string(),
        address,
        api_key,
        look_inside: true,
    };
    let (health, serves, key_needed) = match head.call(probe).await {
        Ok(probe) => {
            let key_needed = probe.key_refused && !has_key;
            let healthy = matches!(probe.health, HttpAnswer::Status(200, _));
            (probe.health.clone(), probe.serves(&record.served) || (key_needed && healthy), key_needed)
        }
        Err(error) => (HttpAnswer::Unasked(error.to_string()), false, false),
    };
    let warnings = match &record.transport {
        Some(link @ crate::spec::Transport::Roce { .. }) => {
            rccl_warnings(connected, nodes, record, link, toolbox).await
        }
        _ => Vec::new(),
    };
    Some(ServingSummary {
        engine: record.engine,
        model: record.model.clone(),
        served: record.served.clone(),
        endpoint: record.endpoint.clone(),
        since: record.started.clone(),
        head: node.node.clone(),
        nodes: record.nodes,
        ray_nodes_alive,
        workers,
        health,
        serves,
        key_needed,
        warnings,
    })
}

/// Each node of this launch whose vLLM log says RCCL took sockets on the RoCE `link`.
async fn rccl_warnings(
    connected: &[RemoteNode],
    nodes: &[NodeStatus],
    record: &ServingRecord,
    link: &crate::spec::Transport,
    toolbox: &str,
) -> Vec<String> {
    let ours = nodes
        .iter()
        .filter(|n| n.serving.as_ref().is_some_and(|s| s.record.started == record.started))
        .filter_map(|n| connected.iter().find(|r| r.name == n.node));
    let ask = ServeLogs { toolbox: toolbox.to_string(), lines: 2000, seen: Vec::new() };
    let logs = join_all(ours.map(|remote| async { (remote.name.clone(), remote.call(ask.clone()).await) })).await;
    logs.into_iter()
        .filter_map(|(node, tails)| {
            let lines = tails.ok()?.into_iter().find(|t| t.file == record.engine.server())?.lines;
            RcclNet::warning(RcclNet::of(&lines), link, &node)
        })
        .collect()
}

async fn node_status(remote: &RemoteNode, toolbox: &str) -> NodeStatus {
    let version = remote.version().map(str::to_string);
    let look = ServeCheck { toolbox: toolbox.to_string(), ..Default::default() };
    let (status, check) = tokio::join!(remote.call(Status {}), remote.call(look));
    let (status, error) = match status {
        Ok(status) => (Some(status), None),
        Err(error) => (None, Some(error.to_string())),
    };
    let serving = check.ok().and_then(|check| check.serving);
    NodeStatus { node: remote.name.clone(), reachable: true, error, version, status, serving }
}
