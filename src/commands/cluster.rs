//! `cluster init|doctor|refresh|status|install`: the whole cluster from one machine, over ssh.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::model::ModelRequest;
use crate::check::{Check, Status};
use crate::cli::{ClusterArgs, ClusterCommand, SpreadMode};
use crate::cluster::checks::ClusterDoctorReport;
use crate::cluster::disconnect::{cluster_disconnect, DisconnectReport};
use crate::cluster::install::{cluster_install, InstallAction, InstallReport};
use crate::cluster::nodes::{parse_node_list, ClusterFile};
use crate::cluster::refresh::{refresh_nodes, ClusterOutcome, ClusterRefreshReport};
use crate::cluster::spread::{SpreadReport, SpreadSettings};
use crate::cluster::status::{cluster_status, ClusterStatusReport, NodeStatus};
use crate::cluster::verify::{cluster_verify, ClusterVerifyReport, Proof};
use crate::cluster::{doctor::cluster_doctor, with_nodes, with_our_nodes, ClusterSettings};
use crate::error::{Error, Result};
use crate::image::reference::ImageRef;
use crate::image::short_digest;
use crate::node::ssh::SshOptions;
use crate::node::Node;
use crate::output::{Output, Render, Style};
use crate::reporter::Bytes;
use crate::serving::http::HttpAnswer;
use crate::settings::Settings;

pub async fn run(args: &ClusterArgs, settings: &Settings, out: &Output) -> Result<i32> {
    let cluster_args = args;
    if let ClusterCommand::Init = args.command {
        return init(args, settings, out);
    }
    let cluster = cluster_settings(args, settings)?;
    match &args.command {
        ClusterCommand::Init => unreachable!("handled above"),
        ClusterCommand::Doctor(toolbox) => {
            let report = cluster_doctor(&cluster, &toolbox.toolbox()).await?;
            out.report(&report);
            Ok(report.exit_code())
        }
        ClusterCommand::Status(toolbox) => {
            let api_key = super::launch::secret_from("the API key", None, "STRIX_API_KEY")?;
            let report = cluster_status(&cluster, &toolbox.toolbox(), api_key).await?;
            out.report(&report);
            Ok(i32::from(!report.disagreements.is_empty()))
        }
        ClusterCommand::Verify(toolbox) => {
            let report = cluster_verify(&cluster, &toolbox.toolbox()).await?;
            out.report(&report);
            Ok(report.exit_code())
        }
        ClusterCommand::Launch(launch) => {
            with_our_nodes(&cluster, "nothing was started", async |nodes| super::launch::run(launch, nodes, out).await)
                .await
        }
        ClusterCommand::Stop(toolbox) => {
            with_nodes(&cluster, async |nodes, unreachable| {
                super::stop::run(&toolbox.toolbox(), nodes, said(unreachable), out).await
            })
            .await
        }
        ClusterCommand::Logs(logs) => {
            let mut cluster = cluster;
            if let Some(node) = &logs.node {
                if !cluster.nodes.contains(node) {
                    return Err(Error::Usage(format!(
                        "--node {node}: not a node of this cluster ({})",
                        cluster.nodes.join(", ")
                    )));
                }
                cluster.nodes.retain(|n| n == node);
            }
            with_nodes(&cluster, async |nodes, unreachable| {
                for (node, error) in &unreachable {
                    out.warn(&format!("{node}: {error}"));
                }
                let code =
                    super::logs::run(&logs.logs.toolbox.toolbox(), nodes, logs.logs.lines, logs.logs.follow, out)
                        .await?;
                Ok(code.max(i32::from(!unreachable.is_empty())))
            })
            .await
        }
        ClusterCommand::Bench(bench) => {
            if bench.endpoint.is_some() {
                return Err(Error::Usage(
                    "cluster bench measures what the cluster serves; for another endpoint use `strix-toolbox bench --endpoint URL`"
                        .into(),
                ));
            }
            // The head reaches the endpoint on the cluster link; the other nodes have no part.
            let mut cluster = cluster;
            cluster.nodes.truncate(1);
            with_our_nodes(&cluster, "nothing was measured", async |nodes| {
                super::bench::run(bench, nodes[0], &settings.paths, out).await
            })
            .await
        }
        ClusterCommand::Disconnect => {
            let report = cluster_disconnect(&cluster).await?;
            out.report(&report);
            Ok(0)
        }
        ClusterCommand::Install => {
            let report = cluster_install(&cluster).await?;
            out.report(&report);
            Ok(report.exit_code())
        }
        ClusterCommand::Model(command) => {
            let request = ModelRequest::parse(command)?;
            let run =
                async |nodes: &[&dyn Node], unreachable| super::model::run(&request, nodes, unreachable, out).await;
            match &request {
                // A pull changes every node: all of them, or none.
                ModelRequest::Pull(_) => {
                    with_our_nodes(&cluster, "nothing was pulled", async |nodes| run(nodes, Vec::new()).await).await
                }
                ModelRequest::List(_) => {
                    with_nodes(&cluster, async |nodes, unreachable| run(nodes, said(unreachable)).await).await
                }
            }
        }
        ClusterCommand::Refresh(args) => {
            // A busy node fails the cluster refresh at once (apply::lock says why).
            let request = super::refresh::request(&args.options, None, Duration::ZERO, out)?;
            ImageRef::parse(&args.spread_registry_image)?;
            let spread = SpreadSettings {
                enabled: args.spread == SpreadMode::On,
                port: args.spread_port,
                relay_port: args.spread_relay_port,
                registry_image: args.spread_registry_image.clone(),
            };
            if let Some(entry) = super::canary::entry(args, cluster_args_file(cluster_args, settings)?)? {
                return with_our_nodes(&cluster, "nothing was changed", async |nodes| {
                    super::canary::run(args, &entry, nodes, &request, &spread, &settings.paths, out).await
                })
                .await;
            }
            let reporter = out.reporter();
            let refreshed = with_our_nodes(&cluster, "nothing was changed", async |nodes| {
                refresh_nodes(nodes, &request, &spread, reporter.as_ref()).await
            })
            .await?;
            out.report(&refreshed);
            Ok(0)
        }
    }
}

