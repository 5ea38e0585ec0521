//! `cluster init|doctor|refresh|status|install`: the whole cluster from one machine, over ssh.

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::{ClusterArgs, ClusterCommand};
use crate::cluster::checks::ClusterDoctorReport;
use crate::cluster::install::{cluster_install, InstallAction, InstallReport};
use crate::cluster::nodes::{default_cluster_file, parse_node_list, ClusterFile};
use crate::cluster::refresh::{cluster_refresh, ClusterOutcome, ClusterRefreshReport};
use crate::cluster::ssh::SshOptions;
use crate::cluster::status::{cluster_status, ClusterStatusReport};
use crate::cluster::verify::{cluster_verify, ClusterVerifyReport, Proof};
use crate::cluster::{close_all, connect_all, doctor::cluster_doctor, ClusterSettings};
use crate::doctor::Status;
use crate::error::{Error, Result};
use crate::image::short_digest;
use crate::node::Node;
use crate::output::{Style, Ui};
use crate::settings::Settings;

pub async fn run(args: &ClusterArgs, settings: &Settings) -> Result<i32> {
    let ui = &settings.ui;
    if let ClusterCommand::Init = args.command {
        return init(args, ui);
    }
    let cluster = cluster_settings(args, ui)?;
    match &args.command {
        ClusterCommand::Init => unreachable!("handled above"),
        ClusterCommand::Doctor(toolbox) => {
            let report = cluster_doctor(&cluster, &toolbox.name).await?;
            render(ui, &report, print_doctor);
            Ok(report.exit_code())
        }
        ClusterCommand::Status(toolbox) => {
            let report = cluster_status(&cluster, &toolbox.name).await?;
            render(ui, &report, print_status);
            Ok(i32::from(!report.disagreements.is_empty()))
        }
        ClusterCommand::Verify(toolbox) => {
            let report = cluster_verify(&cluster, &toolbox.name).await?;
            render(ui, &report, print_verify);
            Ok(report.exit_code())
        }
        ClusterCommand::Launch(launch) => {
            let (nodes, unreachable) = connect_all(&cluster).await;
            let refused: Vec<String> = unreachable
                .iter()
                .map(|(_, e)| e.to_string())
                .chain(nodes.iter().filter_map(|n| n.require_ours().err()).map(|e| e.to_string()))
                .collect();
            let result = if refused.is_empty() {
                let nodes_dyn: Vec<&dyn Node> = nodes.iter().map(|n| n as &dyn Node).collect();
                super::launch::run(launch, &nodes_dyn, ui).await
            } else {
                Err(Error::Failed(format!("nothing was started: {}", refused.join("; "))))
            };
            close_all(nodes).await;
            result
        }
        ClusterCommand::Stop(toolbox) => {
            let (nodes, unreachable) = connect_all(&cluster).await;
            let unreachable: Vec<(String, String)> = unreachable.into_iter().map(|(n, e)| (n, e.to_string())).collect();
            let nodes_dyn: Vec<&dyn Node> = nodes.iter().map(|n| n as &dyn Node).collect();
            let result = super::stop::run(&toolbox.name, &nodes_dyn, unreachable, ui).await;
            close_all(nodes).await;
            result
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
            let (nodes, unreachable) = connect_all(&cluster).await;
            for (node, error) in &unreachable {
                ui.warn(&format!("{node}: {error}"));
            }
            let nodes_dyn: Vec<&dyn Node> = nodes.iter().map(|n| n as &dyn Node).collect();
            let result = super::logs::run(&logs.logs.name, &nodes_dyn, logs.logs.lines, logs.logs.follow, ui).await;
            close_all(nodes).await;
            result.map(|code| code.max(i32::from(!unreachable.is_empty())))
        }
        ClusterCommand::Install => {
            let report = cluster_install(&cluster).await?;
            render(ui, &report, print_install);
            Ok(report.exit_code())
        }
        ClusterCommand::Refresh(options) => {
            let request = super::refresh::request(options, None)?;
            let report = cluster_refresh(&cluster, &request).await?;
            render(ui, &report, print_refresh);
            Ok(0)
        }
    }
}

fn render<T: serde::Serialize>(ui: &Ui, report: &T, text: fn(&T, &Ui)) {
    if ui.json {
        ui.print_json(report);
    } else {
        text(report, ui);
    }
}

/// The cluster file's path: --cluster, else the XDG default.
fn cluster_file_path(args: &ClusterArgs) -> Result<PathBuf> {
    args.cluster.clone().or_else(default_cluster_file).ok_or_else(|| {
        Error::Usage("no cluster file location: neither --cluster, XDG_CONFIG_HOME nor HOME is set".into())
    })
}

