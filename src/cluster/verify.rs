//! `cluster verify`: `verify` on every node, then proof between every pair of nodes that the data
//! plane uses RDMA, run inside the toolboxes over the RoCE addresses with the detected GID index:
//! perftest latency and bandwidth beside the reference figures, and an RCCL all-reduce whose own
//! log says whether it ran over RoCE or fell back to TCP sockets. What the image lacks is skipped
//! with the reason, never passed.

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use super::proof::{parse_bandwidth_gbps, parse_latency_us, REFERENCE_BANDWIDTH_GBPS, REFERENCE_LATENCY_US};
use super::{in_cluster_order, with_nodes, ClusterSettings};
use crate::check::Status;
use crate::error::Result;
use crate::node::call::{Detect, Exec, Link, Verify};
use crate::node::{Node, NodeCalls};
use crate::rccl::log::{judge, RcclLogReport, RcclVerdict};
use crate::spec::transport::Transport;
use crate::toolbox::running::ExecReport;
use crate::verify::VerifyReport;

/// Seconds a proof may run inside the toolbox (the `timeout` it runs under).
const PROOF_SECONDS: &str = "60";
/// The port rank 0 listens on for torch.distributed's rendezvous.
const RENDEZVOUS_PORT: &str = "29517";
/// Two ranks, one GPU each, one all-reduce: RCCL sets up its network and logs its choice.
const ALL_REDUCE: &str = "import torch, torch.distributed as dist\n\
dist.init_process_group('nccl')\n\
t = torch.ones(1 << 20, device='cuda')\n\
dist.all_reduce(t)\n\
torch.cuda.synchronize()\n\
print('all_reduce', t[0].item())\n\
dist.destroy_process_group()\n";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeVerify {
    pub node: String,
    pub report: Option<VerifyReport>,
    /// Why the node could not be verified at all.
    pub error: Option<String>,
}

/// One proof between two nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkProof {
    pub status: Status,
    pub message: String,
    pub latency_us: Option<f64>,
    pub bandwidth_gbps: Option<f64>,
    /// The output lines that decided it.
    pub evidence: Vec<String>,
}

impl LinkProof {
    fn skipped(why: impl Into<String>) -> LinkProof {
        LinkProof {
            status: Status::Skipped,
            message: why.into(),
            latency_us: None,
            bandwidth_gbps: None,
            evidence: vec![],
        }
    }

