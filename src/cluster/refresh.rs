//! `cluster refresh`: one digest for every node, all or nothing. The head resolves the channel to
//! `repo@sha256:…` once; every node pulls it and stages its replacement (`refresh --stage-only`);
//! only when all have one does any node swap. A failure before that aborts every staged
//! replacement; a failed swap puts the swapped nodes back. Ctrl-C lets the running phase finish on
//! every node, then undoes it the same way: no node is left on another image, none with leftovers.
//! Once every node has swapped, the refresh is complete and a Ctrl-C changes nothing.

use std::future::Future;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use super::interrupt::Interrupt;
use super::remote::RemoteNode;
use super::{close_all, connect_all, ClusterSettings};
use crate::error::{Error, Result};
use crate::image::reference::ImageRef;
use crate::node::call::Resolve;
use crate::node::NodeCalls;
use crate::ops::phase::{Phase, PhaseRequest};
use crate::ops::refresh::{RefreshReport, RefreshRequest};
use crate::plan::Action;

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

/// Refresh every node as `request` says (its image is resolved to one digest first; it is staged
/// everywhere, then swapped everywhere).
pub async fn cluster_refresh(settings: &ClusterSettings, request: &RefreshRequest) -> Result<ClusterRefreshReport> {
    request.validate()?;
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
    request: &RefreshRequest,
) -> Result<ClusterRefreshReport> {
    let reporter = settings.reporter.as_ref();
    let interrupt = Interrupt::watch();
    let nodes: Vec<&RemoteNode> = nodes.iter().collect();
    let head = nodes[0];
    let pinned = if request.dry_run || ImageRef::parse(&request.image_ref)?.digest.is_some() {
        request.image_ref.clone()
    } else {
        reporter.step_started(&head.name, &format!("resolving {}", request.image_ref));
        let resolved = head.call(Resolve { image: request.image_ref.clone() }).await?;
        reporter.step_finished(&head.name, &format!("{} is {}", request.image_ref, resolved.digest));
        resolved.pinned
    };

    // Stage (or plan) on every node.
    let stage = &RefreshRequest { image_ref: pinned.clone(), stage_only: !request.dry_run, ..request.clone() };
    if interrupt.came().is_some() {
        return Err(Error::Failed("interrupted (Ctrl-C) before any node changed; nothing was changed".into()));
    }
    let staged = on_every_node(&nodes, reporter, "staging", |node| async move { node.call(stage.clone()).await }).await;
    reporter.finish();
    let staged_names: Vec<&RemoteNode> =
        nodes.iter().zip(&staged).filter(|(_, r)| matches!(r, Ok(r) if r.staged.is_some())).map(|(n, _)| *n).collect();
    let stage_failures = failures(&nodes, &staged, interrupt.came().is_some());
    if !stage_failures.is_empty() {
        let cleanup = run_phase(&staged_names, &phase(Phase::Abort, request)).await;
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
    let swap = &phase(Phase::Swap, request);
    let swaps =
        on_every_node(&staged_names, reporter, "swapping", |node| async move { node.call(swap.clone()).await }).await;
    let swap_failures = failures(&staged_names, &swaps, interrupt.came().is_some());
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
                let undo = PhaseRequest { image_id: Some(report.image_id.clone()), ..phase(Phase::Undo, request) };
                cleanup.push((node.name.clone(), node.call(undo).await.map(drop)));
            }
        }
        cleanup.extend(run_phase(&not_swapped, &phase(Phase::Abort, request)).await);
        return Err(Error::Failed(format!(
            "cluster refresh failed during the swap: {}. {}",
            swap_failures.join("; "),
            cleanup_summary("previous toolbox restored", &cleanup)
        )));
    }

    // Done everywhere: remove the parked toolboxes and old pins.
    let finish = phase(Phase::Finish, request);
    let finishes = join_all(nodes.iter().map(|node| node.call(finish.clone()))).await;
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

/// `phase` of the refresh `request` made.
fn phase(phase: Phase, request: &RefreshRequest) -> PhaseRequest {
    PhaseRequest { phase, name: request.name.clone(), keep: request.keep, image_id: None }
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

/// `phase` on each of `nodes`.
async fn run_phase(nodes: &[&RemoteNode], phase: &PhaseRequest) -> Vec<(String, Result<()>)> {
    let results = join_all(nodes.iter().map(|node| node.call(phase.clone()))).await;
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
