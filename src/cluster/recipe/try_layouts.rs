//! `cluster plan MODEL --try`: each layout the plan finds feasible launched in turn with the
//! launch every service gets (`cluster::launch`, the layout asked as `--on`/`--tp`/`--pp`), held
//! to the gate and a short bench (`cluster::bench`, at the canary's level: the same figures a
//! canary compares), stopped again; the fastest that answers right kept as the model's recipe.
//! The head alone is tried first when it holds the model (one node is often fastest): the gate's
//! reference is then the model's stored one, else the first layout's answers become it.

use serde::{Deserialize, Serialize};

use super::book::RecipeBook;
use super::Recipe;
use crate::bench::gate::DEFAULT_LOGPROB_TOLERANCE;
use crate::bench::prompt::PromptForm;
use crate::bench::store::BenchStore;
use crate::cluster::bench::{bench, BenchRequest, GateReference, Serving};
use crate::cluster::canary::{BENCH_CONCURRENCY, BENCH_INPUT_LEN, BENCH_OUTPUT_LEN, BENCH_REQUESTS};
use crate::cluster::interrupt::Interrupt;
use crate::cluster::launch::{launch, LaunchRequest};
use crate::cluster::stop::{stop_services, StopTarget};
use crate::error::{Error, Result};
use crate::node::Node;
use crate::reporter::Reporter;
use crate::serving::fit::Layout;

/// One layout to try: the nodes (its head first) and the split asked of the engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub on: Vec<String>,
    pub tp: Option<usize>,
    pub pp: Option<usize>,
}

/// One layout as it went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tried {
    #[serde(flatten)]
    pub candidate: Candidate,
    /// As the bench keys it (None: it did not serve).
    pub layout: Option<String>,
    /// The gate passed.
    pub answers_right: bool,
    /// Output tokens/s at the short bench's concurrency.
    pub output_throughput: Option<f64>,
    /// The bench result kept for it.
    pub result: Option<String>,
    /// Why it did not serve, or did not answer right.
    pub failed: Option<String>,
}

/// What `cluster plan MODEL --try` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TryReport {
    pub model: String,
    pub tried: Vec<Tried>,
    /// The recipe kept (None: no layout answered right).
    pub kept: Option<Recipe>,
}

/// The layouts of a plan over every node of `cluster` that fit, the head alone first when
/// `head_alone_fits`. A plan of several layouts names each by its split; a plan of one lets the
/// engine's own plan choose it (llama.cpp takes no split but its nodes). Layouts with data
/// parallel are not tried: `--tp`/`--pp` cannot ask for them.
pub fn candidates(cluster: &[&dyn Node], layouts: &[Layout], head_alone_fits: bool) -> Vec<Candidate> {
    let all: Vec<String> = cluster.iter().map(|node| node.name().to_string()).collect();
    let mut candidates = Vec::new();
    if head_alone_fits && cluster.len() > 1 {
        candidates.push(Candidate { on: all[..1].to_vec(), tp: None, pp: None });
    }
    let feasible: Vec<_> = layouts.iter().filter(|layout| layout.fits().is_some() && layout.dp == 1).collect();
    for layout in &feasible {
        let (tp, pp) = match feasible.len() {
            1 => (None, None),
            _ => (Some(layout.tp as usize), Some(layout.pp as usize)),
        };
        candidates.push(Candidate { on: all.clone(), tp, pp });
    }
    candidates
}