    fn failed(why: impl Into<String>, evidence: Vec<String>) -> LinkProof {
        LinkProof { status: Status::Fail, message: why.into(), latency_us: None, bandwidth_gbps: None, evidence }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairProof {
    /// The client (perftest) and rank 0 (RCCL).
    pub from: String,
    pub to: String,
    pub perftest: LinkProof,
    pub rccl: LinkProof,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterVerifyReport {
    pub toolbox: String,
    pub ok: bool,
    pub nodes: Vec<NodeVerify>,
    pub pairs: Vec<PairProof>,
}

impl ClusterVerifyReport {
    pub fn exit_code(&self) -> i32 {
        i32::from(!self.ok)
    }
}

/// What a proof needs to know about one node.
struct Endpoint<'a> {
    node: &'a dyn Node,
    device: String,
    port: u32,
    gid_index: u32,
    address: String,
}

/// `cluster verify`: every node of the cluster file, those that do not answer named.
pub async fn cluster_verify(settings: &ClusterSettings, toolbox: &str) -> Result<ClusterVerifyReport> {
    let mut report = with_nodes(settings, async |nodes, unreachable| {
        let mut report = verify_nodes(nodes, toolbox).await;
        report.ok &= unreachable.is_empty();
        report.nodes.extend(unreachable.into_iter().map(|(node, error)| NodeVerify {
            node,
            report: None,
            error: Some(error.to_string()),
        }));
        report
    })
    .await;
    in_cluster_order(settings, &mut report.nodes, |n| &n.node);
    Ok(report)
}

/// `verify` on every node of `nodes`, then the proofs between every pair of them.
pub async fn verify_nodes(nodes: &[&dyn Node], toolbox: &str) -> ClusterVerifyReport {
    let results = join_all(nodes.iter().map(|node| async {
        let (verified, detected) = tokio::join!(node.call(Verify { name: toolbox.to_string() }), node.call(Detect {}));
        (verified, detected.ok())
    }))
    .await;

    let mut verified_nodes = Vec::new();
    let mut endpoints = Vec::new();
    for (node, (verified, detected)) in nodes.iter().zip(results) {
        let (report, error) = match verified {
            Ok(report) => (Some(report), None),
            Err(error) => (None, Some(error.to_string())),
        };
        let verified_ok = report.as_ref().is_some_and(|r| r.ok);
        verified_nodes.push(NodeVerify { node: node.name().to_string(), report, error });
        endpoints.push((node.name().to_string(), endpoint(*node, verified_ok, detected.map(|d| d.transport)).await));
    }

    // Every pair, one at a time: perftest listens on one port per server.
    let mut pairs = Vec::new();
    for (i, (from_name, from)) in endpoints.iter().enumerate() {
        for (to_name, to) in &endpoints[i + 1..] {
            pairs.push(match (from, to) {
                (Ok(from), Ok(to)) => PairProof {
                    from: from_name.clone(),
                    to: to_name.clone(),
                    perftest: perftest(toolbox, from, to).await,
                    rccl: all_reduce(toolbox, from, to).await,
                },
                (Err(why), _) | (_, Err(why)) => PairProof {
                    from: from_name.clone(),
                    to: to_name.clone(),
                    perftest: LinkProof::skipped(format!("not run: {why}")),
                    rccl: LinkProof::skipped(format!("not run: {why}")),
                },
            });
        }
    }
    let ok = verified_nodes.iter().all(|n| n.report.as_ref().is_some_and(|r| r.ok))
        && pairs.iter().all(|p| p.perftest.status != Status::Fail && p.rccl.status != Status::Fail);
    ClusterVerifyReport { toolbox: toolbox.to_string(), ok, nodes: verified_nodes, pairs }
}

/// Where a node's proofs run: its RoCE port and address, or why it has none.
async fn endpoint<'a>(
    node: &'a dyn Node,
    verified_ok: bool,
    transport: Option<Transport>,
) -> std::result::Result<Endpoint<'a>, String> {
    match (verified_ok, transport) {
        (true, Some(Transport::Roce { device, port, netdev, gid_index })) => {
            let address = node.call(Link { netdev: netdev.clone() }).await.ok().flatten().and_then(|l| l.address);
            match address {
                Some(address) => Ok(Endpoint { node, device, port, gid_index, address: address.to_string() }),
                None => Err(format!("{}: {netdev} has no IPv4 address", node.name())),
            }
        }
        (true, _) => Err(format!("{} has no ACTIVE RoCE port", node.name())),
        (false, _) => Err(format!("{}'s toolbox did not pass verify", node.name())),
    }
}

/// `argv` in the node's toolbox `toolbox`, its output captured.
async fn in_toolbox(node: &dyn Node, toolbox: &str, argv: Vec<String>) -> Result<ExecReport> {
    node.call(Exec { toolbox: toolbox.to_string(), argv }).await
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|word| word.to_string()).collect()
}

/// The image lacks the program: exit 126/127, or the engine's "not found".
fn missing(output: &ExecReport) -> bool {
    matches!(output.exit_code, 126 | 127)
        || output.stderr.contains("executable file not found")
        || output.stderr.contains("not found in $PATH")
}

fn text(output: &ExecReport) -> String {
    format!("{}{}", output.stdout, output.stderr)
}

/// The last words of a proof's output: its evidence.
fn last_lines(output: &ExecReport) -> Vec<String> {
    output.last_lines(3)
}

