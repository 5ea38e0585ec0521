//! What proves a step of a launch did its part, asked from the head and bounded: Ray's own node
//! table lists every node (vLLM over Ray), every worker's server answers on its link address
//! (llama.cpp's `rpc-server`), the endpoint answers `/health` and lists the model in `/v1/models`
//! (showing what the server is doing meanwhile), and the head's log says it uses every worker.
//! A proof that fails names the node, why it likely failed, its log's last lines and the fix.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use crate::cluster::interrupt::Interrupt;
use crate::error::{Error, MultiError, Result};
use crate::node::{Node, NodeCalls};
use crate::rccl::log::{judge, RcclVerdict};
use crate::reporter::Reporter;
use crate::secret::Secret;
use crate::serving::engine::tcp_on_roce;
use crate::serving::engine::EngineRef;
use crate::serving::fit::vllm_log::rank_joined;
use crate::serving::http::HttpAnswer;
use crate::serving::logs::{LogTail, ServeLogs};
use crate::serving::plan::{NodePlan, Proof};
use crate::serving::probe::{ServeProbe, ServeProbeReport};
use crate::serving::ray::{RayNode, RayNodes};
use crate::serving::reach::{Reach, Reached};
use crate::spec::Transport;

/// How long every node gets to appear in Ray's node table after its `ray start` returned.
const RAY_JOIN_LIMIT: Duration = Duration::from_secs(60);
/// How long every worker's server gets to answer on its link address after it started, while it
/// refuses (still starting); silence fails at once.
const LISTEN_LIMIT: Duration = Duration::from_secs(60);
/// Between two readiness probes (of Ray's node table, of the workers, of the endpoint).
const PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// Between two looks inside the head's toolbox whether its server still runs, while it loads.
const LOOK_INSIDE: Duration = Duration::from_secs(3);
/// The least time between two reports of what the server is doing.
const STATUS_INTERVAL: Duration = Duration::from_secs(10);
/// How much of each rank's log is read for RCCL's start-up lines.
const RANK_LOG_LINES: usize = 2000;
/// Between two reads of every rank's log (an exec on each node).
const RANK_LOOK_INTERVAL: Duration = Duration::from_secs(2);
/// How much of the head's log is read for the devices it names.
const HEAD_LOG_LINES: usize = 5000;

/// What the proofs of one launch share.
pub struct Proving<'a> {
    pub nodes: &'a [&'a dyn Node],
    /// The service launched (its records, logs and Ray are found by its name).
    pub service: &'a str,
    pub engine: EngineRef,
    /// What each node was planned to run, where (the launch's plan).
    pub planned: &'a [NodePlan],
    /// Where the endpoint is asked, on the head.
    pub probe: SocketAddr,
    pub api_key: Option<&'a Secret>,
    pub timeout: Duration,
    pub interrupt: &'a Interrupt,
    pub reporter: &'a dyn Reporter,
    /// The name the endpoint serves the model under: as asked, then as `/v1/models` says.
    pub served: String,
    /// The cluster link's transport (the head's), which RCCL should use.
    pub transport: Transport,
    /// What the proofs found wrong without failing the launch.
    pub warnings: Vec<String>,
}

impl Proving<'_> {
    /// An error once Ctrl-C (or SIGTERM) came.
    pub fn stopped(&self, during: &str) -> Result<()> {
        match self.interrupt.came() {
            Some(signal) => Err(Error::Interrupted { during: during.to_string(), signal }),
            None => Ok(()),
        }
    }

    fn head(&self) -> &dyn Node {
        self.nodes[0]
    }
}

pub async fn prove(proving: &mut Proving<'_>, proof: &Proof) -> Result<()> {
    match proof {
        Proof::RayJoined => ray_joined(proving).await,
        Proof::RanksJoined { rendezvous } => ranks_joined(proving, *rendezvous).await,
        Proof::Reachable { listeners } => reachable(proving, listeners).await,
        Proof::Endpoint => endpoint(proving).await,
        Proof::HeadLog { prefix, mentions } => head_log(proving, prefix, mentions).await,
    }
}