/// The cluster file, when the nodes come from it (not --nodes).
fn cluster_args_file(args: &ClusterArgs, settings: &Settings) -> Result<Option<ClusterFile>> {
    match &args.nodes {
        Some(_) => Ok(None),
        None => ClusterFile::read(&cluster_file_path(args, settings)?).map(Some),
    }
}

/// The nodes that did not answer, each with why, as the reports say it.
fn said(unreachable: Vec<(String, Error)>) -> Vec<(String, String)> {
    unreachable.into_iter().map(|(node, error)| (node, error.to_string())).collect()
}

/// The cluster file's path: --cluster, else the XDG default.
fn cluster_file_path(args: &ClusterArgs, settings: &Settings) -> Result<PathBuf> {
    args.cluster.clone().or_else(|| settings.paths.cluster_file()).ok_or_else(|| {
        Error::Usage("no cluster file location: neither --cluster, XDG_CONFIG_HOME nor HOME is set".into())
    })
}

/// How long a node's ssh master waits for the next cluster command, unless told otherwise.
const DEFAULT_SSH_PERSIST: u64 = 60;

/// Nodes from --nodes, else the cluster file; ssh config and persistence from the flags (or the
/// environment), else the file's.
fn cluster_settings(args: &ClusterArgs, settings: &Settings) -> Result<ClusterSettings> {
    let (nodes, file_ssh_config, file_ssh_persist) = match &args.nodes {
        Some(list) => (parse_node_list(list)?, None, None),
        None => {
            let file = ClusterFile::read(&cluster_file_path(args, settings)?)?;
            (file.nodes, file.ssh_config, file.ssh_persist)
        }
    };
    let ssh = SshOptions {
        config_file: args.ssh_config.clone().or(file_ssh_config),
        connect_timeout: Duration::from_secs(args.connect_timeout),
        runtime_dir: settings.paths.runtime_path().to_path_buf(),
        persist: Duration::from_secs(args.ssh_persist.or(file_ssh_persist).unwrap_or(DEFAULT_SSH_PERSIST)),
    };
    Ok(ClusterSettings { nodes, ssh, reporter: settings.reporter.clone() })
}