/// Whether `argv` runs in both toolboxes: None, or why the proof is skipped.
async fn lacks(toolbox: &str, endpoints: [&Endpoint<'_>; 2], argv: &[&str], what: &str) -> Option<String> {
    let probe: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    for endpoint in endpoints {
        let name = endpoint.node.name();
        match in_toolbox(endpoint.node, toolbox, probe.clone()).await {
            Ok(output) if missing(&output) => return Some(format!("{what} not in the image ({name})")),
            Ok(output) if !output.success() => {
                let said = last_lines(&output).join(" ");
                if said.contains("No module named") {
                    return Some(format!("{what} not in the image ({name})"));
                }
            }
            Ok(_) => {}
            Err(error) => return Some(format!("cannot run in {name}'s toolbox: {error}")),
        }
    }
    None
}

/// A perftest pair: the server on `to`, the client on `from`, latency then bandwidth.
async fn perftest(toolbox: &str, from: &Endpoint<'_>, to: &Endpoint<'_>) -> LinkProof {
    if let Some(why) = lacks(toolbox, [from, to], &["ib_write_lat", "--version"], "ib_write_lat (perftest)").await {
        return LinkProof::skipped(why);
    }
    let lat = match perftest_run(toolbox, "ib_write_lat", from, to, &[]).await {
        Ok(output) => output,
        Err(proof) => return proof,
    };
    let Some(latency) = parse_latency_us(&text(&lat)) else {
        return LinkProof::failed("ib_write_lat printed no result table", last_lines(&lat));
    };
    let bw = perftest_run(toolbox, "ib_write_bw", from, to, &["--report_gbits"]).await;
    let bandwidth = bw.ok().and_then(|output| parse_bandwidth_gbps(&text(&output)));
    let status = if latency <= REFERENCE_LATENCY_US * 3.0 { Status::Pass } else { Status::Warn };
    let bandwidth_text = bandwidth
        .map_or("bandwidth unknown".into(), |b| format!("{b:.1} Gb/s (reference ~{REFERENCE_BANDWIDTH_GBPS} Gb/s)"));
    LinkProof {
        status,
        message: format!("RDMA write {latency:.2} µs (reference ~{REFERENCE_LATENCY_US} µs), {bandwidth_text}"),
        latency_us: Some(latency),
        bandwidth_gbps: bandwidth,
        evidence: last_lines(&lat),
    }
}

/// One perftest program, server on `to` and client on `from`: the client's output, or the proof
/// it makes (skipped when the image lacks the program, else failed).
async fn perftest_run(
    toolbox: &str,
    program: &str,
    from: &Endpoint<'_>,
    to: &Endpoint<'_>,
    extra: &[&str],
) -> std::result::Result<ExecReport, LinkProof> {
    let common = |endpoint: &Endpoint<'_>| -> Vec<String> {
        let mut args = argv(&["timeout", PROOF_SECONDS, program, "-d", &endpoint.device]);
        args.extend(["-i".into(), endpoint.port.to_string(), "-x".into(), endpoint.gid_index.to_string(), "-F".into()]);
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    };
    let server_args = common(to);
    let server = in_toolbox(to.node, toolbox, server_args);
    let mut client_args = common(from);
    client_args.push(to.address.clone());
    let client = async {
        // perftest's client retries its connection for a while; give the server a head start.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        in_toolbox(from.node, toolbox, client_args).await
    };
    let (server, client) = tokio::join!(server, client);
    // The server's own outcome adds nothing the client's does not say.
    drop(server);
    match client {
        Ok(client) if missing(&client) => Err(LinkProof::skipped(format!("{program} not in the image"))),
        Ok(client) if client.success() => Ok(client),
        Ok(client) => Err(LinkProof::failed(
            format!("{program} failed between {} and {}", from.node.name(), to.node.name()),
            last_lines(&client),
        )),
        Err(error) => Err(LinkProof::failed(error.to_string(), vec![])),
    }
}

/// Two ranks of torch.distributed over RCCL, rank 0 on `from`; RCCL's log decides.
async fn all_reduce(toolbox: &str, from: &Endpoint<'_>, to: &Endpoint<'_>) -> LinkProof {
    if let Some(why) = lacks(toolbox, [from, to], &["python3", "-c", "import torch"], "python3 with torch").await {
        return LinkProof::skipped(why);
    }
    let rank = |rank: &str| -> Vec<String> {
        let master = format!("MASTER_ADDR={}", from.address);
        let port = format!("MASTER_PORT={RENDEZVOUS_PORT}");
        let rank = format!("RANK={rank}");
        argv(&[
            "timeout",
            PROOF_SECONDS,
            "env",
            &master,
            &port,
            &rank,
            "WORLD_SIZE=2",
            "LOCAL_RANK=0",
            "NCCL_DEBUG=INFO",
            // ENV: the `NCCL_IB_DISABLE set by environment to 1.` line that says why it fell back.
            "NCCL_DEBUG_SUBSYS=INIT,NET,ENV",
            "python3",
            "-c",
            ALL_REDUCE,
        ])
    };
    let (rank0, rank1) = (rank("0"), rank("1"));
    let (zero, one) = tokio::join!(in_toolbox(from.node, toolbox, rank0), in_toolbox(to.node, toolbox, rank1));
    let (zero, one) = match (zero, one) {
        (Ok(zero), Ok(one)) => (zero, one),
        (Err(error), _) | (_, Err(error)) => return LinkProof::failed(error.to_string(), vec![]),
    };
    let rccl = judge(text(&zero).lines().chain(text(&one).lines()));
    all_reduce_proof(rccl, zero.success() && one.success(), last_lines(&zero))
}

