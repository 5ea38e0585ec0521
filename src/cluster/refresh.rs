//! `cluster refresh`: one digest for every node, all or nothing. The head resolves the channel to
//! `repo@sha256:…` once; every node pulls it and stages its replacement (the `Phase` call, stage);
//! only when all have one does any node swap. A failure before that aborts every staged
//! replacement; a failed swap puts the swapped nodes back. Ctrl-C lets the running phase finish on
//! every node, then undoes it the same way: no node is left on another image, none with leftovers.
//! Once every node has swapped, the refresh is complete and a Ctrl-C changes nothing.
//! A node where another refresh of the toolbox is running fails the cluster refresh at once
//! (nodes never wait for it, unlike `refresh`): the others would sit staged meanwhile, and the
//! other refresh may change what that node runs.
//!
//! With two nodes or more the image is spread ([`super::spread`]): the head resolves the digest
//! through the registry API, copies the image from upstream once into its registry on the cluster
//! link, and the nodes stage from there. The spread is part of the stage: when it fails, no node
//! is staged, and none swaps.

use std::future::Future;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use super::interrupt::Interrupt;
use super::spread::{self, Prepared, SpreadReport, SpreadSettings};
use super::{close_all, connect_ours, ClusterSettings};
use crate::error::{Error, MultiError, Result, Signal};
use crate::image::reference::ImageRef;
use crate::node::call::Resolve;
use crate::node::remote::RemoteNode;
use crate::node::NodeCalls;
use crate::ops::phase::{Phase, PhaseRequest};
use crate::ops::refresh::{ImageSource, RefreshReport, RefreshRequest};
use crate::plan::Action;
use crate::spread::prune::SpreadPrune;
use crate::spread::pull::ImageDigests;
use crate::spread::resolve::SpreadResolve;

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
    /// How the image reached the nodes, when it was spread from the head.
    #[serde(default)]
    pub spread: Option<SpreadReport>,
}

/// Refresh every node as `request` says (its image is resolved to one digest first; it is staged
/// everywhere, spread from the head as `spread` says, then swapped everywhere).
pub async fn cluster_refresh(
    settings: &ClusterSettings,
    request: &RefreshRequest,
    spread: &SpreadSettings,
) -> Result<ClusterRefreshReport> {
    request.validate()?;
    // Every node must be reachable and run our strix-toolbox before anything starts.
    let nodes = connect_ours(settings, "nothing was changed").await?;
    let result = refresh_nodes(settings, &nodes, request, spread).await;
    close_all(nodes).await;
    result
}

