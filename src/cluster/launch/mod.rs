//! `cluster launch MODEL` (and `launch MODEL` on one node): the cluster serves one model at one
//! OpenAI-compatible endpoint, with any engine. The discipline is the same for every engine and
//! lives here: every node is checked before anything starts (reachable, the toolbox and what its
//! role needs in it, the same image everywhere, an address on the cluster link, the model's files
//! where they will be read, nothing serving already); the model comes from the Hub once when a
//! node lacks it; then the engine's plan (`serving::plan`) is carried out step by step, each
//! step's commands at once and its proofs before the next (`proof`); and any failure, or
//! Ctrl-C, stops everything the launch started on every node. What differs per engine (the
//! commands, what proves the workers joined, what the record holds) is the engine's plan.

mod carry_out;
mod checks;
mod model;
mod plan;
mod proof;
mod request;

use std::time::Instant;

use crate::cluster::interrupt::Interrupt;
use crate::cluster::stop::stop_serving;
use crate::error::{Error, Result};
use crate::node::Node;
use crate::reporter::Reporter;
pub use request::{LaunchReport, LaunchRequest};

/// Launch on `nodes` (the first is the head). A failure or a signal stops what was started.
pub async fn launch(nodes: &[&dyn Node], request: &LaunchRequest, reporter: &dyn Reporter) -> Result<LaunchReport> {
    let engine = request.engine;
    let backends = engine.backends(request.backend, nodes.len())?;
    let asked = engine.parallelism_asked(request.tp, request.pp, nodes.len())?;
    // Both only look: asked together, they cost one round trip.
    let (checks, model) =
        tokio::join!(checks::check_every_node(nodes, request, &backends), model::look_up_model(nodes, request));
    let ((checks, backend, mut why), model) = (checks?, model?);
    checks::refuse_when_serving(nodes, request, &checks)?;
    let split = asked.unwrap_or_else(|| {
        let chosen = engine.parallelism(nodes.len(), &checks[0].cluster_link.transport);
        if nodes.len() > 1 {
            why.push(chosen.why.clone());
        }
        chosen
    });
    let hub = model::model_in_every_cache(nodes, request, model, reporter).await?;
    let gguf = model::gguf_on_the_head(nodes, request, reporter).await?;
    let mut report = plan::plan(nodes, &checks, request, backend, split, hub.as_ref(), gguf.as_ref())?;
    report.why = why;
    if request.dry_run {
        return Ok(report.shown());
    }
    for reason in &report.why {
        reporter.step_finished(nodes[0].name(), reason);
    }
    if checks.iter().any(|c| c.serving.as_ref().is_some_and(|s| s.active())) {
        reporter.step_started(nodes[0].name(), "stopping what serves now (--replace)");
        stop_serving(nodes, &request.toolbox).await.into_result()?;
        report.replaced = true;
    }

    let interrupt = Interrupt::watch();
    let started = Instant::now();
    let link = &checks[0].cluster_link.transport;
    let outcome = carry_out::carry_out(nodes, request, &report, link, &interrupt, reporter).await;
    reporter.finish();
    match outcome {
        Ok((served, warnings)) => {
            report.served = served;
            report.warnings = warnings;
            report.seconds_to_serve = Some(started.elapsed().as_secs_f64());
            Ok(report.shown())
        }
        Err(error) => {
            reporter.warning("the launch failed: stopping what it started on every node");
            let cleanup = stop_serving(nodes, &request.toolbox).await;
            let stopped = cleanup.failed().is_empty();
            let outcome = cleanup.summary("Everything this launch started was stopped");
            Err(match error {
                Error::Interrupted { .. } if stopped => error,
                Error::Nodes(failed) => failed.with_outcome(outcome).into(),
                other => other.context(outcome),
            })
        }
    }
}
