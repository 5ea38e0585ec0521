//! One look at the cluster and at each service on it: what every node serves (its records and
//! which of their processes still run: the node's `ServeCheck`), then every node's telemetry (its
//! boot id, GPU memory, RDMA counters) with every engine scraped and each watched service's engine
//! probed (a one-token completion with a deadline) by the node that runs it: the engines listen on
//! the cluster link. The same reading is what `cluster watch --metrics` serves: the engines are
//! scraped once per look, not again per Prometheus scrape.

use std::collections::BTreeMap;

use futures_util::future::join_all;

use crate::cluster::metrics::{read_cluster, ClusterReading, MetricsAsk};
use crate::error::{Error, Result};
use crate::metrics::{parse, ENGINE_LIMITS};
use crate::node::telemetry::{EngineScrape, Telemetry, TelemetryReport};
use crate::node::{Node, NodeCalls};
use crate::serving::record::{Role, ServingRecord};
use crate::serving::state::{ServeCheck, ServingState};
use crate::watch::{HeldMemory, Moment, NodeObservation, Observation, ProbeOutcome, Progress, RankObservation};

/// What every node serves and says, as one look found it.
pub struct ClusterLook {
    /// Each node's services, or why it did not say.
    pub serving: BTreeMap<String, Result<Vec<ServingState>>>,
    /// Each node's telemetry, its engines scraped and the watched ones probed.
    pub reading: ClusterReading,
    /// The cluster's nodes in its order, its head first.
    pub order: Vec<String>,
}

impl ClusterLook {
    /// Every node answers what it serves (the unreachable ones with why), then its telemetry,
    /// the services `watched` takes probed.
    pub async fn take(
        nodes: &[&dyn Node],
        unreachable: Vec<(String, Error)>,
        order: &[String],
        watched: &dyn Fn(&str) -> bool,
        ask: &MetricsAsk,
    ) -> ClusterLook {
        let answers = join_all(nodes.iter().map(|node| node.call(ServeCheck::default()))).await;
        let mut serving: BTreeMap<String, Result<Vec<ServingState>>> = nodes
            .iter()
            .zip(answers)
            .map(|(node, answer)| (node.name().to_string(), answer.map(|report| report.services)))
            .collect();
        let mut unanswered = Vec::new();
        for (node, error) in unreachable {
            unanswered.push((node.clone(), error.to_string()));
            serving.insert(node, Err(error));
        }
        let mut look =
            ClusterLook { serving, reading: ClusterReading { nodes: Vec::new(), router: None }, order: order.to_vec() };
        let probe = look.heads().into_keys().filter(|name| watched(name)).collect();
        look.reading = read_cluster(nodes, &unanswered, &MetricsAsk { probe, ..ask.clone() }).await;
        look
    }

    /// Each service's head record (the node that runs its engine's server), by name; one being
    /// stopped counts as gone (its operator's stop has begun).
    pub fn heads(&self) -> BTreeMap<String, ServingRecord> {
        let mut heads = BTreeMap::new();
        for states in self.serving.values().filter_map(|states| states.as_ref().ok()) {
            let records = states.iter().map(|state| &state.record);
            for record in records.filter(|record| record.role != Role::Worker && !record.stopping) {
                heads.entry(record.service.clone()).or_insert_with(|| record.clone());
            }
        }
        heads
    }

    /// The node answered what it serves, and its telemetry.
    pub fn answered(&self, node: &str) -> bool {
        self.serving.get(node).is_some_and(|states| states.is_ok()) && self.telemetry(node).is_some()
    }

    fn telemetry(&self, node: &str) -> Option<&TelemetryReport> {
        self.reading.nodes.iter().find(|seen| seen.node == node)?.answer.as_ref().ok()
    }

    /// The state of `record`'s launch on `node` (the same service, the same start).
    fn launch_on(&self, node: &str, record: &ServingRecord) -> Option<Option<&ServingState>> {
        let states = self.serving.get(node)?.as_ref().ok()?;
        Some(states.iter().find(|s| s.record.service == record.service && s.record.started == record.started))
    }
}

/// The nodes `record`'s service runs on, its head first (a record from before services had
/// nodes of their own: the cluster's first nodes).
pub fn service_nodes(record: &ServingRecord, cluster: &[String]) -> Vec<String> {
    if record.on.is_empty() {
        cluster.iter().take(record.nodes.max(1)).cloned().collect()
    } else {
        record.on.clone()
    }
}