async fn refresh_nodes(
    settings: &ClusterSettings,
    nodes: &[RemoteNode],
    request: &RefreshRequest,
    spread: &SpreadSettings,
) -> Result<ClusterRefreshReport> {
    let reporter = settings.reporter.as_ref();
    let interrupt = Interrupt::watch();
    let nodes: Vec<&RemoteNode> = nodes.iter().collect();
    let head = nodes[0];
    let spreading =
        spread.enabled && nodes.len() > 1 && !request.dry_run && matches!(request.source, ImageSource::Pull);
    let image = ImageRef::parse(&request.image_ref)?;
    let resolving = async {
        if request.dry_run || image.digest.is_some() {
            return Ok(request.image_ref.clone());
        }
        reporter.step_started(&head.name, &format!("resolving {}", request.image_ref));
        let image = request.image_ref.clone();
        // Spreading, through the registry API: a pull on the head would be a second upstream copy.
        let (digest, pinned) = if spreading {
            head.call(SpreadResolve { image }).await.map(|r| (r.digest, r.pinned))?
        } else {
            head.call(Resolve { image }).await.map(|r| (r.digest, r.pinned))?
        };
        reporter.step_finished(&head.name, &format!("{} is {digest}", request.image_ref));
        Ok::<_, Error>(pinned)
    };
    // Spreading, every node says meanwhile which digests of the repository it has.
    let asking = async {
        let asked = nodes.iter().map(|node| node.call(ImageDigests { repository: image.repository.clone() }));
        if spreading {
            join_all(asked).await
        } else {
            Vec::new()
        }
    };
    let (pinned, held) = tokio::join!(resolving, asking);
    let pinned = pinned?;
    let before_any_change = || {
        interrupt
            .came()
            .map(|signal| Error::Interrupted { during: "the cluster refresh, before any node changed".into(), signal })
    };
    if let Some(interrupted) = before_any_change() {
        return Err(interrupted);
    }

    // The spread: the head's registry filled once, for the nodes that lack the image.
    let mut prepared = None;
    if spreading {
        let lacking = spread::lacking(&pinned, &held);
        match spread::prepare(&nodes, &lacking, reporter, spread, &pinned, &request.name).await {
            Ok(spread) => prepared = Some(spread),
            Err(error) => {
                reporter.finish();
                let mut failed =
                    MultiError::new("cluster refresh stopped before any node was staged: the spread failed");
                failed.push(&head.name, error);
                let outcome = "No node was changed (`--spread off` has every node pull from upstream itself)";
                return Err(failed.with_outcome(outcome).into());
            }
        }
    }
    if let Some(interrupted) = before_any_change() {
        return Err(interrupted);
    }

    // Stage (or plan) on every node, each from where the spread says.
    let stage = RefreshRequest { image_ref: pinned.clone(), stage_only: !request.dry_run, ..request.clone() };
    let stages: Vec<RefreshRequest> = (0..nodes.len())
        .map(|index| RefreshRequest {
            spread: prepared.as_ref().and_then(|p| p.sources[index].clone()),
            ..stage.clone()
        })
        .collect();
    let stage_of = |node: &RemoteNode| {
        let index = nodes.iter().position(|n| n.name == node.name).unwrap_or(0);
        stages[index].clone()
    };
    let staged = on_every_node(&nodes, reporter, "staging", |node| {
        let stage = stage_of(node);
        async move { node.call(stage).await }
    })
    .await;
    reporter.finish();
    let staged_names: Vec<&RemoteNode> =
        nodes.iter().zip(&staged).filter(|(_, r)| matches!(r, Ok(r) if r.staged.is_some())).map(|(n, _)| *n).collect();
    if staged.iter().any(Result::is_err) || interrupt.came().is_some() {
        let cleanup = run_phase(&staged_names, &phase(Phase::Abort, request)).await;
        return Err(stopped(
            "cluster refresh stopped before any node swapped",
            &nodes,
            staged,
            interrupt.came(),
            cleanup,
            "staged replacement removed",
        ));
    }
    let reports: Vec<RefreshReport> = staged.into_iter().flatten().collect();
    let mut spread_warnings = vec![Vec::new(); nodes.len()];
    if let Some(prepared) = prepared.as_mut() {
        for (node, report) in nodes.iter().zip(&reports) {
            prepared.pulled(&node.name, report.pulled.as_ref());
        }
        spread_warnings = std::mem::take(&mut prepared.warnings);
    }
    let outcome = if request.dry_run {
        ClusterOutcome::DryRun
    } else if reports.iter().all(|r| r.action == Action::Unchanged) {
        ClusterOutcome::Unchanged
    } else {
        ClusterOutcome::Refreshed
    };
    if outcome != ClusterOutcome::Refreshed {
        let pruned = prune(head, prepared.as_mut(), request, &pinned, &reports).await;
        let nodes = nodes
            .iter()
            .zip(reports)
            .zip(spread_warnings)
            .enumerate()
            .map(|(index, ((n, report), mut warnings))| {
                if index == 0 {
                    warnings.extend(pruned.clone());
                }
                node_refresh(n, report, false, warnings)
            })
            .collect();
        let spread = prepared.map(|p| p.report);
        return Ok(ClusterRefreshReport { outcome, image: request.image_ref.clone(), pinned, nodes, spread });
    }

    // Every node has its replacement: swap them together.
    let swap = &phase(Phase::Swap, request);
    let swaps =
        on_every_node(&staged_names, reporter, "swapping", |node| async move { node.call(swap.clone()).await }).await;
    if swaps.iter().any(Result::is_err) || interrupt.came().is_some() {
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
        return Err(stopped(
            "cluster refresh failed during the swap",
            &staged_names,
            swaps,
            interrupt.came(),
            cleanup,
            "previous toolbox restored",
        ));
    }

    // Done everywhere: remove the parked toolboxes and old pins (on the head's registry too).
    let finish = phase(Phase::Finish, request);
    let finishes = join_all(nodes.iter().map(|node| node.call(finish.clone()))).await;
    let pruned = prune(head, prepared.as_mut(), request, &pinned, &reports).await;
    let nodes = nodes
        .iter()
        .zip(reports)
        .zip(finishes)
        .zip(spread_warnings)
        .enumerate()
        .map(|(index, (((node, report), finish), mut warnings))| {
            let swapped = report.staged.is_some();
            match finish {
                Ok(finish) => warnings.extend(finish.warnings),
                Err(error) => warnings.push(format!("the new toolbox is in place; cleaning up failed: {error}")),
            }
            if index == 0 {
                warnings.extend(pruned.clone());
            }
            node_refresh(node, report, swapped, warnings)
        })
        .collect();
    let spread = prepared.map(|p| p.report);
    Ok(ClusterRefreshReport { outcome, image: request.image_ref.clone(), pinned, nodes, spread })
}

