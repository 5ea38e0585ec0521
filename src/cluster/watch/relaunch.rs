//! A fault's remedy: the whole service launched again from its record, as the canary serves a
//! service again after a rollback ([`crate::cluster::canary::relaunch`]: the same model at the
//! same commit, file, engine, backend, split, nodes, endpoint, arguments, environment and graph
//! capture, on the same image or not at all: [`crate::cluster::launch::Pinned`]). First each node's log
//! tails are saved, then every rank is stopped, then the relaunch waits (bounded:
//! `--memory-wait`) until no node of the service still holds GPU memory, saying why while it
//! waits; the launch itself proves the service serves again (within `--grace`), or stops what it
//! started.

use std::collections::BTreeMap;
use std::time::Duration;

use super::clock::now;
use super::events::{WatchAction, WatchEvent};
use super::observe::{memory_of, service_nodes};
use super::saved_logs::save_log_tails;
use crate::cluster::canary;
use crate::cluster::interrupt::Interrupt;
use crate::cluster::launch::{launch, LaunchRequest};
use crate::cluster::router::look;
use crate::cluster::stop::stop_service_with;
use crate::cluster::{with_nodes, with_our_nodes, ClusterSettings};
use crate::error::{Error, Result};
use crate::model::source::ModelSource;
use crate::node::{Node, NodeCalls};
use crate::secret::Secret;
use crate::serving::record::{Role, ServingRecord};
use crate::serving::service_name::ServiceName;
use crate::serving::state::ServeCheck;
use crate::watch::{memory_verdict, Fault, MemoryVerdict, WatchPolicy};

/// What a relaunch needs that no record keeps: the endpoint's key, the Hub's token and settings.
#[derive(Debug, Clone, Default)]
pub struct RelaunchSecrets {
    pub api_key: Option<Secret>,
    pub hf_token: Option<Secret>,
    pub hub_env: BTreeMap<String, String>,
}

/// How a relaunch ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Relaunched {
    /// It serves again.
    Serving,
    /// The launch failed (it stopped what it started): why.
    Failed(String),
    /// The nodes' memory never came free within `--memory-wait`: why (give up).
    MemoryNeverFree(String),
    /// Nothing was done: its head's record says its operator stopped it, is stopping it, or
    /// launched it again since the look (why). Not the watch's to relaunch.
    Withdrawn(String),
}

/// Everything the relaunch of one service needs.
pub struct Relaunch<'a> {
    pub settings: &'a ClusterSettings,
    pub policy: &'a WatchPolicy,
    pub secrets: &'a RelaunchSecrets,
    pub interrupt: &'a Interrupt,
    pub service_dir: &'a std::path::Path,
    /// Each event, as it happens.
    pub emit: &'a dyn Fn(WatchEvent),
    /// Read the head's record again first ([`withdrawn`]): on the first relaunch for a look, not
    /// on a retry after a failed one, whose own cleanup took the record.
    pub read_again: bool,
}

impl Relaunch<'_> {
    /// Relaunch `record`'s service for `fault`. Only a signal is an error.
    pub async fn run(&self, record: &ServingRecord, fault: &Fault) -> Result<Relaunched> {
        let name = record.service.clone();
        let state = fault.state();
        let reason = fault.reason();
        let on = service_nodes(record, &self.settings.nodes);
        // The logs first, as the fault left them; the relaunch is said then (the moment it was
        // decided, to the log's time), before the stop, which may wait on a server that does
        // not end at SIGTERM.
        let withdrawn = with_nodes(self.settings, async |nodes, _| {
            // Read again just before anything stops: the look may have landed in the middle of
            // the operator's `cluster stop`, which takes the ranks before the records.
            if self.read_again {
                if let Some(why) = withdrawn(nodes, on.first(), record).await {
                    return Some(why);
                }
            }
            let saved = save_log_tails(nodes, &on, &name, state, &reason, self.service_dir).await;
            let logs = match saved {
                Ok(path) => format!("its nodes' log tails are in {}", path.display()),
                Err(error) => format!("its nodes' log tails could not be saved: {error}"),
            };
            (self.emit)(WatchEvent::now(&name, state, WatchAction::Relaunch, Some(format!("{reason}; {logs}"))));
            // Every rank, the engine's server first; a node that does not answer has its own
            // record, which the launch's checks find. A stalled or failing server answers no
            // SIGTERM: killed at once; ranks after a crash or a reboot get their grace.
            let at_once = matches!(fault, Fault::Stalled { .. } | Fault::Failing { .. });
            stop_service_with(nodes, &name, at_once).await;
            None
        })
        .await;
        if let Some(why) = withdrawn {
            return Ok(Relaunched::Withdrawn(why));
        }

        if let Some(why) = self.wait_for_memory(&name, state, &on).await? {
            return Ok(Relaunched::MemoryNeverFree(why));
        }
        let base = base_request(record, self.policy, self.secrets)?;
        let launched = with_our_nodes(self.settings, "nothing was started", async |nodes| {
            let again = canary::relaunch(record, &base, nodes);
            launch(nodes, &again, self.settings.reporter.as_ref()).await
        })
        .await;
        match launched {
            Ok(_) => Ok(Relaunched::Serving),
            Err(interrupted @ Error::Interrupted { .. }) => Err(interrupted),
            Err(error) => Ok(Relaunched::Failed(error.to_string())),
        }
    }

    /// Until every node of the service holds no more GPU memory than the allowance: None, or why
    /// the wait ran out. Asked every interval, at most `--memory-wait` long.
    async fn wait_for_memory(&self, name: &str, state: crate::watch::State, on: &[String]) -> Result<Option<String>> {
        let since = now();
        let rounds = self.policy.memory_wait.as_millis() / self.policy.interval.as_millis().max(1) + 2;
        let mut said = None;
        for _ in 0..rounds {
            let memory = with_nodes(self.settings, async |nodes, _| memory_of(nodes, on).await).await;
            let limit = self.policy.memory_wait;
            match memory_verdict(&memory, self.policy.memory_allowance_bytes, since, now(), limit) {
                MemoryVerdict::Free => return Ok(None),
                MemoryVerdict::GiveUp(why) => return Ok(Some(why)),
                MemoryVerdict::Wait(why) => {
                    // Said once per change of what holds it, not at every look.
                    let holders = why.split("; waited").next().map(str::to_string);
                    if said != holders {
                        (self.emit)(WatchEvent::now(name, state, WatchAction::WaitMemory, Some(why)));
                        said = holders;
                    }
                }
            }
            let pause = tokio::time::sleep(self.policy.interval.min(Duration::from_secs(60)));
            self.interrupt
                .unless_it_comes("the watch's wait for the nodes' memory", async {
                    pause.await;
                    Ok(())
                })
                .await?;
        }
        Ok(Some(format!(
            "the nodes' GPU memory did not come free within --memory-wait {}",
            crate::watch::format_duration(self.policy.memory_wait)
        )))
    }
}