/// What RCCL's log (`rccl`) and the ranks' exit (`completed`, rank 0's `last_words`) prove.
fn all_reduce_proof(rccl: RcclLogReport, completed: bool, last_words: Vec<String>) -> LinkProof {
    let with_fix = |rccl: &RcclLogReport| match &rccl.fix {
        Some(fix) => format!("{}. Fix: {fix}", rccl.why),
        None => rccl.why.clone(),
    };
    match (rccl.verdict, completed) {
        (RcclVerdict::Rdma, true) => LinkProof {
            status: Status::Pass,
            message: format!("the all-reduce ran: {}", rccl.why),
            latency_us: None,
            bandwidth_gbps: None,
            evidence: rccl.evidence,
        },
        // On the RoCE link this proof runs on, sockets are a fall-back whatever the log asked.
        (RcclVerdict::Tcp | RcclVerdict::Failed, _) => {
            let mut evidence = rccl.evidence.clone();
            if !completed {
                evidence.extend(last_words);
            }
            LinkProof::failed(with_fix(&rccl), evidence)
        }
        (verdict, false) => {
            // What RCCL said (when it does not name the network) before the program's last words.
            let mut evidence = if verdict == RcclVerdict::Unknown { rccl.evidence } else { vec![] };
            evidence.extend(last_words);
            LinkProof::failed("the all-reduce did not complete", evidence)
        }
        (RcclVerdict::Unknown, true) => LinkProof::failed(
            format!("the all-reduce ran, but RCCL's log does not say over which network: {}", with_fix(&rccl)),
            rccl.evidence,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proof(log: &str, completed: bool) -> LinkProof {
        all_reduce_proof(judge(log.lines()), completed, vec!["RuntimeError: the last words".into()])
    }

    #[test]
    fn the_all_reduce_is_proved_by_the_rccl_judge() {
        let roce = proof(include_str!("../../tests/fixtures/rccl-logs/written/nccl-2.28.9-roce.log"), true);
        assert_eq!(roce.status, Status::Pass, "{roce:?}");
        assert_eq!(roce.message, "the all-reduce ran: RCCL carries the data with RDMA over RoCE (NET/IB)");
        let sockets = proof(include_str!("../../tests/fixtures/rccl-logs/nccl-2.28.9/exact-hca.log"), true);
        assert_eq!(sockets.status, Status::Fail);
        assert!(sockets.message.starts_with("RCCL fell back to TCP sockets (NET/Socket): IB found no device"));
        assert!(sockets.message.contains(". Fix: ") && !sockets.evidence.iter().any(|l| l.contains("last words")));
        // No network started: the communicator never formed, which is no TCP.
        let none =
            proof(include_str!("../../tests/fixtures/rccl-logs/written/nccl-2.28.9-net-ib-no-device.log"), false);
        assert_eq!(none.status, Status::Fail);
        assert!(none.message.contains("never formed") && !none.message.contains("fell back"), "{}", none.message);
        assert!(none.evidence.iter().any(|l| l.contains("Failed to initialize any NET plugin")), "{none:?}");
        assert_eq!(none.evidence.last().map(String::as_str), Some("RuntimeError: the last words"));
        let silent = proof("RuntimeError: no GPU", false);
        assert_eq!((silent.status, silent.message.as_str()), (Status::Fail, "the all-reduce did not complete"));
    }
}
