//! `cluster refresh` and `refresh` (a cluster of one node, this machine): one digest for every
//! node, all or nothing, on any [`Node`]. One node refreshes itself in one call (it stages,
//! verifies and swaps under its own lock). With more, the head resolves the channel to
//! `repo@sha256:…` once; every node pulls it and stages its replacement (the `Refresh` call,
//! `stage_only`); only when all have one does any node swap (the `Phase` calls). A failure before that aborts every staged
//! replacement; a failed swap puts the swapped nodes back. Ctrl-C lets the running phase finish on
//! every node, then undoes it the same way: no node is left on another image, none with leftovers.
//! Once every node has swapped, the refresh is complete and a Ctrl-C changes nothing.
//! A node where another refresh of the toolbox is running fails the cluster refresh at once
//! (`cluster refresh` asks the nodes never to wait for it, unlike `refresh`): the others would
//! sit staged meanwhile, and the other refresh may change what that node runs.
//!
//! With two nodes or more the image is spread ([`super::spread`]): the head resolves the digest
//! through the registry API, copies the image from upstream once into its registry on the cluster
//! link, and the nodes stage from there. The spread is part of the stage: when it fails, no node
//! is staged, and none swaps.

use std::future::Future;

use futures_util::future::{join_all, LocalBoxFuture};
use serde::{Deserialize, Serialize};

use super::interrupt::Interrupt;
use super::spread::{self, Prepared, SpreadReport, SpreadSettings};
use crate::error::{Error, MultiError, Result, Signal};
use crate::image::reference::ImageRef;
use crate::node::call::Resolve;
use crate::node::{Node, NodeCalls};
use crate::ops::phase::{Phase, PhaseRequest};
use crate::ops::refresh::{ImageSource, RefreshReport, RefreshRequest};
use crate::plan::Action;
use crate::reporter::Reporter;
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

/// Refresh `nodes` (the first is the head) as `request` says, all or nothing. One node refreshes
/// itself in one call: it stages, verifies and swaps under its own lock (it waits for another
/// refresh as `request.lock_wait_seconds` says), with nobody to wait for. More nodes are refreshed
/// in phases: the image is resolved to one digest, staged everywhere (spread from the head as
/// `spread` says), and swapped only when every node has staged; a failure, or Ctrl-C, undoes
/// what the phase did on every node. A failure is the node's own error for one node, else one
/// that names each node.
pub async fn refresh_nodes(
    nodes: &[&dyn Node],
    request: &RefreshRequest,
    spread: &SpreadSettings,
    reporter: &dyn Reporter,
) -> Result<ClusterRefreshReport> {
    refresh_nodes_then(nodes, request, spread, reporter, None).await
}

/// What runs once every node staged its replacement and before any node swaps (given each
/// node's staged report): a canary measures the image about to be replaced, under the conditions
/// the new one will meet. Its error stops the refresh as a failed stage does: every staged
/// replacement is removed, and no node changed.
pub type BeforeSwap<'a> = Box<dyn FnOnce(&[RefreshReport]) -> LocalBoxFuture<'a, Result<()>> + 'a>;

/// [`refresh_nodes`], with `before_swap` run between the stage and the swap when the refresh
/// changes any node (one node too is then refreshed in phases, so there is a between).
pub async fn refresh_nodes_then(
    nodes: &[&dyn Node],
    request: &RefreshRequest,
    spread: &SpreadSettings,
    reporter: &dyn Reporter,
    before_swap: Option<BeforeSwap<'_>>,
) -> Result<ClusterRefreshReport> {
    request.validate()?;
    match (nodes, before_swap) {
        ([], _) => Err(Error::Usage("there is no node to refresh".into())),
        ([node], None) => refresh_one(*node, request).await,
        ([_], Some(before_swap)) => {
            // Nothing to spread to: the one node pulls for itself, as its own refresh does.
            let alone = SpreadSettings { enabled: false, ..spread.clone() };
            in_phases(nodes, request, &alone, reporter, &Interrupt::watch(), Some(before_swap)).await
        }
        (_, before_swap) => in_phases(nodes, request, spread, reporter, &Interrupt::watch(), before_swap).await,
    }
}

