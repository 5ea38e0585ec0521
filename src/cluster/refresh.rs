//! `cluster refresh`: one digest for every node, all or nothing. The head resolves the channel to
//! `repo@sha256:…` once; every node pulls it and stages its replacement (`refresh --stage-only`);
//! only when all have one does any node swap. A failure before that aborts every staged
//! replacement; a failed swap puts the swapped nodes back. Ctrl-C lets the running phase finish on
//! every node, then undoes it the same way: no node is left on another image, none with leftovers.
//! Once every node has swapped, the refresh is complete and a Ctrl-C changes nothing.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use super::remote::{argv, RemoteNode};
use super::{close_all, connect_all, ClusterSettings};
use crate::error::{Error, Result};
use crate::image::reference::ImageRef;
use crate::manager::ManagerChoice;
use crate::ops::phase::PhaseReport;
use crate::ops::refresh::RefreshReport;
use crate::ops::resolve::ResolveReport;
use crate::plan::Action;

/// What to refresh on every node.
#[derive(Debug, Clone)]
pub struct ClusterRefreshRequest {
    pub name: String,
    /// `repo:channel`, `--image REF`, or already `repo@sha256:…`.
    pub image_ref: String,
    pub manager: ManagerChoice,
    pub keep: usize,
    pub force: bool,
    pub dry_run: bool,
    pub env: Vec<String>,
    /// Every node verifies its staged toolbox before any node swaps (off: `--no-verify`).
    pub verify: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClusterOutcome {
    /// Every node swapped to the new toolbox.
    Refreshed,
    /// Every node already had it.
    Unchanged,
    /// Plans only.
    DryRun,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRefresh {
    pub node: String,
    pub report: RefreshReport,
    /// The node's toolbox was replaced.
    pub swapped: bool,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterRefreshReport {
    pub outcome: ClusterOutcome,
    /// What was asked for.
    pub image: String,
    /// What every node got (`repo@sha256:…`).
    pub pinned: String,
    pub nodes: Vec<NodeRefresh>,
}

pub async fn cluster_refresh(
    settings: &ClusterSettings,
    request: &ClusterRefreshRequest,
) -> Result<ClusterRefreshReport> {
    ImageRef::parse(&request.image_ref)?;
    // Every node must be reachable and run our strix-toolbox before anything starts.
    let (nodes, unreachable) = connect_all(settings).await;
    let mut problems: Vec<String> = unreachable.into_iter().map(|(_, error)| error.to_string()).collect();
    problems.extend(nodes.iter().filter_map(|node| node.require_ours().err()).map(|e| e.to_string()));
    if !problems.is_empty() {
        close_all(nodes).await;
        return Err(Error::Failed(format!("nothing was changed: {}", problems.join("; "))));
    }
    let result = refresh_nodes(settings, &nodes, request).await;
    close_all(nodes).await;
    result
}

async fn refresh_nodes(
    settings: &ClusterSettings,
    nodes: &[RemoteNode],
    request: &ClusterRefreshRequest,
) -> Result<ClusterRefreshReport> {
    let reporter = settings.reporter.as_ref();
    let interrupt = Interrupt::watch();
    let nodes: Vec<&RemoteNode> = nodes.iter().collect();
    let head = nodes[0];
    let pinned = if request.dry_run || ImageRef::parse(&request.image_ref)?.digest.is_some() {
        request.image_ref.clone()
    } else {
        reporter.step_started(&head.name, &format!("resolving {}", request.image_ref));
        let resolved: ResolveReport = head.strix(&argv(&["resolve", &request.image_ref]), false).await?;
        reporter.step_finished(&head.name, &format!("{} is {}", request.image_ref, resolved.digest));
        resolved.pinned
    };

    // Stage (or plan) on every node.
    let stage_args = &stage_args(request, &pinned);
    if interrupt.came() {
        return Err(Error::Failed("interrupted (Ctrl-C) before any node changed; nothing was changed".into()));
    }
    let staged = on_every_node(&nodes, reporter, "staging", |node| async move {
        node.strix::<RefreshReport>(stage_args, false).await
    })
    .await;
    reporter.finish();
    let staged_names: Vec<&RemoteNode> =
        nodes.iter().zip(&staged).filter(|(_, r)| matches!(r, Ok(r) if r.staged.is_some())).map(|(n, _)| *n).collect();
    let stage_failures = failures(&nodes, &staged, interrupt.came());
    if !stage_failures.is_empty() {
        let cleanup = run_phase(&staged_names, "abort", &request.name, &[]).await;
        return Err(Error::Failed(format!(
            "cluster refresh stopped before any node swapped: {}. {}",
            stage_failures.join("; "),
            cleanup_summary("staged replacement removed", &cleanup)
        )));
    }
    let reports: Vec<RefreshReport> = staged.into_iter().flatten().collect();
    let outcome = if request.dry_run {
        ClusterOutcome::DryRun
    } else if reports.iter().all(|r| r.action == Action::Unchanged) {
        ClusterOutcome::Unchanged
    } else {
        ClusterOutcome::Refreshed
    };
    if outcome != ClusterOutcome::Refreshed {
        let nodes = nodes.iter().zip(reports).map(|(n, report)| node_refresh(n, report, false, Vec::new())).collect();
        return Ok(ClusterRefreshReport { outcome, image: request.image_ref.clone(), pinned, nodes });
    }

    // Every node has its replacement: swap them together.
    let swaps = on_every_node(&staged_names, reporter, "swapping", |node| {
        let args = argv(&["phase", "swap", &request.name]);
        async move { node.strix::<PhaseReport>(&args, false).await }
    })
    .await;
    let swap_failures = failures(&staged_names, &swaps, interrupt.came());
    if !swap_failures.is_empty() {
        // A swap that answered with an error may still have happened (the connection dropped
        // after it): those nodes are undone too, which leaves a node that did not swap alone.
        let swapped: Vec<&RemoteNode> = staged_names
            .iter()
            .zip(&swaps)
            .filter(|(_, s)| !matches!(s, Ok(s) if !s.changed))
            .map(|(n, _)| *n)
            .collect();
        let not_swapped: Vec<&RemoteNode> = staged_names
            .iter()
            .zip(&swaps)
            .filter(|(_, s)| !matches!(s, Ok(s) if s.changed))
            .map(|(n, _)| *n)
            .collect();
        let mut cleanup = Vec::new();
        for (node, report) in nodes.iter().zip(&reports) {
            if swapped.iter().any(|s| s.name == node.name) {
                let undo = argv(&["phase", "undo", &request.name, "--image-id", &report.image_id]);
                cleanup.push((node.name.clone(), node.strix::<PhaseReport>(&undo, false).await.map(drop)));
            }
        }
        cleanup.extend(run_phase(&not_swapped, "abort", &request.name, &[]).await);
        return Err(Error::Failed(format!(
            "cluster refresh failed during the swap: {}. {}",
            swap_failures.join("; "),
            cleanup_summary("previous toolbox restored", &cleanup)
        )));
    }

    // Done everywhere: remove the parked toolboxes and old pins.
    let keep = request.keep.to_string();
    let finish_args = argv(&["phase", "finish", &request.name, "--keep", &keep]);
    let finishes = join_all(nodes.iter().map(|node| node.strix::<PhaseReport>(&finish_args, false))).await;
    let nodes = nodes
        .iter()
        .zip(reports)
        .zip(finishes)
        .map(|((node, report), finish)| {
            let swapped = report.staged.is_some();
            let warnings = match finish {
                Ok(finish) => finish.warnings,
                Err(error) => vec![format!("the new toolbox is in place; cleaning up failed: {error}")],
            };
            node_refresh(node, report, swapped, warnings)
        })
        .collect();
    Ok(ClusterRefreshReport { outcome, image: request.image_ref.clone(), pinned, nodes })
}

fn node_refresh(node: &RemoteNode, report: RefreshReport, swapped: bool, mut warnings: Vec<String>) -> NodeRefresh {
    warnings.extend(report.warnings.iter().cloned());
    NodeRefresh { node: node.name.clone(), report, swapped, warnings }
}

/// The node-side `refresh` every node runs.
fn stage_args(request: &ClusterRefreshRequest, pinned: &str) -> Vec<String> {
    let manager =
        clap::ValueEnum::to_possible_value(&request.manager).map_or("auto".into(), |v| v.get_name().to_string());
    let mut args = argv(&["refresh", "--image", pinned, "--name", &request.name, "--manager", &manager]);
    args.extend(["--keep".into(), request.keep.to_string()]);
    if request.force {
        args.push("--force".into());
    }
    if !request.verify {
        args.push("--no-verify".into());
    }
    for pair in &request.env {
        args.extend(["--env".into(), pair.clone()]);
    }
    args.push(if request.dry_run { "--dry-run" } else { "--stage-only" }.into());
    args
}

/// Run `work` on every node at once, a progress line each, to the end on every node.
async fn on_every_node<'a, T, F, Fut>(
    nodes: &[&'a RemoteNode],
    reporter: &dyn crate::reporter::Reporter,
    what: &str,
    work: F,
) -> Vec<Result<T>>
where
    F: Fn(&'a RemoteNode) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    join_all(nodes.iter().map(|node| {
        reporter.step_started(&node.name, what);
        let done = work(node);
        async move {
            let result = done.await;
            reporter.step_finished(&node.name, &format!("{what}: {}", if result.is_ok() { "done" } else { "failed" }));
            result
        }
    }))
    .await
}

