//! `cluster refresh --canary MODEL`: a refresh that proves the new image serves before keeping it.
//! Once every node staged the new image and before any node swaps ([`refresh_nodes_then`]), MODEL
//! is launched on the image the nodes still run and measured there: the gate's answers and a
//! short bench ([`crate::cluster::bench`]), the previous image under the conditions the new one is
//! about to meet. After the swap MODEL is launched again, and the new image is kept only when its
//! answers match the previous image's (a near-tie passes: [`crate::bench::gate`]) and its output
//! tokens/s is at least `min_ratio` of the previous image's. Otherwise every node goes back to
//! that image through the same pipeline (all or nothing; the image is still on every node, so
//! nothing is pulled), what served before is launched again, and the report says why, naming
//! both images.
//!
//! The reference never comes from the image under test: a wrong image agrees with itself, and its
//! answers would then fail every good image after it. With nothing measured before the swap (a
//! first refresh, or a previous image that did not serve MODEL), the answers are held against
//! the model's stored reference if there is one, else they go unchecked and the report says so;
//! no reference is kept from them. The speed is then held against the last accepted result on the
//! previous image, if there is one.

use std::cell::{Cell, RefCell};

use serde::{Deserialize, Serialize};

use super::interrupt::Interrupt;
use super::launch::{launch, LaunchRequest, Pinned};
use super::refresh::{refresh_nodes, refresh_nodes_then, BeforeSwap, ClusterOutcome, ClusterRefreshReport};
use super::spread::SpreadSettings;
use super::stop::{services_on, stop_toolbox};
use crate::bench::gate::{GateReport, GateRun, DEFAULT_LOGPROB_TOLERANCE};
use crate::bench::prompt::PromptForm;
use crate::bench::result::{Acceptance, BenchResult};
use crate::bench::store::BenchStore;
use crate::cluster::bench::{answers, bench, BenchRequest, GateReference, Serving};
use crate::error::{Error, Result, Signal};
use crate::model::source::ModelSource;
use crate::node::Node;
use crate::ops::refresh::{RefreshReport, RefreshRequest};
use crate::reporter::Reporter;
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
    /// Measured just before the swap (else: the last accepted result on the previous image).
    #[serde(default)]
    pub before_swap: bool,
}

impl Baseline {
    fn of(result: &BenchResult, before_swap: bool) -> Baseline {
        Baseline {
            id: result.id.clone(),
            image: result.key.image.clone(),
            output_throughput: result.level(BENCH_CONCURRENCY).map_or(0.0, |level| level.figures.output_throughput),
            before_swap,
        }
    }
}