/// Why `record`'s service is not the watch's to relaunch, as its head's record says now: gone
/// (its operator stopped it), being stopped (`cluster stop` marks it before it stops anything),
/// or another launch's. None: the same launch, or a head that does not answer (its record
/// stands, as far as anyone knows).
async fn withdrawn(nodes: &[&dyn Node], head: Option<&String>, record: &ServingRecord) -> Option<String> {
    let node = nodes.iter().find(|node| head.is_some_and(|head| node.name() == head))?;
    let check = node.call(ServeCheck::default()).await.ok()?;
    match check.service(&record.service).map(|state| &state.record).filter(|now| now.role != Role::Worker) {
        None => Some("its record is gone from its head: its operator stopped it; not relaunched".into()),
        Some(now) if now.stopping => Some("its operator is stopping it: not relaunched".into()),
        Some(now) if now.started != record.started => {
            Some(format!("launched again by its operator at {}: not relaunched", now.started))
        }
        Some(_) => None,
    }
}

/// Whether the router on the cluster's head stopped `name` on purpose: registered to start on
/// demand, without its route (the router takes the route out before it stops the service). A
/// head that does not answer says no.
pub async fn stopped_on_demand(settings: &ClusterSettings, name: &str) -> bool {
    with_nodes(settings, async |nodes, _| match nodes.first() {
        Some(head) if settings.nodes.first().is_some_and(|first| first == head.name()) => {
            look(*head, None, false).await.is_ok_and(|router| router.stopped_on_demand(name))
        }
        _ => false,
    })
    .await
}