/// What the look from `began` to `at` saw of the service `record` names.
pub fn observe(look: &ClusterLook, record: &ServingRecord, paused: bool, began: Moment, at: Moment) -> Observation {
    let on = service_nodes(record, &look.order);
    let mut observation = Observation {
        began,
        at,
        paused,
        nodes: Vec::new(),
        ranks: Vec::new(),
        probe: ProbeOutcome::Skipped,
        progress: None,
    };
    for name in &on {
        let telemetry = look.telemetry(name).filter(|_| look.answered(name));
        observation.nodes.push(NodeObservation {
            node: name.clone(),
            reachable: telemetry.is_some(),
            boot_id: telemetry.and_then(|seen| seen.boot_id.clone()),
            gpu_hangs: telemetry.map(|seen| seen.host.gpu_hangs.clone()).unwrap_or_default(),
        });
        let Some(telemetry) = telemetry else { continue };
        observation.ranks.extend(ranks(name, look.launch_on(name, record).flatten()));
        let engine = telemetry.engines.iter().find(|engine| engine.service == record.service);
        if let Some(engine) = engine.filter(|engine| engine.probe.is_some()) {
            observation.probe = engine.probe.clone().unwrap_or(ProbeOutcome::Skipped);
            observation.progress = progress(record, &engine.scrape);
        }
    }
    observation
}

/// The engine's progress counters in its scrape (None: it failed, or lacks them).
fn progress(record: &ServingRecord, scrape: &EngineScrape) -> Option<Progress> {
    let EngineScrape::Metrics(text) = scrape else { return None };
    record.engine.profile().progress.read(&parse(text, &ENGINE_LIMITS).ok()?)
}

/// Each process the launch started on `node`, and whether it runs; a node without the launch's
/// record runs none of it.
fn ranks(node: &str, state: Option<&ServingState>) -> Vec<RankObservation> {
    let Some(state) = state else {
        return vec![RankObservation { node: node.into(), process: "its part of the launch".into(), alive: false }];
    };
    let lost = state.lost();
    let mut ranks: Vec<RankObservation> = state
        .record
        .processes
        .iter()
        .map(|process| RankObservation {
            node: node.into(),
            process: process.name.clone(),
            alive: !lost.contains(&process.name),
        })
        .collect();
    if state.record.backend.runs_ray() {
        ranks.push(RankObservation { node: node.into(), process: "Ray".into(), alive: state.ray_alive });
    }
    ranks
}