/// The previous image, measured just before the swap with MODEL launched as the canary launches it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BeforeSwapMeasure {
    /// Its answers to the gate's prompts: the new image's reference.
    pub answers: GateRun,
    /// Its short bench (kept in the store, accepted): the new image's baseline.
    pub result: BenchResult,
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
    /// The previous image measured just before the swap.
    pub before_swap: Option<BeforeSwapMeasure>,
    /// Why the previous image could not be measured before the swap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_swap_failed: Option<String>,
    /// The gate on every node.
    pub gate: Option<GateReport>,
    /// Why nothing checked the new image's answers (nothing to hold them against).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unchecked: Option<String>,
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
    /// The model launched again after the rollback (what served before the refresh).
    /// (Services, by name.)
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
        let when = if baseline.before_swap { "measured just before the swap" } else { "the last accepted" };
        format!(
            "output tokens/s at concurrency {BENCH_CONCURRENCY}: {measured:.1} on image {} is {ratio:.2} of the \
             {:.1} on image {} (result {}, {when}), below --min-ratio {min_ratio}",
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
    // From here a signal refuses the image: the cluster goes back to what it ran and served.
    let interrupt = Interrupt::watch();
    let step = BeforeSwapStep::default();
    let before_swap = measure_before_swap(nodes, canary, &served_before, store, reporter, &interrupt, &step);
    let refresh = match refresh_nodes_then(nodes, request, spread, reporter, Some(before_swap)).await {
        Ok(refresh) => refresh,
        Err(error) => {
            // Every node is as it was; the measure replaced what served there.
            for record in served_before.iter().filter(|_| step.replaced.get()) {
                if let Err(again) = serve_again(nodes, record, canary, reporter).await {
                    reporter.warning(&format!("{} did not serve again: {again}", record.service));
                }
            }
            return Err(error);
        }
    };
    let previous = refresh.nodes.first().and_then(|node| node.report.previous.clone());
    let (before_swap, before_swap_failed) = match step.measured.into_inner() {
        Some(Ok(measure)) => (Some(measure), None),
        Some(Err(error)) => {
            let image = previous.as_deref().unwrap_or("the previous image");
            (None, Some(format!("{} did not serve from image {image}: {error}", canary.launch.model)))
        }
        None => (None, None),
    };
    if let Some(failed) = &before_swap_failed {
        reporter.warning(&format!("the previous image was not measured before the swap: {failed}"));
    }
    let mut report = CanaryReport {
        outcome: CanaryOutcome::Kept,
        model: canary.launch.model.clone(),
        image: refresh.pinned.clone(),
        previous: previous.clone(),
        refresh,
        before_swap,
        before_swap_failed,
        gate: None,
        unchecked: None,
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
        *result = store.set_verdict(&result.id, Acceptance::Rejected { reason: reason.clone() })?;
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
        serve_again(nodes, &record, canary, reporter).await.map_err(|error| {
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

/// The short bench of what the canary launched: the gate first when `gate` names a reference, and
/// the load when `load`.
fn bench_request(canary: &CanaryRequest, gate: Option<GateReference>, load: bool) -> BenchRequest {
    BenchRequest {
        serving: Serving::Launched { service: Some(canary.launch.service.clone()) },
        api_key: canary.launch.api_key.clone(),
        concurrency: vec![BENCH_CONCURRENCY],
        requests: BENCH_REQUESTS,
        input_len: BENCH_INPUT_LEN,
        output_len: BENCH_OUTPUT_LEN,
        prompt_form: PromptForm::Text,
        gate,
        logprob_tolerance: DEFAULT_LOGPROB_TOLERANCE,
        load,
    }
}

/// What the step before the swap did.
#[derive(Default)]
struct BeforeSwapStep {
    /// Its measure; None: the nodes ran no previous image.
    measured: RefCell<Option<Result<BeforeSwapMeasure>>>,
    /// It stopped what served.
    replaced: Cell<bool>,
}

/// The step between the stage and the swap: when the nodes run a previous image, MODEL launched
/// there (unless it serves there already), its answers and its short bench taken, and stopped
/// again (into `step`). Only a signal stops the refresh; any other failure is what `step` holds.
fn measure_before_swap<'a>(
    nodes: &'a [&'a dyn Node],
    canary: &'a CanaryRequest,
    served_before: &'a [ServingRecord],
    store: &'a BenchStore,
    reporter: &'a dyn Reporter,
    interrupt: &'a Interrupt,
    step: &'a BeforeSwapStep,
) -> BeforeSwap<'a> {
    Box::new(move |staged: &[RefreshReport]| {
        let previous = staged.first().and_then(|report| report.previous.clone());
        Box::pin(async move {
            if previous.is_none() {
                return Ok(());
            }
            step.replaced.set(true);
            match measure(nodes, canary, served_before, store, reporter, interrupt).await {
                Err(interrupted @ Error::Interrupted { .. }) => Err(interrupted),
                outcome => {
                    *step.measured.borrow_mut() = Some(outcome);
                    Ok(())
                }
            }
        })
    })
}

/// MODEL launched as the canary launches it (what serves, when that is MODEL on every node, as the
/// canary names it), its answers and short bench taken, and stopped.
async fn measure(
    nodes: &[&dyn Node],
    canary: &CanaryRequest,
    served_before: &[ServingRecord],
    store: &BenchStore,
    reporter: &dyn Reporter,
    interrupt: &Interrupt,
) -> Result<BeforeSwapMeasure> {
    let serves_it = served_before.iter().any(|record| {
        record.service == canary.launch.service.as_str()
            && record.model == canary.launch.model
            && record.nodes == nodes.len()
    });
    if !serves_it {
        // The swap stops what the toolbox serves anyway: it makes room for MODEL now.
        let stopped = stop_toolbox(nodes, Some(nodes[0]), &canary.launch.toolbox).await;
        if !stopped.failed().is_empty() {
            reporter.warning(&stopped.summary("what served from the previous image was stopped"));
        }
        let launched = LaunchRequest { replace: true, dry_run: false, ..canary.launch.clone() };
        launch(nodes, &launched, reporter).await?;
    }
    let request = bench_request(canary, None, true);
    let during = "the canary's measure of the previous image";
    let taken = async {
        let answers = interrupt.unless_it_comes(during, answers(nodes, &request, reporter)).await?;
        let measured = interrupt.unless_it_comes(during, bench(nodes, &request, store, reporter)).await?;
        let result = measured.result.ok_or_else(|| Error::Internal("the canary's bench kept no result".into()))?;
        Ok(BeforeSwapMeasure { answers, result })
    }
    .await;
    // The swap replaces the toolbox: what was launched there stops first, its record with it.
    let stopped = stop_toolbox(nodes, Some(nodes[0]), &canary.launch.toolbox).await;
    if !stopped.failed().is_empty() {
        reporter.warning(&stopped.summary("the canary's model on the previous image was stopped"));
    }
    taken
}

/// Launch MODEL, gate it against the previous image's answers and bench it; the reason to refuse
/// the image, if any (the report holds what was measured).
async fn prove(
    nodes: &[&dyn Node],
    canary: &CanaryRequest,
    previous: Option<&str>,
    store: &BenchStore,
    reporter: &dyn Reporter,
    report: &mut CanaryReport,
    interrupt: &Interrupt,
) -> Result<Option<String>> {
    let launched = LaunchRequest { replace: true, dry_run: false, ..canary.launch.clone() };
    launch(nodes, &launched, reporter).await?;
    let reference = match &report.before_swap {
        Some(before) => GateReference::Taken {
            described: format!("image {} just before the swap ({})", before.answers.image, before.answers.layout),
            run: Box::new(before.answers.clone()),
        },
        None => GateReference::StoredIfAny,
    };
    let request = bench_request(canary, Some(reference), true);
    let measured = interrupt.unless_it_comes("the canary's bench", bench(nodes, &request, store, reporter)).await?;
    report.gate = measured.gate;
    if report.gate.as_ref().is_some_and(GateReport::unchecked) {
        let why = match (previous, &report.before_swap_failed) {
            (None, _) => "nothing served before it (a first refresh)".to_string(),
            (Some(_), Some(failed)) => format!("the previous image was not measured before the swap ({failed})"),
            (Some(_), None) => "the previous image was not measured before the swap".to_string(),
        };
        let unchecked = format!(
            "{}'s answers on image {} went unchecked: {why}, and there is no stored reference for it; none is kept \
             from them",
            report.model, report.image
        );
        reporter.warning(&unchecked);
        report.unchecked = Some(unchecked);
    }
    if let Some(failure) = gate_failure(report.gate.as_ref()) {
        return Ok(Some(failure));
    }
    let result = measured.result.ok_or_else(|| Error::Internal("the canary's bench kept no result".into()))?;
    report.baseline = baseline(report.before_swap.as_ref(), previous, &result, store)?;
    let judgement = judge(None, &result, report.baseline.as_ref(), canary.min_ratio);
    report.result = Some(result);
    report.ratio = judgement.ratio;
    Ok(judgement.reason)
}

/// What the new image's speed is held against: the previous image measured just before the swap
/// (the same launch, the same conditions), else the last accepted result on the previous image
/// with the same key.
fn baseline(
    before_swap: Option<&BeforeSwapMeasure>,
    previous: Option<&str>,
    result: &BenchResult,
    store: &BenchStore,
) -> Result<Option<Baseline>> {
    if let Some(before) = before_swap.filter(|before| before.result.key.on_image(&result.key.image) == result.key) {
        return Ok(Some(Baseline::of(&before.result, true)));
    }
    let Some(previous) = previous else { return Ok(None) };
    let digest = previous.rsplit_once('@').map_or(previous, |(_, digest)| digest);
    Ok(store.last_accepted(&result.key.on_image(digest))?.map(|found| Baseline::of(&found, false)))
}

/// A failed gate's message (it names the prompt, the token and both images).
fn gate_failure(gate: Option<&GateReport>) -> Option<String> {
    gate?.verdict.as_ref().and_then(|verdict| verdict.failure()).map(|error| error.to_string())
}

/// `record` served again on the nodes it served on.
async fn serve_again(
    nodes: &[&dyn Node],
    record: &ServingRecord,
    canary: &CanaryRequest,
    reporter: &dyn Reporter,
) -> Result<()> {
    let again = relaunch(record, &canary.launch, nodes);
    launch(nodes, &again, reporter).await.map(drop)
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
/// the rest (the watch's relaunch too: `canary` is then the watch's settings: its timeout, keys
/// and Hub settings). It serves the recorded weights on the recorded image or nothing
/// ([`Pinned`]): after a rollback the nodes run the image it served on again, and a `model pull`
/// since does not change what it serves.
pub(crate) fn relaunch(record: &ServingRecord, canary: &LaunchRequest, nodes: &[&dyn Node]) -> LaunchRequest {
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
        cuda_graphs: record.cuda_graphs,
        keep_free_gib: record.keep_free_gib,
        // The weights and the image it served, whatever the caches and the toolbox hold now.
        pinned: Some(Pinned::of(record)),
        on_demand: None,
        ..canary.clone()
    }
}

#[cfg(test)]
pub(crate) mod tests;
