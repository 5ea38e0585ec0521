//! `cluster refresh --canary MODEL`: a refresh that proves the new image serves before keeping it.
//! After the swap (the one pipeline, [`refresh_nodes`]), MODEL is launched on every node, the gate
//! and a short bench run against it ([`crate::cluster::bench`]), and the new image is kept only when
//! the gate passes and its output tokens/s is at least `min_ratio` of the last accepted result on
//! the image the nodes ran before. Otherwise every node goes back to that image through the same
//! pipeline (all or nothing; the image is still on every node, so nothing is pulled), what served
//! before is launched again, and the report says why, naming both images.
//!
//! Without an accepted result on the previous image there is nothing to hold the speed against:
//! the canary's own result becomes the first, and on more than one node the answers are held
//! against one node serving alone first (the head, on the new image), as `--reference
//! single-node` would.

use serde::{Deserialize, Serialize};

use super::interrupt::Interrupt;
use super::launch::{launch, LaunchRequest};
use super::refresh::{refresh_nodes, ClusterOutcome, ClusterRefreshReport};
use super::spread::SpreadSettings;
use super::stop::{services_on, stop_service, stop_toolbox};
use crate::bench::gate::{GateReport, DEFAULT_LOGPROB_TOLERANCE};
use crate::bench::result::{BenchResult, Verdict};
use crate::bench::store::BenchStore;
use crate::cluster::bench::{bench, BenchRequest, GateReference, Serving};
use crate::error::{Error, Result, Signal};
use crate::node::Node;
use crate::ops::refresh::RefreshRequest;
use crate::reporter::Reporter;
use crate::serving::model_source::ModelSource;
use crate::serving::record::{Role, ServingRecord};
use crate::serving::service_name::ServiceName;

/// The default of `--min-ratio`: a new image may serve 10% slower (run-to-run noise) and no more.
pub const DEFAULT_MIN_RATIO: f64 = 0.9;

/// The canary's short bench: one level, few requests, so a refresh stays quick; the same every
/// time, so each result is held against the last one of the same key.
pub const BENCH_CONCURRENCY: u32 = 2;
pub const BENCH_REQUESTS: u32 = 8;
pub const BENCH_INPUT_LEN: u32 = 64;
pub const BENCH_OUTPUT_LEN: u32 = 32;

/// What the canary launches and how strict it is.
#[derive(Debug, Clone)]
pub struct CanaryRequest {
    /// MODEL, served from the refreshed toolbox (`launch.toolbox` is the refresh's `--name`).
    pub launch: LaunchRequest,
    pub min_ratio: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CanaryOutcome {
    /// The new image served right and fast enough: every node keeps it, MODEL serves.
    Kept,
    /// The new image was refused: every node is back on the previous image.
    RolledBack,
    /// The new image was refused, and there was no previous image to go back to (a first
    /// refresh): the nodes keep it, nothing serves.
    Refused,
    /// Every node already ran the image: nothing to prove.
    Unchanged,
}

/// The result the new image was held against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub id: String,
    pub image: String,
    pub output_throughput: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CanaryReport {
    pub outcome: CanaryOutcome,
    pub model: String,
    /// The new image (`repo@sha256:…`).
    pub image: String,
    /// The image every node ran before (`repo@sha256:…`); None on a first refresh.
    pub previous: Option<String>,
    /// The refresh to the new image.
    pub refresh: ClusterRefreshReport,
    /// The gate of one node serving alone, when there was no result on the previous image.
    pub single_node_gate: Option<GateReport>,
    /// The gate on every node.
    pub gate: Option<GateReport>,
    /// The short bench on every node (kept in the store; rejected when the canary refused it).
    pub result: Option<BenchResult>,
    pub baseline: Option<Baseline>,
    /// Output tokens/s of the new image over the baseline's.
    pub ratio: Option<f64>,
    pub min_ratio: f64,
    /// Why the new image was refused.
    pub reason: Option<String>,
    /// The refresh back to the previous image.
    pub rollback: Option<ClusterRefreshReport>,
    /// The services launched again after the rollback (what served from the toolbox before the
    /// refresh), by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relaunched: Vec<String>,
    /// Ctrl-C (or SIGTERM) came before the new image was proven: refused and rolled back as a
    /// failed proof is, and the command exits 130 (143).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Signal>,
}

/// What the gate and the bench say of the new image.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub ratio: Option<f64>,
    /// Why it is refused; None: kept.
    pub reason: Option<String>,
}