/// Prune the head's registry to the images it serves, when this refresh used it: the pins each
/// node keeps, kept there too. The head's warnings (the refresh itself is done either way).
async fn prune(
    head: &RemoteNode,
    prepared: Option<&mut Prepared>,
    request: &RefreshRequest,
    pinned: &str,
    reports: &[RefreshReport],
) -> Vec<String> {
    let Some(prepared) = prepared else { return Vec::new() };
    let Some(registry) = prepared.report.registry.clone() else { return Vec::new() };
    let prune = SpreadPrune {
        registry,
        toolbox: request.name.clone(),
        image: pinned.to_string(),
        pin: reports.iter().find_map(|report| report.pin.clone()),
        keep: request.keep,
    };
    match head.call(prune).await {
        Ok(pruned) => {
            prepared.report.pruned = pruned.deleted;
            prepared.report.disk_bytes = Some(pruned.disk_bytes);
            pruned.warnings
        }
        Err(error) => vec![format!("the new toolbox is in place; pruning the head's registry failed: {error}")],
    }
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

/// Why the refresh stopped, after `cleanup` (`done` on each node it ran on): each failing node's
/// own error; the signal when no node failed. A cleanup that failed is said, with its fix.
fn stopped<T>(
    summary: &str,
    nodes: &[&RemoteNode],
    results: Vec<Result<T>>,
    signal: Option<Signal>,
    cleanup: Vec<(String, Result<()>)>,
    done: &str,
) -> Error {
    let mut failed = MultiError::new(summary);
    for (node, result) in nodes.iter().zip(results) {
        if let Err(error) = result {
            failed.push(&node.name, error);
        }
    }
    let cleaned: Vec<String> = cleanup.iter().filter(|(_, r)| r.is_ok()).map(|(node, _)| node.clone()).collect();
    let mut left = MultiError::new(match signal {
        Some(_) if failed.is_empty() => "interrupted during the cluster refresh, and cleaning up failed",
        _ => "cleaning up failed",
    });
    for (node, result) in cleanup {
        if let Err(error) = result {
            left.push(node, error);
        }
    }
    let fix = "Fix: run `strix-toolbox cluster refresh` again (it finishes or removes what was left), or \
               `strix-toolbox status` on those nodes";
    match (signal, failed.is_empty(), left.is_empty()) {
        (Some(signal), true, true) => Error::Interrupted { during: "the cluster refresh".into(), signal },
        (_, true, _) => left.with_outcome(fix).into(),
        (_, false, true) if cleaned.is_empty() => failed.with_outcome("No node was changed.").into(),
        (_, false, true) => {
            failed.with_outcome(format!("Every node is as it was ({done} on {}).", cleaned.join(", "))).into()
        }
        (_, false, false) => failed.with_outcome(format!("{left}. {fix}")).into(),
    }
}

/// `phase` on each of `nodes`.
async fn run_phase(nodes: &[&RemoteNode], phase: &PhaseRequest) -> Vec<(String, Result<()>)> {
    let results = join_all(nodes.iter().map(|node| node.call(phase.clone()))).await;
    nodes.iter().map(|n| n.name.clone()).zip(results.into_iter().map(|r| r.map(drop))).collect()
}