/// What `cluster init` wrote.
#[derive(Serialize, Deserialize)]
pub(super) struct Initialized {
    path: PathBuf,
    cluster: ClusterFile,
}

impl Render for Initialized {
    fn render(&self, out: &Output) {
        let nodes = &self.cluster.nodes;
        out.status(&format!("wrote {} with {} node(s): {}", self.path.display(), nodes.len(), nodes.join(", ")));
    }
}

fn init(args: &ClusterArgs, settings: &Settings, out: &Output) -> Result<i32> {
    let list = args
        .nodes
        .as_deref()
        .ok_or_else(|| Error::Usage("`cluster init` needs --nodes NODE,NODE,... (the head first)".into()))?;
    let mut cluster = ClusterFile::new(parse_node_list(list)?, args.ssh_config.clone())?;
    cluster.ssh_persist = args.ssh_persist;
    let path = cluster_file_path(args, settings)?;
    cluster.write(&path)?;
    out.report(&Initialized { path, cluster });
    Ok(0)
}

impl Render for DisconnectReport {
    fn render(&self, out: &Output) {
        for node in &self.nodes {
            let state = if node.closed { "closed its ssh connection" } else { "no ssh connection was up" };
            out.line(&format!("{}: {state}", node.node));
        }
        out.status(&format!("closed {} ssh connection(s) to {} node(s)", self.closed(), self.nodes.len()));
    }
}

impl Render for ClusterDoctorReport {
    fn render(&self, out: &Output) {
        let rows: Vec<_> = self
            .checks
            .iter()
            .map(|c| (c.name.clone(), c.cells.iter().map(|cell| (cell.status, cell.text.clone())).collect()))
            .collect();
        out.node_table(&self.nodes, &rows);
        // Each node's problem as a check of its own: `node1: mtu`.
        let problems: Vec<Check> = self
            .checks
            .iter()
            .flat_map(|c| {
                c.problems.iter().map(move |p| {
                    Check::new(format!("{}: {}", p.node, c.name), p.status, p.message.clone(), p.fix.clone())
                })
            })
            .collect();
        if !problems.is_empty() {
            out.line("");
        }
        out.checks(&problems);
        let failed = problems.iter().filter(|p| p.status == Status::Fail).count();
        let warned = problems.iter().filter(|p| p.status == Status::Warn).count();
        out.line(&format!("\n{} node(s): {failed} failed, {warned} warning(s)", self.nodes.len()));
    }
}