/// The one node's own refresh, as the cluster reports it.
async fn refresh_one(node: &dyn Node, request: &RefreshRequest) -> Result<ClusterRefreshReport> {
    let report = node.call(request.clone()).await?;
    let pinned = match (&report.digest, request.dry_run) {
        (Some(digest), false) => format!("{}@{digest}", ImageRef::parse(&report.image)?.repository),
        _ => request.image_ref.clone(),
    };
    let outcome = outcome_of(request, std::slice::from_ref(&report));
    let swapped = outcome == ClusterOutcome::Refreshed;
    let nodes = vec![node_refresh(node.name(), report, swapped, Vec::new())];
    Ok(ClusterRefreshReport { outcome, image: request.image_ref.clone(), pinned, nodes, spread: None })
}

/// What the reports say happened, everywhere.
fn outcome_of(request: &RefreshRequest, reports: &[RefreshReport]) -> ClusterOutcome {
    if request.dry_run {
        ClusterOutcome::DryRun
    } else if reports.iter().all(|r| r.action == Action::Unchanged) {
        ClusterOutcome::Unchanged
    } else {
        ClusterOutcome::Refreshed
    }
}

/// Stage on every node, then swap on every node (see [`refresh_nodes`]); `interrupt` is asked
/// after each phase.
async fn in_phases(
    nodes: &[&dyn Node],
    request: &RefreshRequest,
    spread: &SpreadSettings,
    reporter: &dyn Reporter,
    interrupt: &Interrupt,
    before_swap: Option<BeforeSwap<'_>>,
) -> Result<ClusterRefreshReport> {
    let head = nodes[0];
    let spreading = spread.enabled && !request.dry_run && matches!(request.source, ImageSource::Pull);
    let image = ImageRef::parse(&request.image_ref)?;
    // Nothing changes yet: Ctrl-C stops the wait for the registry's answer where it stands.
    let resolving = async {
        Ok(tokio::join!(resolve(head, request, &image, spreading, reporter), held_digests(nodes, &image, spreading)))
    };
    let during = format!("resolving {}, before any node changed", request.image_ref);
    let (pinned, held) = interrupt.unless_it_comes(&during, resolving).await?;
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
        // Its wait on upstream (the head lists the image there) stops at Ctrl-C; what it started
        // on the head ends with this command's channel.
        let preparing = spread::prepare(nodes, &lacking, reporter, spread, &pinned, &request.name);
        match interrupt.unless_it_comes("spreading the image, before any node changed", preparing).await {
            Ok(spread) => prepared = Some(spread),
            Err(interrupted @ Error::Interrupted { .. }) => {
                reporter.finish();
                return Err(interrupted);
            }
            Err(error) => {
                reporter.finish();
                let failed = MultiError::one(
                    "cluster refresh stopped before any node was staged: the spread failed",
                    head.name(),
                    error,
                );
                let Error::Nodes(failed) = failed else { return Err(failed) };
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
    let sources = prepared.as_ref().map(|p: &Prepared| p.sources.clone()).unwrap_or_default();
    let staging = on_every_node(nodes, reporter, "staging", |index, node| {
        let stage = RefreshRequest { spread: sources.get(index).cloned().flatten(), ..stage.clone() };
        async move { node.call(stage).await }
    });
    let staged = match prepared.as_mut() {
        Some(prepared) => stage_stopping_the_copy(staging, head, prepared, reporter, interrupt).await,
        None => staging.await,
    };
    // The head's copy ran beside the stage: it must have completed too.
    let copied = match prepared.as_mut() {
        Some(prepared) => spread::finish(head, prepared, reporter, interrupt.came().is_some()).await,
        None => Ok(()),
    };
    reporter.finish();
    let staged_nodes: Vec<&dyn Node> =
        nodes.iter().zip(&staged).filter(|(_, r)| matches!(r, Ok(r) if r.staged.is_some())).map(|(n, _)| *n).collect();
    // (Ctrl-C stopped the copy: the interrupt is what the error says, below.)
    if let (Err(error), None) = (copied, interrupt.came()) {
        let cleanup = run_phase(&staged_nodes, &phase(Phase::Abort, request)).await;
        return Err(spread_failed_midway(head, error, cleanup));
    }
    if staged.iter().any(Result::is_err) || interrupt.came().is_some() {
        let cleanup = run_phase(&staged_nodes, &phase(Phase::Abort, request)).await;
        return Err(stopped(
            "cluster refresh stopped before any node swapped",
            nodes,
            staged,
            interrupt.came(),
            cleanup,
            "staged replacement removed",
        ));
    }
    let reports: Vec<RefreshReport> = staged.into_iter().flatten().collect();
    let mut warnings = vec![Vec::new(); nodes.len()];
    if let Some(prepared) = prepared.as_mut() {
        for (node, report) in nodes.iter().zip(&reports) {
            prepared.pulled(node.name(), report.pulled.as_ref());
        }
        warnings = std::mem::take(&mut prepared.warnings);
    }
    let outcome = outcome_of(request, &reports);
    let mut swapped = vec![false; nodes.len()];
    if let (ClusterOutcome::Refreshed, Some(before_swap)) = (outcome, before_swap) {
        let before = before_swap(&reports).await;
        let interrupted = interrupt.came();
        if before.is_err() || interrupted.is_some() {
            let cleanup = run_phase(&staged_nodes, &phase(Phase::Abort, request)).await;
            return Err(stopped_before_swap(before, interrupted, cleanup));
        }
    }
    if outcome == ClusterOutcome::Refreshed {
        swap_everywhere(nodes, &staged_nodes, &reports, request, reporter, interrupt).await?;
        // Done everywhere: remove the parked toolboxes and old pins.
        let finish = phase(Phase::Finish, request);
        let finishes = join_all(nodes.iter().map(|node| node.call(finish.clone()))).await;
        for (index, finish) in finishes.into_iter().enumerate() {
            swapped[index] = reports[index].staged.is_some();
            match finish {
                Ok(finish) => warnings[index].extend(finish.warnings),
                Err(error) => warnings[index].push(format!("the new toolbox is in place; cleaning up failed: {error}")),
            }
        }
    }
    // The head's registry pruned to what it serves (its warnings are the head's).
    warnings[0].extend(prune(head, prepared.as_mut(), request, &pinned, &reports).await);
    let nodes = nodes
        .iter()
        .zip(reports)
        .zip(swapped)
        .zip(warnings)
        .map(|(((node, report), swapped), warnings)| node_refresh(node.name(), report, swapped, warnings))
        .collect();
    Ok(ClusterRefreshReport {
        outcome,
        image: request.image_ref.clone(),
        pinned,
        nodes,
        spread: prepared.map(|p| p.report),
    })
}

/// What stopped the refresh between the stage and the swap (`before`'s error, else the signal),
/// once every staged replacement was removed (`cleanup`).
fn stopped_before_swap(before: Result<()>, interrupted: Option<Signal>, cleanup: Vec<(String, Result<()>)>) -> Error {
    let left: Vec<String> =
        cleanup.iter().filter_map(|(node, result)| result.as_ref().err().map(|e| format!("{node}: {e}"))).collect();
    let outcome = if left.is_empty() {
        "every staged replacement was removed; no node changed".to_string()
    } else {
        format!(
            "removing the staged replacements failed ({}); run `strix-toolbox cluster refresh` again",
            left.join("; ")
        )
    };
    match (before, interrupted) {
        (Err(Error::Interrupted { during, signal }), _) => {
            Error::Interrupted { during: format!("{during}, before any node swapped ({outcome})"), signal }
        }
        (Err(error), _) => error.context(format!("the cluster refresh stopped before any node swapped ({outcome})")),
        (Ok(()), Some(signal)) => {
            Error::Interrupted { during: format!("the cluster refresh, before any node swapped ({outcome})"), signal }
        }
        (Ok(()), None) => Error::Internal("the refresh stopped before the swap for no reason".into()),
    }
}

/// The head's copy failed while the nodes staged from its relay: their staged replacements are
/// removed (`cleanup`), and the copy's error is the refresh's.
fn spread_failed_midway(head: &dyn Node, error: Error, cleanup: Vec<(String, Result<()>)>) -> Error {
    let failed =
        MultiError::one("cluster refresh stopped before any node swapped: the spread failed", head.name(), error);
    let Error::Nodes(failed) = failed else { return failed };
    let left: Vec<String> =
        cleanup.iter().filter_map(|(node, result)| result.as_ref().err().map(|e| format!("{node}: {e}"))).collect();
    let outcome = if left.is_empty() {
        "No node was changed (`--spread off` has every node pull from upstream itself)".to_string()
    } else {
        format!(
            "Removing the staged replacements failed ({}). Fix: run `strix-toolbox cluster refresh` again",
            left.join("; ")
        )
    };
    failed.with_outcome(outcome).into()
}

/// The digest every node gets (`repo@sha256:…`), resolved on the head: through the registry API
/// when spreading (a pull on the head would be a second upstream copy), else by a pull there.
async fn resolve(
    head: &dyn Node,
    request: &RefreshRequest,
    image: &ImageRef,
    spreading: bool,
    reporter: &dyn Reporter,
) -> Result<String> {
    if request.dry_run || image.digest.is_some() {
        return Ok(request.image_ref.clone());
    }
    reporter.step_started(head.name(), &format!("resolving {}", request.image_ref));
    let image = request.image_ref.clone();
    let (digest, pinned) = if spreading {
        head.call(SpreadResolve { image }).await.map(|r| (r.digest, r.pinned))?
    } else {
        head.call(Resolve { image }).await.map(|r| (r.digest, r.pinned))?
    };
    reporter.step_finished(head.name(), &format!("{} is {digest}", request.image_ref));
    Ok(pinned)
}

/// The stage's results; Ctrl-C during it stops the head's copy and its relay at once, so that
/// the nodes pulling from the relay fail their stage now rather than wait for what upstream
/// sends (the stage is then undone, as after any interrupted stage).
async fn stage_stopping_the_copy<T>(
    staging: impl Future<Output = Vec<Result<T>>>,
    head: &dyn Node,
    prepared: &mut Prepared,
    reporter: &dyn Reporter,
    interrupt: &Interrupt,
) -> Vec<Result<T>> {
    tokio::pin!(staging);
    tokio::select! {
        staged = &mut staging => staged,
        _ = interrupt.arrival() => {
            // Its error is the interruption's doing: the refresh reports the signal.
            let _ = spread::finish(head, prepared, reporter, true).await;
            staging.await
        }
    }
}

/// Spreading, which digests of the repository each node holds (asked while the head resolves).
async fn held_digests(nodes: &[&dyn Node], image: &ImageRef, spreading: bool) -> Vec<Result<Vec<String>>> {
    if !spreading {
        return Vec::new();
    }
    join_all(nodes.iter().map(|node| node.call(ImageDigests { repository: image.repository.clone() }))).await
}

/// Every staged node swaps; when one fails (or Ctrl-C comes), the swapped ones are undone and the
/// others' staged replacements removed, and the error says so.
async fn swap_everywhere(
    nodes: &[&dyn Node],
    staged: &[&dyn Node],
    reports: &[RefreshReport],
    request: &RefreshRequest,
    reporter: &dyn Reporter,
    interrupt: &Interrupt,
) -> Result<()> {
    let swap = &phase(Phase::Swap, request);
    let swaps =
        on_every_node(staged, reporter, "swapping", |_, node| async move { node.call(swap.clone()).await }).await;
    if !swaps.iter().any(Result::is_err) && interrupt.came().is_none() {
        return Ok(());
    }
    // A swap that answered with an error may still have happened (the connection dropped after
    // it): those nodes are undone too, which leaves a node that did not swap alone.
    let (mut swapped, mut not_swapped) = (Vec::new(), Vec::new());
    for (node, swap) in staged.iter().zip(&swaps) {
        if !matches!(swap, Ok(s) if !s.changed) {
            swapped.push(*node);
        }
        if !matches!(swap, Ok(s) if s.changed) {
            not_swapped.push(*node);
        }
    }
    let mut cleanup = Vec::new();
    for (node, report) in nodes.iter().zip(reports) {
        if swapped.iter().any(|s| s.name() == node.name()) {
            let undo = PhaseRequest { image_id: Some(report.image_id.clone()), ..phase(Phase::Undo, request) };
            cleanup.push((node.name().to_string(), node.call(undo).await.map(drop)));
        }
    }
    cleanup.extend(run_phase(&not_swapped, &phase(Phase::Abort, request)).await);
    Err(stopped(
        "cluster refresh failed during the swap",
        staged,
        swaps,
        interrupt.came(),
        cleanup,
        "previous toolbox restored",
    ))
}

/// Prune the head's registry to the images it serves, when this refresh used it: the pins each
/// node keeps, kept there too. The head's warnings (the refresh itself is done either way).
async fn prune(
    head: &dyn Node,
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

fn node_refresh(node: &str, report: RefreshReport, swapped: bool, mut warnings: Vec<String>) -> NodeRefresh {
    warnings.extend(report.warnings.iter().cloned());
    NodeRefresh { node: node.to_string(), report, swapped, warnings }
}

/// `phase` of the refresh `request` made.
fn phase(phase: Phase, request: &RefreshRequest) -> PhaseRequest {
    PhaseRequest { phase, name: request.name.clone(), keep: request.keep, image_id: None }
}

/// Run `work` (given each node's index) on every node at once, a progress line each, to the end
/// on every node.
async fn on_every_node<'a, T, F, Fut>(
    nodes: &[&'a dyn Node],
    reporter: &dyn Reporter,
    what: &str,
    work: F,
) -> Vec<Result<T>>
where
    F: Fn(usize, &'a dyn Node) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    join_all(nodes.iter().enumerate().map(|(index, node)| {
        reporter.step_started(node.name(), what);
        let done = work(index, *node);
        async move {
            let result = done.await;
            reporter.step_finished(node.name(), &format!("{what}: {}", if result.is_ok() { "done" } else { "failed" }));
            result
        }
    }))
    .await
}

/// Why the refresh stopped, after `cleanup` (`done` on each node it ran on): each failing node's
/// own error; the signal when no node failed. A cleanup that failed is said, with its fix.
fn stopped<T>(
    summary: &str,
    nodes: &[&dyn Node],
    results: Vec<Result<T>>,
    signal: Option<Signal>,
    cleanup: Vec<(String, Result<()>)>,
    done: &str,
) -> Error {
    let mut failed = MultiError::new(summary);
    for (node, result) in nodes.iter().zip(results) {
        if let Err(error) = result {
            failed.push(node.name(), error);
        }
    }
    let mut cleaned: Vec<String> = Vec::new();
    for (node, _) in cleanup.iter().filter(|(_, result)| result.is_ok()) {
        if !cleaned.contains(node) {
            cleaned.push(node.clone());
        }
    }
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
async fn run_phase(nodes: &[&dyn Node], phase: &PhaseRequest) -> Vec<(String, Result<()>)> {
    let results = join_all(nodes.iter().map(|node| node.call(phase.clone()))).await;
    nodes.iter().map(|n| n.name().to_string()).zip(results.into_iter().map(|r| r.map(drop))).collect()
}

#[cfg(test)]
mod tests;