/// Until Ray's own node table has every node alive with its GPU, on its link address.
async fn ray_joined(proving: &Proving<'_>) -> Result<()> {
    let deadline = Instant::now() + RAY_JOIN_LIMIT;
    let ask = RayNodes { service: proving.service.to_string() };
    let planned = proving.planned;
    loop {
        let table: Vec<RayNode> = proving
            .head()
            .call(ask.clone())
            .await
            .map_err(|e| MultiError::one("Ray's head does not answer", proving.head().name(), e))?;
        let missing: Vec<usize> = (0..planned.len()).filter(|i| !joined(&table, planned[*i].link_ip)).collect();
        if missing.is_empty() {
            proving
                .reporter
                .step_finished(&planned[0].node, &format!("Ray: {} node(s) alive with a GPU each", planned.len()));
            return Ok(());
        }
        proving.stopped("the wait for Ray's nodes")?;
        if Instant::now() >= deadline {
            let mut failed = MultiError::new(format!("nodes never joined Ray within {} s", RAY_JOIN_LIMIT.as_secs()));
            for index in missing {
                let launched = &planned[index];
                let tail = log_tail(proving.nodes[index], proving.service, "raylet.out").await;
                let error = Error::Node {
                    node: launched.node.clone(),
                    message: format!(
                        "it is not in Ray's node table on {}; its raylet.out ends: {tail}",
                        launched.link_ip
                    ),
                    fix: Some(
                        "a firewall between it and the head, or a wrong address: trust the cluster link on every node \
                         (`sudo firewall-cmd --zone=trusted --change-interface=IFACE --permanent`), and check it with \
                         `strix-toolbox cluster doctor`"
                            .into(),
                    ),
                };
                failed.push(&launched.node, error);
            }
            return Err(failed.into());
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}

fn joined(table: &[RayNode], ip: Ipv4Addr) -> bool {
    table.iter().any(|node| node.alive && node.gpus >= 1.0 && node.ip == ip.to_string())
}

/// Until every node's rank says (RCCL's `Init COMPLETE`) it joined; then which network RCCL took,
/// a warning when it is sockets on a RoCE link. A rank whose process ended, or every rank still
/// out at the timeout, is named with its log's end and why: RCCL's, when its log says it failed,
/// else the likely reason.
async fn ranks_joined(proving: &mut Proving<'_>, rendezvous: SocketAddr) -> Result<()> {
    let started = Instant::now();
    let nodes = proving.nodes;
    loop {
        let logs =
            join_all(nodes.iter().map(|node| rank_log(*node, proving.service, proving.engine.profile().server))).await;
        let waiting: Vec<usize> = (0..nodes.len()).filter(|index| !rank_joined(&logs[*index])).collect();
        if waiting.is_empty() {
            // Each line carries its rank's host and pid: the ranks' logs are judged as one.
            let net = match judge(logs.iter().flatten()).verdict {
                RcclVerdict::Rdma => "; RCCL over NET/IB (RDMA)",
                RcclVerdict::Tcp => "; RCCL over NET/Socket (TCP)",
                RcclVerdict::Failed | RcclVerdict::Unknown => "",
            };
            let said = format!("{} ranks joined at {rendezvous}{net}", nodes.len());
            proving.reporter.step_finished(proving.head().name(), &said);
            return Ok(());
        }
        proving.stopped("the wait for vLLM's ranks")?;
        let alive = join_all(waiting.iter().map(|index| rank_alive(proving, *index))).await;
        let ended: Vec<usize> =
            waiting.iter().zip(alive).filter(|(_, alive)| !alive).map(|(index, _)| *index).collect();
        let timed_out = started.elapsed() >= proving.timeout;
        if !ended.is_empty() || timed_out {
            let mut failed = MultiError::new(format!("vLLM's ranks did not all join at {rendezvous}"));
            for index in if ended.is_empty() { waiting } else { ended.clone() } {
                let node = nodes[index];
                let tail = log_tail(node, proving.service, proving.engine.profile().server).await;
                // RCCL's own word on why, when it says its communicator failed; else the log's end.
                let rccl = judge(&logs[index]);
                let (why, fix) = match (rccl.verdict, rccl.fix) {
                    (RcclVerdict::Failed, Some(fix)) => (rccl.why, fix),
                    _ => likely_reason(&tail, rendezvous, ended.contains(&index)),
                };
                let error = Error::Node {
                    node: node.name().to_string(),
                    message: format!("its rank {index} never joined: {why}; its log ends: {tail}"),
                    fix: Some(fix),
                };
                failed.push(node.name(), error);
            }
            return Err(failed.into());
        }
        tokio::time::sleep(RANK_LOOK_INTERVAL).await;
    }
}

/// The last lines of a node's rank's log (none yet: empty).
async fn rank_log(node: &dyn Node, service: &str, server: &str) -> Vec<String> {
    let ask = ServeLogs { service: Some(service.to_string()), lines: RANK_LOG_LINES, seen: Vec::new() };
    let tails = node.call(ask).await.unwrap_or_default();
    tails.into_iter().find(|tail| tail.file == server).map(|tail| tail.lines).unwrap_or_default()
}

/// Whether node `index`'s rank still runs (its pid, looked up in its toolbox).
async fn rank_alive(proving: &Proving<'_>, index: usize) -> bool {
    let address = SocketAddr::from((proving.planned[index].link_ip, proving.probe.port()));
    let probe = ServeProbe {
        service: proving.service.to_string(),
        server: proving.engine.profile().server.to_string(),
        address: if index == 0 { proving.probe } else { address },
        api_key: None,
        look_inside: true,
    };
    proving.nodes[index].call(probe).await.map_or(true, |report| report.server_alive)
}

/// Why a rank likely never joined, from its log's end, and the fix.
fn likely_reason(tail: &str, rendezvous: SocketAddr, ended: bool) -> (String, String) {
    let firewall = format!(
        "trust the cluster link on every node (`sudo firewall-cmd --zone=trusted --change-interface=IFACE \
         --permanent`), or open TCP {} on the head; `strix-toolbox cluster doctor` checks the link",
        rendezvous.port()
    );
    let logs = "`strix-toolbox cluster logs` shows every rank's log".to_string();
    if ["timed out", "No route to host"].iter().any(|said| tail.contains(said)) {
        (format!("it could not reach the head's rendezvous at {rendezvous}: a firewall dropping the port"), firewall)
    } else if tail.contains("Connection refused") {
        (format!("nothing listens at {rendezvous}: the head's vLLM did not start there"), logs)
    } else if tail.contains("Cannot assign requested address") {
        (
            "its address is not on this node (VLLM_HOST_IP, --master-addr): a wrong address".into(),
            "check every node's cluster-link address with `strix-toolbox cluster doctor`".into(),
        )
    } else if ended {
        ("its vLLM exited before joining".into(), logs)
    } else {
        (format!("it did not join at {rendezvous} in time: a dropped rendezvous port, or a wrong address"), firewall)
    }
}

/// Until every listener answers a connection from the head.
async fn reachable(proving: &Proving<'_>, listeners: &[(usize, SocketAddr)]) -> Result<()> {
    let deadline = Instant::now() + LISTEN_LIMIT;
    let ask = Reach { addresses: listeners.iter().map(|(_, address)| *address).collect() };
    loop {
        let answers = proving
            .head()
            .call(ask.clone())
            .await
            .map_err(|e| MultiError::one("the head could not reach the workers", proving.head().name(), e))?;
        let silent: Vec<(usize, SocketAddr, Reached)> = listeners
            .iter()
            .zip(answers)
            .filter(|(_, reached)| *reached != Reached::Answers)
            .map(|((node, address), reached)| (*node, *address, reached))
            .collect();
        if silent.is_empty() {
            let every: Vec<String> = listeners.iter().map(|(_, address)| address.to_string()).collect();
            proving.reporter.step_finished(proving.head().name(), &format!("workers answer at {}", every.join(", ")));
            return Ok(());
        }
        proving.stopped("the wait for the workers")?;
        // A refusal may be a server still starting; silence is a firewall or a lost link, which
        // waiting does not mend: it fails at once (each connection is bounded by `reach`'s limit).
        let any_silent = silent.iter().any(|(_, _, reached)| *reached == Reached::Silent);
        if any_silent || Instant::now() >= deadline {
            let mut failed = MultiError::new(if any_silent {
                "workers did not answer on the cluster link".to_string()
            } else {
                format!("workers did not answer on the cluster link within {} s", LISTEN_LIMIT.as_secs())
            });
            for (index, address, reached) in silent {
                let node = proving.nodes[index];
                let (why, fix) = reached.why();
                let tail = log_tail(node, proving.service, "rpc-server").await;
                let error = Error::Node {
                    node: node.name().to_string(),
                    message: format!(
                        "{} cannot connect to its server at {address}: {why}; its log ends: {tail}",
                        proving.head().name()
                    ),
                    fix: Some(fix.to_string()),
                };
                failed.push(node.name(), error);
            }
            return Err(failed.into());
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}

/// Until `/health` is 200 and `/v1/models` lists the model; the server dying, or the timeout,
/// fails with its last log lines. What the server calls the model is kept.
async fn endpoint(proving: &mut Proving<'_>) -> Result<()> {
    let head = proving.head();
    let server = proving.engine.profile().server;
    let started = Instant::now();
    let mut said: Option<(String, Instant)> = None;
    let mut looked = Instant::now();
    let failed = |message: String, fix: String| {
        let error = Error::Command { program: server.to_string(), message, fix: Some(fix) };
        MultiError::one(format!("{} did not serve", proving.engine.profile().title), head.name(), error)
    };
    loop {
        // Whether the server still runs costs an exec: asked every LOOK_INSIDE, and at the deadline.
        let look_inside = looked.elapsed() >= LOOK_INSIDE || started.elapsed() >= proving.timeout;
        if look_inside {
            looked = Instant::now();
        }
        let probe = ServeProbe {
            service: proving.service.to_string(),
            server: server.to_string(),
            address: proving.probe,
            api_key: proving.api_key.cloned(),
            look_inside,
        };
        let report: ServeProbeReport =
            head.call(probe).await.map_err(|e| MultiError::one("the endpoint could not be probed", head.name(), e))?;
        if report.serves(&proving.served) {
            proving.reporter.step_finished(
                head.name(),
                &format!("serving {} after {} s", proving.served, started.elapsed().as_secs()),
            );
            return Ok(());
        }
        if !report.server_alive {
            let tail = log_tail(head, proving.service, server).await;
            return Err(failed(
                format!("it exited before serving; its log ends: {tail}"),
                format!("`strix-toolbox cluster logs --node {}` shows all of it", head.name()),
            ));
        }
        if report.key_refused {
            return Err(failed(
                "it refused the launch's API key".into(),
                "check that the server's arguments set no other key (its key is --api-key-file or STRIX_API_KEY)"
                    .into(),
            ));
        }
        if matches!(report.health, HttpAnswer::Status(200, _)) && !report.models.is_empty() {
            return Err(failed(
                format!("it serves {} instead of {}", report.models.join(", "), proving.served),
                format!(
                    "check {} among the server's arguments",
                    proving.engine.profile().name_flag.spellings().join(" or ")
                ),
            ));
        }
        proving.stopped(&format!("the wait for {}", proving.engine.profile().title))?;
        if started.elapsed() >= proving.timeout {
            let tail = log_tail(head, proving.service, server).await;
            return Err(failed(
                format!("it did not serve within {} s; its log ends: {tail}", proving.timeout.as_secs()),
                "give it longer with `--timeout SECONDS` (large models load for minutes)".into(),
            ));
        }
        // What the server is doing (loading weights takes minutes), said when it changes, at most
        // every STATUS_INTERVAL.
        let doing = report.last_line.unwrap_or_else(|| "starting".into());
        if said.as_ref().is_none_or(|(before, at)| *before != doing && at.elapsed() >= STATUS_INTERVAL) {
            proving.reporter.step_started(head.name(), &format!("{:>4} s  {doing}", started.elapsed().as_secs()));
            said = Some((doing, Instant::now()));
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}

/// The head's server log has, for each worker, a line with `prefix` naming it.
async fn head_log(proving: &Proving<'_>, prefix: &str, mentions: &[(usize, String)]) -> Result<()> {
    let head = proving.head();
    let server = proving.engine.profile().server;
    let ask = ServeLogs { service: Some(proving.service.to_string()), lines: HEAD_LOG_LINES, seen: Vec::new() };
    let tails =
        head.call(ask).await.map_err(|e| MultiError::one("the head's log could not be read", head.name(), e))?;
    let lines: Vec<&String> =
        tails.iter().filter(|t| t.file == server).flat_map(|t| t.lines.iter()).filter(|l| l.contains(prefix)).collect();
    let mut failed = MultiError::new(format!("{} does not use every worker", proving.engine.profile().title));
    for (index, text) in mentions {
        if !lines.iter().any(|line| line.contains(text.as_str())) {
            let node = proving.nodes[*index];
            let error = Error::Node {
                node: node.name().to_string(),
                message: format!(
                    "{} on {} loaded the model without it: no `{prefix} … {text}` in its log",
                    server,
                    head.name()
                ),
                fix: Some(format!("`strix-toolbox cluster logs --node {}` shows which devices it used", head.name())),
            };
            failed.push(node.name(), error);
        }
    }
    if failed.is_empty() {
        proving.reporter.step_finished(head.name(), &format!("{server} uses {} worker(s)", mentions.len()));
        Ok(())
    } else {
        Err(failed.into())
    }
}

/// Once it serves, what every node's logs say carried the data between the nodes: a warning for
/// each whose engine went over TCP although the link is RoCE (the engine judges its own lines).
pub async fn link_use(proving: &mut Proving<'_>) {
    if proving.nodes.len() < 2 || !matches!(proving.transport, Transport::Roce { .. }) {
        return;
    }
    let ask = ServeLogs { service: Some(proving.service.to_string()), lines: RANK_LOG_LINES, seen: Vec::new() };
    let logs = join_all(proving.nodes.iter().map(|node| node.call(ask.clone()))).await;
    let logs: Vec<(String, Vec<LogTail>)> = proving
        .nodes
        .iter()
        .zip(logs)
        .map(|(node, tails)| (node.name().to_string(), tails.unwrap_or_default()))
        .collect();
    for warning in tcp_on_roce(proving.engine, &proving.transport, &logs) {
        proving.reporter.warning(&warning);
        proving.warnings.push(warning);
    }
}

/// The last lines of one of the node's serving logs, for an error message.
pub async fn log_tail(node: &dyn Node, service: &str, file: &str) -> String {
    let ask = ServeLogs { service: Some(service.to_string()), lines: 5, seen: Vec::new() };
    match node.call(ask).await {
        Ok(tails) => tails
            .into_iter()
            .find(|t| t.file == file)
            .map(|t| t.lines.join(" | "))
            .filter(|text| !text.is_empty())
            .unwrap_or_else(|| format!("(no {file} log)")),
        Err(error) => format!("(its log could not be read: {error})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_that_never_joined_gets_its_likely_reason() {
        let at = SocketAddr::from(([192, 168, 2, 1], 29501));
        let (why, fix) = likely_reason("torch.distributed.DistNetworkError: The client socket has timed out", at, true);
        assert!(why.contains("firewall") && why.contains("192.168.2.1:29501") && fix.contains("29501"), "{why}");
        assert!(likely_reason("Connection refused", at, true).0.contains("nothing listens"));
        assert!(likely_reason("error: Cannot assign requested address", at, true).0.contains("wrong address"));
        assert!(likely_reason("Traceback", at, true).0.contains("exited"));
        assert!(likely_reason("loading", at, false).0.contains("in time"));
    }

    #[test]
    fn a_node_joined_when_alive_with_a_gpu_on_its_link_address() {
        let ip = Ipv4Addr::new(192, 168, 2, 2);
        let node = |ip: &str, alive, gpus| RayNode { ip: ip.into(), alive, gpus };
        assert!(joined(&[node("192.168.2.2", true, 1.0)], ip));
        assert!(!joined(&[node("192.168.2.2", false, 1.0)], ip));
        assert!(!joined(&[node("192.168.2.2", true, 0.0)], ip));
        assert!(!joined(&[node("10.213.0.6", true, 1.0)], ip), "the management address is not the link's");
    }
}