/// Try each of `candidates` with `launch` (the service as the operator would launch it), keep
/// the fastest that answers right in `book`; what served is stopped after each.
pub async fn try_layouts(
    cluster: &[&dyn Node],
    launch_as: &LaunchRequest,
    candidates: &[Candidate],
    store: &BenchStore,
    book: &RecipeBook,
    reporter: &dyn Reporter,
) -> Result<TryReport> {
    let mut report = TryReport { model: launch_as.model.clone(), tried: Vec::new(), kept: None };
    let mut best: Option<Recipe> = None;
    for candidate in candidates {
        let request = LaunchRequest {
            on: candidate.on.clone(),
            tp: candidate.tp,
            pp: candidate.pp,
            recipes: None,
            pinned: None,
            replace: false,
            dry_run: false,
            ..launch_as.clone()
        };
        let mut tried = Tried {
            candidate: candidate.clone(),
            layout: None,
            answers_right: false,
            output_throughput: None,
            result: None,
            failed: None,
        };
        reporter.step_started(&candidate.on[0], &format!("trying {} on {}", launch_as.model, candidate.on.join(", ")));
        let launched = match launch(cluster, &request, reporter).await {
            Ok(launched) => launched,
            Err(interrupted @ Error::Interrupted { .. }) => return Err(interrupted),
            Err(error) => {
                tried.failed = Some(format!("it did not serve: {error}"));
                report.tried.push(tried);
                continue;
            }
        };
        // Ctrl-C during the bench stops the try's service before it ends the run.
        let interrupt = Interrupt::watch();
        let during = format!("the bench of {} on {}", request.service, candidate.on.join(", "));
        let measured =
            interrupt.unless_it_comes(&during, bench(cluster, &short_bench(&request), store, reporter)).await;
        let stopped = stop_services(cluster, Some(cluster[0]), &StopTarget::Named(request.service.clone())).await?;
        if !stopped.failed().is_empty() {
            reporter.warning(&stopped.summary(&format!("{} was stopped after its try", request.service)));
        }
        let measured = match measured {
            Ok(measured) => measured,
            Err(interrupted @ Error::Interrupted { .. }) => return Err(interrupted),
            Err(error) => {
                tried.failed = Some(format!("it was not measured: {error}"));
                report.tried.push(tried);
                continue;
            }
        };
        tried.answers_right = measured.passed() && measured.gate.is_some();
        if !tried.answers_right {
            tried.failed = measured
                .gate
                .as_ref()
                .and_then(|gate| gate.verdict.as_ref())
                .and_then(|verdict| verdict.failure())
                .map(|failure| failure.to_string());
        }
        if let Some(result) = &measured.result {
            let throughput = result.level(BENCH_CONCURRENCY).map_or(0.0, |level| level.figures.output_throughput);
            tried.layout = Some(result.key.layout());
            tried.output_throughput = Some(throughput);
            tried.result = Some(result.id.clone());
            let faster = best.as_ref().is_none_or(|best| throughput > best.output_throughput);
            if tried.answers_right && faster {
                let mut args = launch_as.extra.words().to_vec();
                if let Some(fit) = &launched.fit {
                    args.extend(launch_as.engine.planned_args(fit, &launch_as.extra));
                }
                best = Some(Recipe {
                    model: launch_as.model.clone(),
                    engine: launch_as.engine,
                    on: candidate.on.clone(),
                    tp: candidate.tp,
                    pp: candidate.pp,
                    layout: result.key.layout(),
                    args,
                    image: result.key.image.clone(),
                    identity: result.key.model.clone(),
                    output_throughput: throughput,
                    result: result.id.clone(),
                    kept: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                });
            }
        }
        report.tried.push(tried);
    }
    if let Some(recipe) = best {
        book.keep(&recipe)?;
        reporter.step_finished(&recipe.on[0], &format!("kept the recipe for {}: {}", recipe.model, recipe.layout));
        report.kept = Some(recipe);
    }
    Ok(report)
}

/// The gate against the model's stored reference (the first layout's answers become it when
/// there is none), then the canary's short bench.
fn short_bench(request: &LaunchRequest) -> BenchRequest {
    BenchRequest {
        serving: Serving::Launched { service: Some(request.service.clone()) },
        api_key: request.api_key.clone(),
        concurrency: vec![BENCH_CONCURRENCY],
        requests: BENCH_REQUESTS,
        input_len: BENCH_INPUT_LEN,
        output_len: BENCH_OUTPUT_LEN,
        prompt_form: PromptForm::Text,
        gate: Some(GateReference::Stored),
        logprob_tolerance: DEFAULT_LOGPROB_TOLERANCE,
        load: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::fit::{LayoutFigures, LayoutOutcome};

    fn layout(tp: u32, pp: u32, dp: u32, fits: bool) -> Layout {
        let outcome = match fits {
            true => LayoutOutcome::Fits(LayoutFigures {
                nodes: Vec::new(),
                context_tokens: 4096,
                limited_by: "the model".into(),
                cache: None,
            }),
            false => LayoutOutcome::Breaks { rules: Vec::new(), needs_bytes: None },
        };
        Layout { tp, pp, dp, expert_parallel: dp > 1, outcome }
    }

    #[test]
    fn the_head_alone_first_then_each_layout_that_fits_by_its_split() {
        let nodes = crate::cluster::testing::nodes(&["node1", "node2"]);
        let cluster = crate::cluster::testing::as_nodes(&nodes);
        let both = vec!["node1".to_string(), "node2".to_string()];
        // vLLM's: several layouts, each asked by its split; one that breaks a rule, or needs data
        // parallel, is not tried.
        let layouts = [layout(2, 1, 1, true), layout(1, 2, 1, true), layout(2, 1, 1, false), layout(1, 1, 2, true)];
        let tried = candidates(&cluster, &layouts, true);
        let expected = [
            Candidate { on: vec!["node1".into()], tp: None, pp: None },
            Candidate { on: both.clone(), tp: Some(2), pp: Some(1) },
            Candidate { on: both.clone(), tp: Some(1), pp: Some(2) },
        ];
        assert_eq!(tried, expected);
        // llama.cpp's: one layout, which its own plan chooses; the head alone only when it holds it.
        let tried = candidates(&cluster, &[layout(1, 2, 1, true)], false);
        assert_eq!(tried, [Candidate { on: both, tp: None, pp: None }]);
        assert_eq!(candidates(&cluster[..1], &[layout(1, 1, 1, true)], true).len(), 1, "one node is tried once");
    }
}