/// Ctrl-C during a cluster refresh: noted, never acted on mid-phase (a half-done phase is worse
/// than a finished one, and the ssh clients run in their own process group, so the terminal's
/// SIGINT does not reach them). After each phase the refresh asks whether it came, and undoes.
struct Interrupt(Arc<AtomicBool>, tokio::task::JoinHandle<()>);

impl Interrupt {
    fn watch() -> Interrupt {
        let flag = Arc::new(AtomicBool::new(false));
        let seen = flag.clone();
        let task = tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                seen.store(true, Ordering::SeqCst);
            }
        });
        Interrupt(flag, task)
    }

    fn came(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

impl Drop for Interrupt {
    fn drop(&mut self) {
        self.1.abort();
    }
}

fn failures<T>(nodes: &[&RemoteNode], results: &[Result<T>], interrupted: bool) -> Vec<String> {
    let mut failures: Vec<String> = nodes
        .iter()
        .zip(results)
        .filter_map(|(node, r)| r.as_ref().err().map(|e| format!("{}: {e}", node.name)))
        .collect();
    if interrupted {
        failures.push("interrupted (Ctrl-C)".into());
    }
    failures
}

/// `phase PHASE NAME` on each of `nodes`.
async fn run_phase(nodes: &[&RemoteNode], phase: &str, name: &str, extra: &[String]) -> Vec<(String, Result<()>)> {
    let mut args = argv(&["phase", phase, name]);
    args.extend(extra.iter().cloned());
    let results = join_all(nodes.iter().map(|node| node.strix::<PhaseReport>(&args, false))).await;
    nodes.iter().map(|n| n.name.clone()).zip(results.into_iter().map(|r| r.map(drop))).collect()
}

fn cleanup_summary(done: &str, cleanup: &[(String, Result<()>)]) -> String {
    let failed: Vec<String> =
        cleanup.iter().filter_map(|(node, r)| r.as_ref().err().map(|e| format!("{node}: {e}"))).collect();
    if failed.is_empty() {
        let nodes: Vec<&str> = cleanup.iter().map(|(n, _)| n.as_str()).collect();
        if nodes.is_empty() {
            "No node was changed.".into()
        } else {
            format!("Every node is as it was ({done} on {}).", nodes.join(", "))
        }
    } else {
        format!(
            "Cleaning up failed on {}. Fix: run `strix-toolbox cluster refresh` again (it finishes or removes what \
             was left), or `strix-toolbox status` on those nodes",
            failed.join("; ")
        )
    }
}