/// Keep the new image only when the gate passed and its output tokens/s at the canary's level is
/// at least `min_ratio` of `baseline`'s (none: nothing to hold it against, kept on the gate alone).
pub fn judge(
    gate_failure: Option<String>,
    result: &BenchResult,
    baseline: Option<&Baseline>,
    min_ratio: f64,
) -> Judgement {
    if let Some(failure) = gate_failure {
        return Judgement { ratio: None, reason: Some(failure) };
    }
    let measured = result.level(BENCH_CONCURRENCY).map_or(0.0, |level| level.figures.output_throughput);
    let Some(baseline) = baseline else { return Judgement { ratio: None, reason: None } };
    let ratio = if baseline.output_throughput > 0.0 { measured / baseline.output_throughput } else { f64::INFINITY };
    let reason = (ratio < min_ratio).then(|| {
        format!(
            "output tokens/s at concurrency {BENCH_CONCURRENCY}: {measured:.1} on image {} is {ratio:.2} of the \
             {:.1} on image {} (result {}), below --min-ratio {min_ratio}",
            result.key.image, baseline.output_throughput, baseline.image, baseline.id
        )
    });
    Judgement { ratio: Some(ratio), reason }
}

/// The refresh `request` on `nodes` (the head first), proven by the canary; see the module.
pub async fn canary_refresh(
    nodes: &[&dyn Node],
    request: &RefreshRequest,
    spread: &SpreadSettings,
    canary: &CanaryRequest,
    store: &BenchStore,
    reporter: &dyn Reporter,
) -> Result<CanaryReport> {
    if request.dry_run {
        return Err(Error::Usage("--canary proves a refresh by serving from it: it has no --dry-run".into()));
    }
    if !(canary.min_ratio > 0.0 && canary.min_ratio.is_finite()) {
        return Err(Error::Usage(format!("--min-ratio {}: give a ratio above 0, e.g. 0.9", canary.min_ratio)));
    }
    let toolbox = &canary.launch.toolbox;
    let served_before = serving(nodes, toolbox).await?;
    let refresh = refresh_nodes(nodes, request, spread, reporter).await?;
    let previous = refresh.nodes.first().and_then(|node| node.report.previous.clone());
    let mut report = CanaryReport {
        outcome: CanaryOutcome::Kept,
        model: canary.launch.model.clone(),
        image: refresh.pinned.clone(),
        previous: previous.clone(),
        refresh,
        single_node_gate: None,
        gate: None,
        result: None,
        baseline: None,
        ratio: None,
        min_ratio: canary.min_ratio,
        reason: None,
        rollback: None,
        relaunched: Vec::new(),
        interrupted: None,
    };
    if report.refresh.outcome == ClusterOutcome::Unchanged {
        report.outcome = CanaryOutcome::Unchanged;
        return Ok(report);
    }

    // From here a signal refuses the image: the cluster goes back to what it ran and served.
    let interrupt = Interrupt::watch();
    match prove(nodes, canary, previous.as_deref(), store, reporter, &mut report, &interrupt).await {
        Ok(None) => return Ok(report),
        Ok(Some(reason)) => report.reason = Some(reason),
        Err(Error::Interrupted { signal, .. }) => {
            report.interrupted = Some(signal);
            report.reason = Some(format!("{} before image {} was proven", signal.stopped(), report.image));
        }
        Err(error) => {
            report.reason = Some(format!("{} could not be proven on image {}: {error}", report.model, report.image))
        }
    }
    let reason = report.reason.clone().unwrap_or_default();
    reporter.warning(&format!("the canary refused image {}: {reason}", report.image));
    if let Some(result) = report.result.as_mut() {
        *result = store.set_verdict(&result.id, Verdict::Rejected { reason: reason.clone() })?;
    }
    // The swap back stops whatever still runs in the toolbox anyway: a node that cannot say so
    // now does not keep the cluster on the refused image.
    let stopped = stop_toolbox(nodes, Some(nodes[0]), toolbox).await;
    if !stopped.failed().is_empty() {
        reporter.warning(&stopped.summary("the canary's model was stopped"));
    }
    let Some(previous) = previous else {
        report.outcome = CanaryOutcome::Refused;
        return Ok(report);
    };
    report.rollback = Some(roll_back(nodes, request, &previous, spread, reporter).await.map_err(|error| {
        error.context(format!(
            "the canary refused image {} ({reason}), and going back to {previous} failed",
            report.image
        ))
    })?);
    report.outcome = CanaryOutcome::RolledBack;
    for record in served_before {
        let again = relaunch(&record, &canary.launch, nodes);
        launch(nodes, &again, reporter).await.map_err(|error| {
            error.context(format!("every node is back on {previous}, but {} did not serve again", record.service))
        })?;
        report.relaunched.push(record.service);
    }
    Ok(report)
}