/// Nodes from --nodes, else the cluster file; ssh config from --ssh-config, else the file's.
fn cluster_settings(args: &ClusterArgs, ui: &Ui) -> Result<ClusterSettings> {
    let (nodes, file_ssh_config) = match &args.nodes {
        Some(list) => (parse_node_list(list)?, None),
        None => {
            let file = ClusterFile::read(&cluster_file_path(args)?)?;
            (file.nodes, file.ssh_config)
        }
    };
    let ssh = SshOptions {
        config_file: args.ssh_config.clone().or(file_ssh_config),
        connect_timeout: Duration::from_secs(args.connect_timeout.max(1)),
    };
    Ok(ClusterSettings { nodes, ssh, ui: *ui })
}

fn init(args: &ClusterArgs, ui: &Ui) -> Result<i32> {
    let list = args
        .nodes
        .as_deref()
        .ok_or_else(|| Error::Usage("`cluster init` needs --nodes NODE,NODE,... (the head first)".into()))?;
    let file = ClusterFile::new(parse_node_list(list)?, args.ssh_config.clone())?;
    let path = cluster_file_path(args)?;
    file.write(&path)?;
    if ui.json {
        ui.print_json(&serde_json::json!({ "path": path, "cluster": file }));
    } else {
        ui.status(&format!("wrote {} with {} node(s): {}", path.display(), file.nodes.len(), file.nodes.join(", ")));
    }
    Ok(0)
}

/// A row of the table: its name, then one (status, text) cell per node.
type Row = (String, Vec<(Option<Status>, String)>);

/// A table: one column per node, padded before painting so colours do not skew it.
fn print_table(ui: &Ui, nodes: &[String], rows: &[Row]) {
    const MAX: usize = 28;
    let clip = |text: &str| -> String {
        if text.chars().count() > MAX {
            format!("{}…", text.chars().take(MAX - 1).collect::<String>())
        } else {
            text.to_string()
        }
    };
    let first = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0).max(5);
    let widths: Vec<usize> = (0..nodes.len())
        .map(|i| {
            let cells = rows.iter().map(|(_, cells)| clip(&cells[i].1).chars().count());
            cells.chain([nodes[i].chars().count().min(MAX)]).max().unwrap_or(0)
        })
        .collect();
    let mut header = format!("{:<first$}", "");
    for (node, width) in nodes.iter().zip(&widths) {
        header.push_str(&format!("  {:<width$}", clip(node)));
    }
    println!("{}", ui.paint(header.trim_end(), Style::Bold));
    for (name, cells) in rows {
        let mut line = format!("{name:<first$}");
        for ((status, text), width) in cells.iter().zip(&widths) {
            line.push_str("  ");
            line.push_str(&ui.paint_status(*status, &format!("{:<width$}", clip(text))));
        }
        println!("{}", line.trim_end());
    }
}

fn print_doctor(report: &ClusterDoctorReport, ui: &Ui) {
    let rows: Vec<_> = report
        .checks
        .iter()
        .map(|c| (c.name.clone(), c.cells.iter().map(|cell| (cell.status, cell.text.clone())).collect()))
        .collect();
    print_table(ui, &report.nodes, &rows);
    let problems: Vec<_> = report.checks.iter().flat_map(|c| c.problems.iter().map(move |p| (c, p))).collect();
    if !problems.is_empty() {
        println!();
    }
    for (check, problem) in &problems {
        let label = ui.status_label(problem.status);
        println!("{label}  {}  {}: {}", problem.node, check.name, problem.message);
        if let Some(fix) = &problem.fix {
            println!("      {} {fix}", ui.paint("fix:", Style::Dim));
        }
    }
    let failed = problems.iter().filter(|(_, p)| p.status == Status::Fail).count();
    let warned = problems.iter().filter(|(_, p)| p.status == Status::Warn).count();
    println!("\n{} node(s): {failed} failed, {warned} warning(s)", report.nodes.len());
}

