//! `cluster status`: per node, reachable, strix-toolbox version, and the toolbox it runs; every
//! service the cluster serves (by name: its engine and model, its nodes and layout, since when,
//! Ray's nodes alive or each RPC worker and whether it answers its head, its engine's `/health`
//! asked on its head, and its route's health through the router, and what the plan put on each
//! of its nodes beside what the engine said it allocated); the router (its address, pid and
//! routes); and the head's registry (what the spread keeps there, and its size on disk).

use std::net::SocketAddr;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use super::watch::dir::WatchDir;
use super::watch::state::{watched, WatchedService};
use super::{close_all, connect_all, in_cluster_order, ClusterSettings};
use crate::cluster::measured::measured;
use crate::error::Result;
use crate::node::call::StatusCall;
use crate::node::remote::RemoteNode;
use crate::node::router::RouterState;
use crate::node::NodeCalls;
use crate::ops::status::StatusReport;
use crate::secret::Secret;
use crate::serving::engine::tcp_on_roce;
use crate::serving::engine::EngineRef;
use crate::serving::fit::Measured;
use crate::serving::http::HttpAnswer;
use crate::serving::logs::{LogTail, ServeLogs};
use crate::serving::probe::ServeProbe;
use crate::serving::ray::RayNodes;
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
    /// Every service recorded on the node, and what of each runs.
    #[serde(default)]
    pub services: Vec<ServingState>,
}