/// Every node back on `previous` (`repo@sha256:…`) through the refresh pipeline, all or nothing.
pub async fn roll_back(
    nodes: &[&dyn Node],
    request: &RefreshRequest,
    previous: &str,
    spread: &SpreadSettings,
    reporter: &dyn Reporter,
) -> Result<ClusterRefreshReport> {
    let back = RefreshRequest { image_ref: previous.to_string(), force: false, ..request.clone() };
    refresh_nodes(nodes, &back, spread, reporter).await
}

/// Launch MODEL, gate it and bench it; the reason to refuse the image, if any (the report holds
/// what was measured).
async fn prove(
    nodes: &[&dyn Node],
    canary: &CanaryRequest,
    previous: Option<&str>,
    store: &BenchStore,
    reporter: &dyn Reporter,
    report: &mut CanaryReport,
    interrupt: &Interrupt,
) -> Result<Option<String>> {
    let previous_digest = previous.map(|image| image.rsplit_once('@').map_or(image, |(_, digest)| digest));
    let launched = LaunchRequest { replace: true, dry_run: false, ..canary.launch.clone() };
    // The gate alone, or the bench alone: the gate's reference must not come from a cluster run
    // before one node alone was asked.
    let service = &canary.launch.service;
    let request = |gate: bool| BenchRequest {
        serving: Serving::Launched { service: Some(service.clone()) },
        api_key: canary.launch.api_key.clone(),
        concurrency: vec![BENCH_CONCURRENCY],
        requests: BENCH_REQUESTS,
        input_len: BENCH_INPUT_LEN,
        output_len: BENCH_OUTPUT_LEN,
        gate: gate.then_some(GateReference::Stored),
        logprob_tolerance: DEFAULT_LOGPROB_TOLERANCE,
        load: !gate,
    };

    // Each launch stops what it started on a signal itself; a bench is dropped where it stands.
    let measure = |request: BenchRequest| async move {
        interrupt.unless_it_comes("the canary's bench", bench(nodes, &request, store, reporter)).await
    };
    launch(nodes, &launched, reporter).await?;
    let measured = measure(request(false)).await?;
    let result = measured.result.ok_or_else(|| Error::Internal("the canary's bench kept no result".into()))?;
    report.baseline = match previous_digest {
        Some(digest) => store.last_accepted(&result.key.on_image(digest))?.map(|found| Baseline {
            output_throughput: found.level(BENCH_CONCURRENCY).map_or(0.0, |level| level.figures.output_throughput),
            id: found.id,
            image: found.key.image,
        }),
        None => None,
    };
    report.result = Some(result);
    if report.baseline.is_none() && nodes.len() > 1 {
        // Nothing on the previous image to hold this against: one node serving alone is the
        // reference the cluster's answers must match.
        stop_service(nodes, service.as_str()).await.into_result()?;
        let on = vec![nodes[0].name().to_string()];
        let alone = LaunchRequest { tp: None, pp: None, backend: None, on, ..launched.clone() };
        launch(nodes, &alone, reporter).await?;
        let single = measure(request(true)).await;
        stop_service(&nodes[..1], service.as_str()).await.into_result()?;
        report.single_node_gate = single?.gate;
        if let Some(failure) = gate_failure(report.single_node_gate.as_ref()) {
            return Ok(Some(failure));
        }
        launch(nodes, &launched, reporter).await?;
    }
    report.gate = measure(request(true)).await?.gate;
    let result = report.result.as_ref().ok_or_else(|| Error::Internal("the canary's bench kept no result".into()))?;
    let judgement = judge(gate_failure(report.gate.as_ref()), result, report.baseline.as_ref(), canary.min_ratio);
    report.ratio = judgement.ratio;
    Ok(judgement.reason)
}