/// The watch's settings for what a record does not say: the launch may take `--grace` to serve;
/// the keys and Hub settings of the watch's environment. What the record says (the nodes, the
/// split, the arguments, the environment, `--cuda-graphs`, `--keep-free`) [`canary::relaunch`] takes
/// from it.
fn base_request(record: &ServingRecord, policy: &WatchPolicy, secrets: &RelaunchSecrets) -> Result<LaunchRequest> {
    Ok(LaunchRequest {
        engine: record.engine,
        toolbox: record.toolbox.clone(),
        service: ServiceName::parse(&record.service)?,
        on: Vec::new(),
        model: record.model.clone(),
        source: ModelSource::of(&record.model),
        backend: None,
        tp: None,
        pp: None,
        host: None,
        port: None,
        timeout: policy.grace,
        replace: true,
        dry_run: false,
        extra: Default::default(),
        env: BTreeMap::new(),
        hf_token: secrets.hf_token.clone(),
        api_key: secrets.api_key.clone(),
        hub_env: secrets.hub_env.clone(),
        cuda_graphs: false,
        // The stop before it, at once after a fault, erased the compile cache already.
        fresh_compile_cache: false,
        keep_free_gib: 0,
        recipes: None,
        pinned: None,
        on_demand: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::testing::{answer, as_nodes, failing, nodes, Scripted};
    use crate::node::call::NodeCall;
    use crate::serving::engine::Backend;
    use crate::serving::engine_args::EngineArgs;
    use crate::serving::state::{ServeCheckReport, ServingState};
    use crate::serving::vllm::VLLM;

    /// A two-node vLLM launch with the operator's `--cuda-graphs`, `-e` and flags after `--`.
    fn record() -> ServingRecord {
        let head = std::net::Ipv4Addr::new(192, 168, 2, 1);
        let endpoint = ServingRecord::endpoint_of(head, 8000);
        let mut record = ServingRecord::new(
            "org/m",
            "vllm",
            "org/m",
            "org/m",
            VLLM,
            Backend::Mp,
            Role::Head,
            2,
            8001,
            head,
            head,
            &endpoint,
        );
        (record.tp, record.pp, record.on) = (Some(1), Some(2), vec!["node1".into(), "node2".into()]);
        record.router_listen = Some("0.0.0.0:8000".parse().unwrap());
        record.extra = EngineArgs::new(vec!["--max-model-len".into(), "4096".into()]);
        record.env = [("STANDIN_STALL_FILE".to_string(), "/home/u/stall".to_string())].into();
        record.cuda_graphs = true;
        record.keep_free_gib = 20;
        record.identity =
            Some(crate::model::identity::ModelIdentity::Hub { repo: "org/m".into(), commit: "1".repeat(40) });
        record.image = "sha256:served".into();
        record
    }

    /// `node` answering that it records `records` (all running).
    fn recording<'a>(node: &'a dyn Node, records: Vec<ServingRecord>) -> Scripted<'a> {
        let services: Vec<ServingState> =
            records.into_iter().map(|record| ServingState { record, alive: Vec::new(), ray_alive: false }).collect();
        let report = ServeCheckReport { services, ..ServeCheckReport::default() };
        Scripted {
            inner: node,
            answer: Box::new(move |call| matches!(call, NodeCall::ServeCheck(_)).then(|| answer(&report).unwrap())),
        }
    }

    #[tokio::test]
    async fn a_service_its_operator_stops_or_launches_again_is_not_relaunched() {
        let cluster = nodes(&["node1", "node2"]);
        let looked_at = record();
        let head = Some(&looked_at.on[0]);
        let withdrawn_with = async |records: Vec<ServingRecord>| {
            let node1 = recording(&cluster[0].node, records);
            let listed: Vec<&dyn Node> = vec![&node1, &cluster[1].node];
            withdrawn(&listed, head, &looked_at).await
        };
        assert_eq!(withdrawn_with(vec![looked_at.clone()]).await, None, "the same launch: relaunched");
        let worker = ServingRecord { role: Role::Worker, ..looked_at.clone() };
        let gone = withdrawn_with(vec![worker]).await.expect("only a worker's record left: withdrawn");
        assert!(gone.contains("its record is gone"), "{gone}");
        let stopping = ServingRecord { stopping: true, ..looked_at.clone() };
        let stopping = withdrawn_with(vec![stopping]).await.expect("being stopped: withdrawn");
        assert!(stopping.contains("its operator is stopping it"), "{stopping}");
        let again = ServingRecord { started: "2026-11-28T23:00:00Z".into(), ..looked_at.clone() };
        let replaced = withdrawn_with(vec![again]).await.expect("another launch: withdrawn");
        assert!(replaced.contains("launched again by its operator at 2026-11-28T23:00:00Z"), "{replaced}");
        let silent = failing(&cluster[0].node, |_| true);
        let listed: Vec<&dyn Node> = vec![&silent, &cluster[1].node];
        let unanswered = withdrawn(&listed, head, &looked_at).await;
        assert_eq!(unanswered, None, "a head that does not answer: its record stands");
    }

    #[test]
    fn the_relaunch_asks_what_the_launch_was_asked_and_the_watch_the_rest() {
        let policy = WatchPolicy { grace: Duration::from_secs(120), ..WatchPolicy::default() };
        let secrets = RelaunchSecrets { api_key: Some(Secret::new("k".into())), ..RelaunchSecrets::default() };
        let cluster = nodes(&["node1", "node2", "node3"]);
        let record = record();
        let again = canary::relaunch(&record, &base_request(&record, &policy, &secrets).unwrap(), &as_nodes(&cluster));
        assert!(again.cuda_graphs, "the operator's --cuda-graphs kept");
        assert_eq!(again.keep_free_gib, 20, "the memory the operator left free for another service");
        assert_eq!(again.extra.words(), ["--max-model-len", "4096"], "the flags after --");
        assert_eq!(again.env, record.env, "the -e settings");
        assert_eq!((again.on.as_slice(), again.backend, again.pp), (record.on.as_slice(), Some(Backend::Mp), Some(2)));
        assert_eq!((again.timeout, again.replace, again.api_key.is_some()), (policy.grace, true, true), "the watch's");
        let pinned = again.pinned.as_ref().expect("a relaunch is pinned");
        assert_eq!((&pinned.identity, pinned.image.as_deref()), (&record.identity, Some("sha256:served")), "as served");
        let plain = ServingRecord { cuda_graphs: false, ..record };
        let again = canary::relaunch(&plain, &base_request(&plain, &policy, &secrets).unwrap(), &as_nodes(&cluster));
        assert!(!again.cuda_graphs, "none asked, none taken");
    }
}