impl Render for ClusterStatusReport {
    fn render(&self, out: &Output) {
        let nodes: Vec<String> = self.nodes.iter().map(|n| n.node.clone()).collect();
        let cell = |f: &dyn Fn(&NodeStatus) -> String| -> Vec<(Option<Status>, String)> {
            self.nodes.iter().map(|n| (None, f(n))).collect()
        };
        let toolbox = |n: &NodeStatus| n.toolbox(&self.toolbox).cloned();
        let rows = vec![
            ("reachable".to_string(), cell(&|n| if n.reachable { "yes".into() } else { "no".into() })),
            ("version".to_string(), cell(&|n| n.version.clone().unwrap_or("-".into()))),
            (self.toolbox.clone(), cell(&|n| if toolbox(n).is_some() { "present".into() } else { "missing".into() })),
            (
                "running".to_string(),
                cell(&|n| toolbox(n).map_or("-".into(), |t| if t.running { "yes" } else { "no" }.into())),
            ),
            ("pin".to_string(), cell(&|n| toolbox(n).and_then(|t| t.pin).unwrap_or("-".into()))),
            (
                "image".to_string(),
                cell(&|n| toolbox(n).map_or("-".into(), |t| short_digest(t.image_identity()).to_string())),
            ),
            (
                "rccl".to_string(),
                cell(&|n| toolbox(n).and_then(|t| t.rccl_sha256).map_or("-".into(), |s| short_digest(&s).to_string())),
            ),
        ];
        out.node_table(&nodes, &rows);
        if let Some(serving) = &self.serving {
            let health = match &serving.health {
                _ if serving.serves => out.paint("serving", Style::Ok),
                HttpAnswer::Status(code, _) => out.paint(&format!("/health answers {code}"), Style::Fail),
                HttpAnswer::Refused => out.paint("not listening (still loading, or stopped)", Style::Warn),
                HttpAnswer::TimedOut => out.paint("/health does not answer", Style::Fail),
                HttpAnswer::Failed(why) => out.paint(why, Style::Fail),
            };
            let ray = serving
                .ray_nodes_alive
                .map_or(String::new(), |alive| format!(", Ray {alive} of {} node(s) alive", serving.nodes));
            let key = if serving.key_needed { " (/v1/models wants the API key: set STRIX_API_KEY)" } else { "" };
            out.line(&format!(
                "{} ({}) at {} on {} since {}: {health}{ray}{key}",
                serving.served, serving.engine, serving.endpoint, serving.head, serving.since
            ));
            for worker in &serving.workers {
                let answer = match worker.reached {
                    crate::serving::reach::Reached::Answers => out.paint("answers", Style::Ok),
                    ref other => out.paint(other.why().0, Style::Fail),
                };
                out.line(&format!("  {} {} at {}: {answer}", worker.node, worker.process, worker.address));
            }
            for warning in &serving.warnings {
                out.warn(warning);
            }
        }
        if let Some(registry) = &self.registry {
            let running = match registry.status.running {
                Some(true) => "running",
                Some(false) => "stopped",
                None => "its engine did not answer",
            };
            out.line(&format!(
                "head registry on {}: {} on disk, {} image(s), {running}",
                registry.node,
                Bytes(registry.status.disk_bytes),
                registry.status.images.len()
            ));
        }
        for node in self.nodes.iter().filter(|n| n.error.is_some()) {
            out.line(&format!(
                "{} {}: {}",
                out.paint("error", Style::Fail),
                node.node,
                node.error.as_deref().unwrap_or_default()
            ));
        }
        for disagreement in &self.disagreements {
            out.warn(disagreement);
        }
        if self.disagreements.is_empty() {
            out.line(&out.paint("every node agrees", Style::Ok));
        }
    }
}

impl Render for ClusterVerifyReport {
    fn render(&self, out: &Output) {
        for node in &self.nodes {
            match (&node.report, &node.error) {
                (Some(verified), _) => {
                    out.line(&format!(
                        "{} {}",
                        out.paint(&node.node, Style::Bold),
                        super::verify::verdict(out, verified)
                    ));
                    out.checks(verified.checks.iter().filter(|c| c.status != Status::Pass));
                }
                (None, error) => out.line(&format!(
                    "{} {}: {}",
                    out.paint(&node.node, Style::Bold),
                    out.paint("not verified", Style::Fail),
                    error.as_deref().unwrap_or("unknown")
                )),
            }
        }
        let show = |what: &str, proof: &Proof| {
            out.checks(&[Check::new(what, proof.status, proof.message.clone(), None)]);
            for line in &proof.evidence {
                out.line(&format!("      {}", out.paint(line, Style::Dim)));
            }
        };
        for pair in &self.pairs {
            out.line(&format!("{} ↔ {}", out.paint(&pair.from, Style::Bold), out.paint(&pair.to, Style::Bold)));
            show("perftest", &pair.perftest);
            show("rccl", &pair.rccl);
        }
        let proven = self.pairs.iter().all(|p| p.rccl.status == Status::Pass);
        let verdict = match (self.ok, proven && !self.pairs.is_empty()) {
            (false, _) => out.paint("the cluster is NOT verified", Style::Fail),
            (true, true) => out.paint("the cluster is verified: RCCL runs over RoCE", Style::Ok),
            (true, false) => out.paint("no failure, but RDMA is not proven (see skipped)", Style::Warn),
        };
        out.line(&format!("\n{verdict}"));
    }
}