fn print_status(report: &ClusterStatusReport, ui: &Ui) {
    let nodes: Vec<String> = report.nodes.iter().map(|n| n.node.clone()).collect();
    let cell = |f: &dyn Fn(&crate::cluster::status::NodeStatus) -> String| -> Vec<(Option<Status>, String)> {
        report.nodes.iter().map(|n| (None, f(n))).collect()
    };
    let toolbox = |n: &crate::cluster::status::NodeStatus| n.toolbox(&report.toolbox).cloned();
    let rows = vec![
        ("reachable".to_string(), cell(&|n| if n.reachable { "yes".into() } else { "no".into() })),
        ("version".to_string(), cell(&|n| n.version.clone().unwrap_or("-".into()))),
        (report.toolbox.clone(), cell(&|n| if toolbox(n).is_some() { "present".into() } else { "missing".into() })),
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
    print_table(ui, &nodes, &rows);
    for node in report.nodes.iter().filter(|n| n.error.is_some()) {
        println!("{} {}: {}", ui.paint("error", Style::Fail), node.node, node.error.as_deref().unwrap_or_default());
    }
    for disagreement in &report.disagreements {
        ui.warn(disagreement);
    }
    if report.disagreements.is_empty() {
        println!("{}", ui.paint("every node agrees", Style::Ok));
    }
}

fn print_verify(report: &ClusterVerifyReport, ui: &Ui) {
    for node in &report.nodes {
        match (&node.report, &node.error) {
            (Some(verified), _) => {
                let word =
                    if verified.ok { ui.paint("verified", Style::Ok) } else { ui.paint("NOT verified", Style::Fail) };
                println!("{} {word}", ui.paint(&node.node, Style::Bold));
                for check in verified.checks.iter().filter(|c| c.status != crate::check::Status::Pass) {
                    println!("  {}  {:<24} {}", ui.status_label(check.status), check.name, check.message);
                }
            }
            (None, error) => println!(
                "{} {}: {}",
                ui.paint(&node.node, Style::Bold),
                ui.paint("not verified", Style::Fail),
                error.as_deref().unwrap_or("unknown")
            ),
        }
    }
    let show = |what: &str, proof: &Proof| {
        println!("  {}  {what:<9} {}", ui.status_label(proof.status), proof.message);
        for line in &proof.evidence {
            println!("      {}", ui.paint(line, Style::Dim));
        }
    };
    for pair in &report.pairs {
        println!("{} ↔ {}", ui.paint(&pair.from, Style::Bold), ui.paint(&pair.to, Style::Bold));
        show("perftest", &pair.perftest);
        show("rccl", &pair.rccl);
    }
    let proven = report.pairs.iter().all(|p| p.rccl.status == crate::check::Status::Pass);
    let verdict = match (report.ok, proven && !report.pairs.is_empty()) {
        (false, _) => ui.paint("the cluster is NOT verified", Style::Fail),
        (true, true) => ui.paint("the cluster is verified: RCCL runs over RoCE", Style::Ok),
        (true, false) => ui.paint("no failure, but RDMA is not proven (see skipped)", Style::Warn),
    };
    println!("\n{verdict}");
}

fn print_install(report: &InstallReport, ui: &Ui) {
    for node in &report.nodes {
        match node.action {
            InstallAction::Installed => println!(
                "{} {}: installed {} at {} (was {})",
                ui.paint("✓", Style::Ok),
                node.node,
                report.version,
                node.path.as_deref().unwrap_or("?"),
                node.previous_version.as_deref().unwrap_or("none")
            ),
            InstallAction::UpToDate => {
                println!("{} {}: already {}", ui.paint("✓", Style::Ok), node.node, report.version)
            }
            InstallAction::Failed => {
                println!("{} {}: {}", ui.paint("✗", Style::Fail), node.node, node.error.as_deref().unwrap_or("failed"))
            }
        }
    }
}

fn print_refresh(report: &ClusterRefreshReport, ui: &Ui) {
    for node in &report.nodes {
        for warning in &node.warnings {
            ui.warn(&format!("{}: {warning}", node.node));
        }
    }
    match report.outcome {
        ClusterOutcome::DryRun => {
            for node in &report.nodes {
                println!("{} {}", ui.paint(&node.node, Style::Bold), node.report.action.as_str());
                for (index, step) in node.report.steps.iter().enumerate() {
                    println!("  {}. {}", index + 1, step.description);
                }
            }
            println!("dry run; nothing changed");
        }
        ClusterOutcome::Unchanged => println!(
            "{} every node already runs {} ({})",
            ui.paint("✓", Style::Ok),
            report.pinned,
            report.nodes.first().map_or("-", |n| n.report.reason.as_str())
        ),
        ClusterOutcome::Refreshed => {
            for node in &report.nodes {
                println!(
                    "{} {}: {} ({})",
                    ui.paint("✓", Style::Ok),
                    node.node,
                    node.report.action.as_str(),
                    node.report.reason
                );
            }
            println!(
                "every node runs {} [{}]",
                report.pinned,
                report.nodes.first().and_then(|n| n.report.pin.as_deref()).unwrap_or("unpinned")
            );
        }
    }
}