/// The GPU memory each of `on` holds now (None: it did not answer, or does not say).
pub async fn memory_of(nodes: &[&dyn Node], on: &[String]) -> Vec<HeldMemory> {
    let asks = on.iter().map(|name| async move {
        let node = nodes.iter().find(|node| node.name() == name);
        let used = match node {
            Some(node) => node.call(Telemetry::default()).await.ok().and_then(|seen| seen.host.gpu_memory.used_bytes()),
            None => None,
        };
        HeldMemory { node: name.clone(), used_bytes: used }
    });
    join_all(asks).await
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::serving::engine::Backend;
    use crate::serving::record::ServedProcess;

    /// The head's state of `tiny` (llama.cpp over two nodes) with `processes`, `alive` of them running.
    pub(crate) fn state(processes: &[&str], alive: &[&str]) -> ServingState {
        let mut record = ServingRecord::new(
            "tiny",
            "llama",
            "/m/tiny.gguf",
            "tiny",
            crate::serving::llama::LLAMA_CPP,
            Backend::Rpc,
            Role::Head,
            2,
            8001,
            "192.168.2.1".parse().unwrap(),
            "192.168.2.1".parse().unwrap(),
            "http://192.168.2.1:8000/v1",
        );
        for (pid, name) in processes.iter().enumerate() {
            let process = ServedProcess { name: name.to_string(), pid: pid as u32, log: String::new(), listens: None };
            record.processes.push(process);
        }
        ServingState { record, alive: alive.iter().map(|a| a.to_string()).collect(), ray_alive: false }
    }

    /// node1 heads `tiny` (its llama-server running, its engine read as `scrape`, probed as
    /// `probe`); node2 is its worker (its rpc-server running), its telemetry `node2`.
    fn look(scrape: EngineScrape, probe: ProbeOutcome, node2: Result<TelemetryReport, String>) -> ClusterLook {
        let mut head = state(&["llama-server"], &["llama-server"]);
        head.record.on = vec!["node1".into(), "node2".into()];
        let mut worker = state(&["rpc-server"], &["rpc-server"]);
        worker.record.role = Role::Worker;
        worker.record.on = head.record.on.clone();
        let engine = crate::node::telemetry::EngineReading {
            service: "tiny".into(),
            model: head.record.model.clone(),
            engine: head.record.engine,
            address: head.record.upstream(),
            scrape,
            probe: Some(probe),
        };
        let node1 = TelemetryReport { boot_id: Some("boot-1".into()), engines: vec![engine], ..Default::default() };
        let seen = |node: &str, answer| crate::cluster::metrics::NodeSeen { node: node.into(), answer };
        ClusterLook {
            serving: [("node1".to_string(), Ok(vec![head])), ("node2".to_string(), Ok(vec![worker]))].into(),
            reading: ClusterReading { nodes: vec![seen("node1", Ok(node1)), seen("node2", node2)], router: None },
            order: vec!["node1".into(), "node2".into()],
        }
    }

    #[test]
    fn a_service_is_seen_in_its_nodes_readings_its_probe_and_progress_on_its_head() {
        let metrics = "llamacpp:n_decode_total 7\nllamacpp:requests_processing 1\n".to_string();
        let node2 = TelemetryReport { boot_id: Some("boot-2".into()), ..Default::default() };
        let found = look(EngineScrape::Metrics(metrics), ProbeOutcome::TimedOut, Ok(node2));
        let heads = found.heads();
        assert_eq!(heads.keys().collect::<Vec<_>>(), ["tiny"], "a worker's record is no head");
        let seen = observe(&found, &heads["tiny"], false, Moment(6), Moment(9));
        assert_eq!((seen.began, seen.at), (Moment(6), Moment(9)));
        let boots: Vec<(&str, bool, Option<&str>)> =
            seen.nodes.iter().map(|n| (n.node.as_str(), n.reachable, n.boot_id.as_deref())).collect();
        assert_eq!(boots, [("node1", true, Some("boot-1")), ("node2", true, Some("boot-2"))]);
        assert!(seen.ranks.iter().all(|rank| rank.alive) && seen.ranks.len() == 2, "{:?}", seen.ranks);
        assert_eq!(seen.probe, ProbeOutcome::TimedOut);
        assert_eq!(seen.progress, Some(Progress { generated: 7.0, running: 1.0 }));

        // The worker's node silent, the engine's metrics unreadable: no progress, a node down.
        let failed = EngineScrape::Failed("its /metrics did not answer within 3s".into());
        let found = look(failed, ProbeOutcome::Passed, Err("ssh: the connection was lost".into()));
        let seen = observe(&found, &found.heads()["tiny"], true, Moment(10), Moment(10));
        let reachable: Vec<bool> = seen.nodes.iter().map(|n| n.reachable).collect();
        assert_eq!(reachable, [true, false]);
        assert_eq!((seen.probe, seen.progress, seen.paused), (ProbeOutcome::Passed, None, true));
        assert_eq!(seen.ranks.len(), 1, "the silent node's ranks are not judged: {:?}", seen.ranks);
    }

    #[test]
    fn a_head_record_being_stopped_is_no_service_to_watch() {
        let node2 = TelemetryReport { boot_id: Some("boot-2".into()), ..Default::default() };
        let mut found = look(EngineScrape::Metrics(String::new()), ProbeOutcome::Failed("refused".into()), Ok(node2));
        if let Ok(states) = found.serving.get_mut("node1").expect("node1") {
            states[0].record.stopping = true;
            states[0].alive.clear();
        }
        assert!(found.heads().is_empty(), "its operator's stop has begun: not judged as failing");
    }

    #[test]
    fn each_recorded_process_is_a_rank_and_a_missing_record_is_a_rank_down() {
        let seen = ranks("node1", Some(&state(&["llama-server"], &[])));
        assert_eq!(seen, [RankObservation { node: "node1".into(), process: "llama-server".into(), alive: false }]);
        let seen = ranks("node2", Some(&state(&["rpc-server"], &["rpc-server"])));
        assert!(seen[0].alive);
        assert!(!ranks("node2", None)[0].alive);
    }

    #[test]
    fn a_record_from_before_services_had_nodes_runs_on_the_first_nodes() {
        let mut record = state(&[], &[]).record;
        let cluster = ["a".to_string(), "b".to_string(), "c".to_string()];
        assert_eq!(service_nodes(&record, &cluster), ["a", "b"]);
        record.on = vec!["c".into(), "a".into()];
        assert_eq!(service_nodes(&record, &cluster), ["c", "a"]);
    }
}