impl Render for InstallReport {
    fn render(&self, out: &Output) {
        for node in &self.nodes {
            out.line(&match node.action {
                InstallAction::Installed => format!(
                    "{} {}: installed {} at {} (was {})",
                    out.paint("✓", Style::Ok),
                    node.node,
                    self.version,
                    node.path.as_deref().unwrap_or("?"),
                    node.previous_version.as_deref().unwrap_or("none")
                ),
                InstallAction::UpToDate => {
                    format!("{} {}: already {}", out.paint("✓", Style::Ok), node.node, self.version)
                }
                InstallAction::Failed => format!(
                    "{} {}: {}",
                    out.paint("✗", Style::Fail),
                    node.node,
                    node.error.as_deref().unwrap_or("failed")
                ),
            });
        }
    }
}

impl Render for ClusterRefreshReport {
    fn render(&self, out: &Output) {
        for node in &self.nodes {
            for warning in &node.warnings {
                out.warn(&format!("{}: {warning}", node.node));
            }
        }
        match self.outcome {
            ClusterOutcome::DryRun => {
                for node in &self.nodes {
                    out.line(&format!("{} {}", out.paint(&node.node, Style::Bold), node.report.action.as_str()));
                    for (index, step) in node.report.steps.iter().enumerate() {
                        out.line(&format!("  {}. {}", index + 1, step.description));
                    }
                }
                out.line("dry run; nothing changed");
            }
            ClusterOutcome::Unchanged => out.line(&format!(
                "{} every node already runs {} ({})",
                out.paint("✓", Style::Ok),
                self.pinned,
                self.nodes.first().map_or("-", |n| n.report.reason.as_str())
            )),
            ClusterOutcome::Refreshed => {
                for node in &self.nodes {
                    out.line(&format!(
                        "{} {}: {} ({})",
                        out.paint("✓", Style::Ok),
                        node.node,
                        node.report.action.as_str(),
                        node.report.reason
                    ));
                }
                out.line(&format!(
                    "every node runs {} [{}]",
                    self.pinned,
                    self.nodes.first().and_then(|n| n.report.pin.as_deref()).unwrap_or("unpinned")
                ));
            }
        }
        if let Some(spread) = &self.spread {
            out.line(&spread_line(spread, self.nodes.first().map_or("the head", |n| n.node.as_str())));
        }
    }
}

/// How the image reached the nodes: `spread: node1 fetched 1.2 GiB of 1.2 GiB from upstream into
/// 192.168.100.1:5443; over the link: node1, node2; from upstream: node3`.
fn spread_line(spread: &SpreadReport, head: &str) -> String {
    let Some(registry) = &spread.registry else {
        return "spread: every node had the image; nothing was fetched".to_string();
    };
    let mut line = format!(
        "spread: {head} fetched {} of {} from upstream into {registry}",
        Bytes(spread.fetched),
        Bytes(spread.size)
    );
    for (what, nodes) in
        [("over the link", &spread.from_head), ("from upstream", &spread.from_upstream), ("had it", &spread.had_it)]
    {
        if !nodes.is_empty() {
            line.push_str(&format!("; {what}: {}", nodes.join(", ")));
        }
    }
    if let Some(disk) = spread.disk_bytes {
        line.push_str(&format!("; its registry holds {}", Bytes(disk)));
    }
    line
}