impl NodeStatus {
    /// The cluster's toolbox on this node.
    pub fn toolbox(&self, name: &str) -> Option<&ToolboxStatus> {
        self.status.as_ref()?.toolboxes.iter().find(|t| t.name == name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterStatusReport {
    /// The toolbox whose rows the table shows (`--name`, `--engine`'s; else the services').
    pub toolbox: String,
    pub nodes: Vec<NodeStatus>,
    /// Every service recorded, by name, each asked on its head.
    #[serde(default)]
    pub services: Vec<ServiceSummary>,
    /// The router on the cluster's head (None: the head did not answer).
    #[serde(default)]
    pub router: Option<RouterState>,
    /// What the nodes disagree on (empty: every node reachable, same version, same image and RCCL,
    /// every service runs everywhere it was started, serves, and is routed).
    pub disagreements: Vec<String>,
    /// The head's registry, which the spread fills (None: it never served an image, or the head
    /// did not answer).
    #[serde(default)]
    pub registry: Option<HeadRegistry>,
    /// Each service the cluster's watch follows (`cluster watch`), as it last saw it: given up,
    /// and why, above all (left out when nothing is watched).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watch: Vec<WatchedService>,
}

/// The head's registry as its head reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadRegistry {
    pub node: String,
    #[serde(flatten)]
    pub status: RegistryStatus,
}

/// One service as its head sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceSummary {
    /// Its name: what its clients send as `model`.
    pub name: String,
    #[serde(default)]
    pub engine: EngineRef,
    pub model: String,
    /// The name its engine serves it under.
    #[serde(default)]
    pub served: String,
    /// Where clients reach it (the router).
    pub endpoint: String,
    /// Where its engine answers.
    pub upstream: SocketAddr,
    /// When it was launched (RFC 3339).
    pub since: String,
    /// The service's head (where its engine's server runs).
    pub head: String,
    /// Its nodes, its head first.
    pub nodes: Vec<String>,
    /// How it spans them (`rpc over 2 nodes`, `mp over 3 nodes, TP 1 × PP 3`).
    pub layout: String,
    /// The toolbox that serves it.
    pub toolbox: String,
    /// Ray's nodes alive with a GPU, per Ray's own table (None: one node, no Ray; or Ray did not answer).
    pub ray_nodes_alive: Option<usize>,
    /// Each worker's server the head must reach (llama.cpp's `rpc-server`), and whether it does.
    #[serde(default)]
    pub workers: Vec<WorkerAnswer>,
    /// `GET /health` at its engine, asked on its head.
    pub health: HttpAnswer,
    /// `/health` is 200 and `/v1/models` lists it, at its engine.
    pub serves: bool,
    /// Its engine's health through the router (`/health` there): `ok`, or why not; None when the
    /// router does not route it (or did not answer).
    #[serde(default)]
    pub routed: Option<String>,
    /// What is wrong while it serves: RCCL over sockets on a RoCE link (read from each rank's log).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Per node the launch planned for: the plan's weights, KV cache and context there, beside
    /// what the engine's log says it allocated (left out when the launch had no plan).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measured: Vec<Measured>,
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
    fn new(toolbox: &str, nodes: Vec<NodeStatus>, services: Vec<ServiceSummary>, router: Option<RouterState>) -> Self {
        let mut disagreements = Vec::new();
        let unreachable: Vec<&str> = nodes.iter().filter(|n| !n.reachable).map(|n| n.node.as_str()).collect();
        if !unreachable.is_empty() {
            disagreements.push(format!("unreachable: {}", unreachable.join(", ")));
        }
        // The toolbox is missing where a service of it runs (or, with none, on any node).
        let needs_it = |n: &NodeStatus| {
            let used: Vec<&ServingState> = all_services(&nodes).filter(|s| s.record.toolbox == toolbox).collect();
            used.is_empty() || n.services.iter().any(|s| s.record.toolbox == toolbox)
        };
        let without: Vec<&str> = nodes
            .iter()
            .filter(|n| n.reachable && n.toolbox(toolbox).is_none() && needs_it(n))
            .map(|n| n.node.as_str())
            .collect();
        if !without.is_empty() {
            disagreements.push(format!("no toolbox {toolbox} on: {}", without.join(", ")));
        }
        let differs = |what: &str, value: &dyn Fn(&NodeStatus) -> Option<String>| {
            let values: std::collections::BTreeSet<_> =
                nodes.iter().filter(|n| n.reachable && n.toolbox(toolbox).is_some()).map(value).collect();
            (values.len() > 1).then(|| format!("{what} differs between nodes"))
        };
        disagreements.extend(differs("strix-toolbox version", &|n| n.version.clone()));
        disagreements.extend(differs("image", &|n| n.toolbox(toolbox).map(|t| t.image_identity().to_string())));
        disagreements.extend(differs("RCCL", &|n| n.toolbox(toolbox).and_then(|t| t.rccl_sha256.clone())));
        for node in &nodes {
            for state in &node.services {
                let lost = state.lost();
                if !lost.is_empty() {
                    disagreements.push(format!(
                        "{}: {} of {} ({}) {} not running (`strix-toolbox cluster logs {} --node {}` says why; \
                         `cluster launch --replace` starts it again)",
                        node.node,
                        lost.join(" and "),
                        state.record.service,
                        state.record.model,
                        if lost.len() == 1 { "is" } else { "are" },
                        state.record.service,
                        node.node
                    ));
                }
            }
        }
        for service in &services {
            if !service.serves {
                disagreements.push(format!(
                    "{} does not serve at its engine {} (`strix-toolbox cluster logs {}`)",
                    service.name, service.upstream, service.name
                ));
            }
            for worker in service.workers.iter().filter(|w| w.reached != Reached::Answers) {
                let (why, _) = worker.reached.why();
                disagreements.push(format!(
                    "{}: its {} at {} for {} does not answer the head: {why}",
                    worker.node, worker.process, worker.address, service.name
                ));
            }
        }
        if let Some(router) = &router {
            for service in services.iter().filter(|s| s.serves) {
                if !router.routes.iter().any(|route| route.name == service.name) || router.process.is_none() {
                    disagreements.push(format!(
                        "{} serves, but the router does not route it (`cluster launch --replace` routes it again)",
                        service.name
                    ));
                }
            }
            for route in router.routes.iter().filter(|r| !services.iter().any(|s| s.name == r.name)) {
                disagreements.push(format!(
                    "the router routes {} to {}, which no node records (`strix-toolbox cluster stop {}` drops it)",
                    route.name, route.upstream, route.name
                ));
            }
        }
        ClusterStatusReport {
            toolbox: toolbox.to_string(),
            nodes,
            services,
            router,
            disagreements,
            registry: None,
            watch: Vec::new(),
        }
    }

    /// What the cluster's watch says of its services. A word about a launch no node records now
    /// (stopped since, or launched again) is history and left out, when every node answered; a
    /// word whose watch no longer runs is shown as its last. A launch still recorded that the
    /// watch gave up on is a disagreement, whether or not a watch runs.
    fn with_watch(mut self, watch: Vec<WatchedService>) -> Self {
        let all_answered = self.nodes.iter().all(|node| node.reachable);
        let recorded = |word: &WatchedService| {
            all_services(&self.nodes).any(|state| {
                state.record.service == word.service
                    && (word.record_started.is_empty() || state.record.started == word.record_started)
            })
        };
        let watch: Vec<WatchedService> = watch.into_iter().filter(|word| !all_answered || recorded(word)).collect();
        for given_up in watch.iter().filter(|service| service.given_up) {
            self.disagreements.push(format!(
                "the watch gave up on {}: {} (`cluster launch --replace` serves it again; the watch takes it up)",
                given_up.service,
                given_up.reason.as_deref().unwrap_or("no reason kept")
            ));
        }
        self.watch = watch;
        self
    }
}

/// Every service state of every node.
fn all_services(nodes: &[NodeStatus]) -> impl Iterator<Item = &ServingState> {
    nodes.iter().flat_map(|n| n.services.iter())
}

/// The cluster's status, the table's rows for `toolbox` (None: the services' toolbox, else the
/// default engine's); `api_key` is sent to an engine that wants one (one launched before the
/// router); `watch`: where the cluster's watch keeps its state on this machine.
pub async fn cluster_status(
    settings: &ClusterSettings,
    toolbox: Option<&str>,
    api_key: Option<Secret>,
    watch: Option<&WatchDir>,
) -> Result<ClusterStatusReport> {
    let (connected, unreachable) = connect_all(settings).await;
    let mut nodes: Vec<NodeStatus> = join_all(connected.iter().map(node_status)).await;
    nodes.extend(unreachable.into_iter().map(|(node, error)| NodeStatus {
        node,
        reachable: false,
        error: Some(error.to_string()),
        version: None,
        status: None,
        services: Vec::new(),
    }));
    in_cluster_order(settings, &mut nodes, |n| &n.node);
    let toolbox = toolbox.map(str::to_string).unwrap_or_else(|| {
        all_services(&nodes)
            .map(|s| s.record.toolbox.clone())
            .next()
            .unwrap_or_else(|| EngineRef::default().profile().toolbox.default_toolbox.to_string())
    });
    let head = connected.iter().find(|node| Some(&node.name) == settings.nodes.first());
    let router = match head {
        Some(head) => crate::cluster::router::look(head, None, true).await.ok(),
        None => None,
    };
    let summaries = join_all(heads(&nodes).into_iter().map(|(node, state)| {
        let remote = connected.iter().find(|r| r.name == node.node);
        service_summary(remote, &connected, &nodes, node, state, router.as_ref(), api_key.clone())
    }))
    .await;
    let mut report = ClusterStatusReport::new(&toolbox, nodes, summaries.into_iter().flatten().collect(), router)
        .with_watch(watch.map(watched).unwrap_or_default());
    report.registry = head_registry(settings, &connected).await;
    close_all(connected).await;
    Ok(report)
}

/// Each service's head record (the node that runs its engine's server), by name.
fn heads(nodes: &[NodeStatus]) -> Vec<(&NodeStatus, &ServingState)> {
    let mut heads: Vec<(&NodeStatus, &ServingState)> = nodes
        .iter()
        .flat_map(|n| n.services.iter().filter(|s| s.record.role != Role::Worker).map(move |s| (n, s)))
        .collect();
    heads.sort_by(|a, b| a.1.record.service.cmp(&b.1.record.service));
    heads.dedup_by(|a, b| a.1.record.service == b.1.record.service);
    heads
}

/// The head's registry, asked on the head.
async fn head_registry(settings: &ClusterSettings, connected: &[RemoteNode]) -> Option<HeadRegistry> {
    let head = connected.iter().find(|node| Some(&node.name) == settings.nodes.first())?;
    let status = head.call(SpreadStatus {}).await.ok()??;
    Some(HeadRegistry { node: head.name.clone(), status })
}

/// One service, asked on its head: Ray's table, or whether every worker's server answers it, and
/// its engine's endpoint.
async fn service_summary(
    remote: Option<&RemoteNode>,
    connected: &[RemoteNode],
    nodes: &[NodeStatus],
    node: &NodeStatus,
    state: &ServingState,
    router: Option<&RouterState>,
    api_key: Option<Secret>,
) -> Option<ServiceSummary> {
    let head = remote?;
    let record = &state.record;
    let ray_nodes_alive = if record.backend.runs_ray() {
        let table = head.call(RayNodes { service: record.service.clone() }).await.ok();
        table.map(|table| table.iter().filter(|n| n.alive && n.gpus >= 1.0).count())
    } else {
        None
    };
    let ours = |s: &&ServingState| s.record.service == record.service && s.record.started == record.started;
    let listeners: Vec<(String, String, SocketAddr)> = nodes
        .iter()
        .flat_map(|n| n.services.iter().filter(ours).map(move |s| (n, s)))
        .filter(|(_, s)| s.record.role == Role::Worker)
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
    let probe = ServeProbe {
        service: record.service.clone(),
        server: record.engine.profile().server.to_string(),
        address: record.upstream(),
        api_key,
        look_inside: true,
    };
    let (health, serves) = match head.call(probe).await {
        Ok(probe) => (probe.health.clone(), probe.serves(&record.served)),
        Err(error) => (HttpAnswer::Unasked(error.to_string()), false),
    };
    let warnings = match &record.transport {
        Some(link @ crate::spec::Transport::Roce { .. }) => link_warnings(connected, nodes, record, link).await,
        _ => Vec::new(),
    };
    let mut on: Vec<String> =
        nodes.iter().filter(|n| n.services.iter().any(|s| ours(&s))).map(|n| n.node.clone()).collect();
    if !record.on.is_empty() {
        on = record.on.clone();
    }
    let measured = planned_beside_said(connected, nodes, record).await;
    let routed = router
        .filter(|router| router.process.is_some() && router.routes.iter().any(|r| r.name == record.service))
        .map(|router| router.health.get(&record.service).cloned().unwrap_or_else(|| "not asked".into()));
    Some(ServiceSummary {
        name: record.service.clone(),
        engine: record.engine,
        model: record.model.clone(),
        served: record.served.clone(),
        endpoint: record.endpoint.clone(),
        upstream: record.upstream(),
        since: record.started.clone(),
        head: node.node.clone(),
        layout: layout(record),
        toolbox: record.toolbox.clone(),
        nodes: on,
        ray_nodes_alive,
        workers,
        health,
        serves,
        routed,
        warnings,
        measured,
    })
}

/// What this launch of `record`'s service planned on each of its nodes (as their records keep
/// it), beside what the engine's logs there say it allocated; nothing without a plan.
async fn planned_beside_said(connected: &[RemoteNode], nodes: &[NodeStatus], record: &ServingRecord) -> Vec<Measured> {
    let ours = |s: &&ServingState| s.record.service == record.service && s.record.started == record.started;
    let mut planned = Vec::new();
    let mut on_link: Vec<(&dyn crate::node::Node, std::net::Ipv4Addr)> = Vec::new();
    for node in nodes {
        let Some(state) = node.services.iter().find(ours) else { continue };
        let Some(remote) = connected.iter().find(|r| r.name == node.node) else { continue };
        on_link.push((remote, state.record.link_ip));
        planned.extend(state.record.planned.clone());
    }
    if planned.is_empty() {
        return Vec::new();
    }
    measured(&on_link, &record.service, record.engine, &planned).await
}

/// How a service spans its nodes, in a few words.
fn layout(record: &ServingRecord) -> String {
    let nodes = format!("{} over {} node{}", record.backend, record.nodes, if record.nodes == 1 { "" } else { "s" });
    match (record.tp, record.pp) {
        (Some(tp), Some(pp)) => format!("{nodes}, TP {tp} × PP {pp}"),
        (Some(tp), None) => format!("{nodes}, TP {tp}"),
        _ => nodes,
    }
}

/// Each node of this launch whose engine's logs say its data went over TCP on the RoCE `link`.
async fn link_warnings(
    connected: &[RemoteNode],
    nodes: &[NodeStatus],
    record: &ServingRecord,
    link: &crate::spec::Transport,
) -> Vec<String> {
    let ours = nodes
        .iter()
        .filter(|n| n.services.iter().any(|s| s.record.service == record.service && s.record.started == record.started))
        .filter_map(|n| connected.iter().find(|r| r.name == n.node));
    let ask = ServeLogs { service: Some(record.service.clone()), lines: 2000, seen: Vec::new() };
    let logs = join_all(ours.map(|remote| async { (remote.name.clone(), remote.call(ask.clone()).await) })).await;
    let logs: Vec<(String, Vec<LogTail>)> =
        logs.into_iter().filter_map(|(node, tails)| Some((node, tails.ok()?))).collect();
    tcp_on_roce(record.engine, link, &logs)
}

async fn node_status(remote: &RemoteNode) -> NodeStatus {
    let version = remote.version().map(str::to_string);
    let (status, check) = tokio::join!(remote.call(StatusCall {}), remote.call(ServeCheck::default()));
    let (status, mut error) = match status {
        Ok(status) => (Some(status), None),
        Err(error) => (None, Some(error.to_string())),
    };
    // A node that cannot say what it serves is named so, not shown serving nothing.
    let services = match check {
        Ok(check) => check.services,
        Err(failed) => {
            error.get_or_insert_with(|| format!("what it serves could not be asked: {failed}"));
            Vec::new()
        }
    };
    NodeStatus { node: remote.name.clone(), reachable: true, error, version, status, services }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::State;

    /// node1, reachable, recording `tiny` launched at `started` (None: recording nothing).
    fn cluster(started: Option<&str>, reachable: bool) -> Vec<NodeStatus> {
        let services = started
            .map(|started| {
                let mut state = crate::cluster::watch::observe::tests::state(&["llama-server"], &["llama-server"]);
                state.record.started = started.to_string();
                vec![state]
            })
            .unwrap_or_default();
        let node = NodeStatus { node: "node1".into(), reachable, error: None, version: None, status: None, services };
        vec![node]
    }

    fn word(state: State, record_started: &str, watching: bool) -> WatchedService {
        WatchedService {
            service: "tiny".into(),
            state,
            given_up: state == State::GivenUp,
            reason: Some("3 restart(s) in the last 6h already".into()),
            restarts: 3,
            updated: "2026-11-28T08:00:00Z".into(),
            watch_pid: 4242,
            record_started: record_started.into(),
            watching,
        }
    }

    fn report(nodes: Vec<NodeStatus>, watch: Vec<WatchedService>) -> ClusterStatusReport {
        ClusterStatusReport::new("llama", nodes, Vec::new(), None).with_watch(watch)
    }

    /// What disagrees because of the watch.
    fn the_watchs(report: &ClusterStatusReport) -> Vec<&String> {
        report.disagreements.iter().filter(|d| d.contains("watch")).collect()
    }

    const LAUNCHED: &str = "2026-11-28T07:00:00Z";

    #[test]
    fn a_watch_word_about_a_launch_no_node_records_is_history() {
        // The service was stopped after its watch ended: nothing is said of it, nothing disagrees.
        let stopped = report(cluster(None, true), vec![word(State::Loading, LAUNCHED, false)]);
        assert!(stopped.watch.is_empty() && the_watchs(&stopped).is_empty(), "{stopped:?}");
        // Given up on a launch that is gone (stopped, or launched again since): no failure either.
        let gone = report(cluster(None, true), vec![word(State::GivenUp, LAUNCHED, false)]);
        assert!(gone.watch.is_empty() && the_watchs(&gone).is_empty(), "{gone:?}");
        let relaunched =
            report(cluster(Some("2026-11-28T09:00:00Z"), true), vec![word(State::GivenUp, LAUNCHED, true)]);
        assert!(relaunched.watch.is_empty() && the_watchs(&relaunched).is_empty(), "{relaunched:?}");
    }

    #[test]
    fn a_given_up_launch_still_recorded_disagrees_whether_or_not_its_watch_runs() {
        for watching in [true, false] {
            let given_up = report(cluster(Some(LAUNCHED), true), vec![word(State::GivenUp, LAUNCHED, watching)]);
            assert_eq!(given_up.watch.len(), 1);
            assert!(the_watchs(&given_up)[0].starts_with("the watch gave up on tiny"), "{given_up:?}");
        }
        // A node that did not answer may hold the record: the word stays.
        let unsure = report(cluster(None, false), vec![word(State::Serving, LAUNCHED, false)]);
        assert_eq!(unsure.watch.len(), 1, "{unsure:?}");
    }
}