/// A failed gate's message (it names the prompt, the token and both images).
fn gate_failure(gate: Option<&GateReport>) -> Option<String> {
    gate?.verdict.as_ref().and_then(|verdict| verdict.failure()).map(|error| error.to_string())
}

/// What `toolbox` serves now on `nodes`: each service's record on its head, where something of
/// it runs.
async fn serving(nodes: &[&dyn Node], toolbox: &str) -> Result<Vec<ServingRecord>> {
    let mut records: Vec<ServingRecord> = Vec::new();
    for (_, services) in services_on(nodes).await {
        for state in services? {
            let ours = state.record.toolbox == toolbox && state.record.role != Role::Worker && state.active();
            if ours && !records.iter().any(|r| r.service == state.record.service) {
                records.push(state.record);
            }
        }
    }
    Ok(records)
}

/// The launch of what `record` served, on the nodes it served on, with the canary's settings for
/// the rest.
fn relaunch(record: &ServingRecord, canary: &LaunchRequest, nodes: &[&dyn Node]) -> LaunchRequest {
    let asked_split = record.engine.parallelism_asked(record.tp, record.pp, record.nodes).is_ok();
    // A record from before services had nodes of their own served on the cluster's first nodes.
    let on = if record.on.is_empty() {
        nodes.iter().take(record.nodes.max(1)).map(|node| node.name().to_string()).collect()
    } else {
        record.on.clone()
    };
    let listen = record.router_listen;
    LaunchRequest {
        engine: record.engine,
        toolbox: record.toolbox.clone(),
        service: ServiceName::parse(&record.service).unwrap_or_else(|_| canary.service.clone()),
        on,
        model: record.model.clone(),
        // The model as the first launch took it (a plain Hub id served by llama.cpp is one GGUF).
        source: record
            .engine
            .source(&record.model, record.file.as_deref())
            .unwrap_or_else(|_| ModelSource::of(&record.model)),
        // The backend and the split as they ran, where the engine takes them asked (llama.cpp
        // has one way across nodes).
        backend: record.engine.backends(Some(record.backend), record.nodes).is_ok().then_some(record.backend),
        tp: asked_split.then_some(record.tp).flatten(),
        pp: asked_split.then_some(record.pp).flatten(),
        // At the endpoint it served at (a record from before the router: the canary's).
        host: listen.and_then(|listen| match listen.ip() {
            std::net::IpAddr::V4(host) if !host.is_unspecified() => Some(host),
            _ => None,
        }),
        port: listen.map(|listen| listen.port()).or(canary.port),
        replace: true,
        dry_run: false,
        extra: record.extra.clone(),
        env: record.env.clone(),
        ..canary.clone()
    }
}

#[cfg(test)]
mod tests;
