//! One look at the cluster and at each service on it: what every node serves (its records and
//! which of their processes still run: the node's `ServeCheck`), and for each service its nodes'
//! reachability and boot ids, each rank's process, and on its head a one-token completion with a
//! deadline and the engine's own progress counters (the node's `WatchLook`, asked on the node:
//! the engine listens on the cluster link).

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::future::join_all;

use crate::bench::watch_look::{EngineLook, WatchLook, WatchLookReport};
use crate::error::{Error, Result};
use crate::node::{Node, NodeCalls};
use crate::serving::record::{Role, ServingRecord};
use crate::serving::state::{ServeCheck, ServingState};
use crate::watch::{Moment, NodeMemory, NodeObservation, Observation, ProbeOutcome, RankObservation, WatchPolicy};

/// The probe's and the scrape's deadline: the interval, within these bounds (a short interval
/// must not fail a healthy engine on a busy machine; a long one must not hide a stall).
const SHORTEST_DEADLINE: Duration = Duration::from_secs(5);
const LONGEST_DEADLINE: Duration = Duration::from_secs(30);

/// What every node serves, as one look found it: each node's services, or why it did not say.
pub struct ClusterLook {
    pub nodes: BTreeMap<String, Result<Vec<ServingState>>>,
    /// The cluster's nodes in its order, its head first.
    pub order: Vec<String>,
}

impl ClusterLook {
    /// Every node answers what it serves (the unreachable ones with why).
    pub async fn take(nodes: &[&dyn Node], unreachable: Vec<(String, Error)>, order: &[String]) -> ClusterLook {
        let answers = join_all(nodes.iter().map(|node| node.call(ServeCheck::default()))).await;
        let mut found: BTreeMap<String, Result<Vec<ServingState>>> = nodes
            .iter()
            .zip(answers)
            .map(|(node, answer)| (node.name().to_string(), answer.map(|report| report.services)))
            .collect();
        found.extend(unreachable.into_iter().map(|(node, error)| (node, Err(error))));
        ClusterLook { nodes: found, order: order.to_vec() }
    }

    /// Each service's head record (the node that runs its engine's server), by name.
    pub fn heads(&self) -> BTreeMap<String, ServingRecord> {
        let mut heads = BTreeMap::new();
        for states in self.nodes.values().filter_map(|states| states.as_ref().ok()) {
            for state in states.iter().filter(|state| state.record.role != Role::Worker) {
                heads.entry(state.record.service.clone()).or_insert_with(|| state.record.clone());
            }
        }
        heads
    }

    /// The node answered what it serves.
    pub fn answered(&self, node: &str) -> bool {
        self.nodes.get(node).is_some_and(|states| states.is_ok())
    }

    /// The state of `record`'s launch on `node` (the same service, the same start).
    fn launch_on(&self, node: &str, record: &ServingRecord) -> Option<Option<&ServingState>> {
        let states = self.nodes.get(node)?.as_ref().ok()?;
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

/// One look at the service `record` names.
pub async fn observe(
    nodes: &[&dyn Node],
    look: &ClusterLook,
    record: &ServingRecord,
    policy: &WatchPolicy,
    paused: bool,
    at: Moment,
) -> Observation {
    let on = service_nodes(record, &look.order);
    let head = on.first().cloned().unwrap_or_default();
    let deadline = policy.interval.clamp(SHORTEST_DEADLINE, LONGEST_DEADLINE);
    let progress = record.engine.progress();
    let engine = EngineLook {
        address: record.upstream(),
        served_model: record.served.clone(),
        generated: progress.generated.to_string(),
        running: progress.running.to_string(),
        deadline_ms: u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX),
    };
    let asks = on.iter().map(|name| {
        let node = nodes.iter().find(|node| node.name() == name).filter(|_| look.answered(name));
        let engine = (*name == head).then(|| engine.clone());
        async move {
            match node {
                Some(node) => node.call(WatchLook { engine }).await.ok(),
                None => None,
            }
        }
    });
    let looks: Vec<Option<WatchLookReport>> = join_all(asks).await;

    let mut observation =
        Observation { at, paused, nodes: Vec::new(), ranks: Vec::new(), probe: ProbeOutcome::Skipped, progress: None };
    for (name, seen) in on.iter().zip(&looks) {
        observation.nodes.push(NodeObservation {
            node: name.clone(),
            reachable: seen.is_some(),
            boot_id: seen.as_ref().and_then(|seen| seen.boot_id.clone()),
        });
        if seen.is_none() {
            continue;
        }
        observation.ranks.extend(ranks(name, look.launch_on(name, record).flatten()));
        if let Some(engine) = seen.as_ref().and_then(|seen| seen.engine.as_ref()) {
            observation.probe = engine.probe.clone();
            observation.progress = engine.progress;
        }
    }
    observation
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
pub async fn memory_of(nodes: &[&dyn Node], on: &[String]) -> Vec<NodeMemory> {
    let asks = on.iter().map(|name| async move {
        let node = nodes.iter().find(|node| node.name() == name);
        let used = match node {
            Some(node) => node.call(WatchLook { engine: None }).await.ok().and_then(|seen| seen.gpu_used_bytes),
            None => None,
        };
        NodeMemory { node: name.clone(), used_bytes: used }
    });
    join_all(asks).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::engine::Backend;
    use crate::serving::record::ServedProcess;

    fn state(processes: &[&str], alive: &[&str]) -> ServingState {
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
