//! The launch plans first (`cluster::fit`): the model's shape read on the service's head, every
//! node's memory, then the engine's plan. A model that fits no layout is refused before anything
//! starts, with the numbers and the fix; a layout asked for (`--tp`/`--pp`) that the model does
//! not allow is refused naming its rule. A model that cannot be read where its engine reads it (a
//! path its toolbox does not see, a damaged header, a Hub that refuses it) is refused at once: its
//! engine could not load it either, and a launch without a plan would spread it over every node
//! unsized. A model the plan cannot size (hybrid or linear attention, an unknown architecture,
//! headers past the plan's byte budget) goes on as before, with a warning; so does a dry run whose
//! toolbox is stopped (it starts none to read the model in).
//! What the plan chose reaches the launch: the split, the engine's flags (the operator's own
//! win), and what each node holds, for its record and for another service onto it.

use super::pinned::pinned_commit;
use super::request::LaunchRequest;
use crate::cluster::fit::{fit_model, FitRequest, NoFit};
use crate::error::{Error, Result};
use crate::node::Node;
use crate::serving::engine_args::REVISION;
use crate::serving::fit::memory::DEFAULT_RESERVE_GIB;
use crate::serving::fit::{Fit, Planned};
use crate::serving::parallelism::Parallelism;
use crate::serving::room::Room;

/// What the plan gives the launch.
#[derive(Debug, Clone)]
pub(super) struct Fitted {
    pub fit: Fit,
    /// The split the plan chose (None: the engine splits as it always does).
    pub split: Option<Parallelism>,
    /// The plan's flags for the engine, those the operator did not give.
    pub args: Vec<String>,
    /// Per service node, in its order: what the plan puts there (None: nothing, a head whose
    /// server has no GPU of its own).
    pub planned: Vec<Option<Planned>>,
    /// Per service node: the GPU memory the service takes there against what the node has.
    pub memory: Vec<Option<Room>>,
}

/// A plan, or why the launch goes on without one.
#[derive(Debug, Clone)]
pub(super) enum PlanFirst {
    Planned(Box<Fitted>),
    /// The warning the launch gives.
    Unplanned(String),
}

/// The plan for the service's `nodes` (its head first), or why there is none; an error when the
/// model cannot serve on them.
pub(super) async fn plan_first(nodes: &[&dyn Node], request: &LaunchRequest) -> Result<PlanFirst> {
    let engine = request.engine;
    let asked = FitRequest {
        engine,
        model: request.model.clone(),
        source: request.source.clone(),
        toolbox: request.toolbox.clone(),
        // A relaunch's model is read at the commit it served.
        revision: pinned_commit(request)
            .map(String::from)
            .or_else(|| request.extra.value(REVISION).map(str::to_string)),
        tp: request.tp,
        pp: request.pp,
        asked: engine.fit_asked(&request.extra, &request.env)?,
        reserve_gib: DEFAULT_RESERVE_GIB,
        keep_free_gib: request.keep_free_gib,
        hf_token: request.hf_token.clone(),
        hub_env: request.hub_env.clone(),
        // A dry run starts no toolbox to ask it which GPUs its server sees.
        ask_devices: !request.dry_run,
        count_in_use: request.on_demand.is_none(),
    };
    let report = match fit_model(nodes, &asked).await {
        Ok(report) => report,
        // What the operator asked that the engine would refuse (a cache dtype, a partition).
        Err(NoFit::Failed(error @ Error::Usage(_))) => return Err(error),
        Err(NoFit::Unread(error)) if !request.dry_run => {
            return Err(error.context(format!(
                "{} cannot be planned, so it is not launched (nothing was started): its model cannot be read where {} \
                 reads it",
                request.model,
                engine.profile().title
            )));
        }
        Err(NoFit::Unread(error)) => {
            let why = format!(
                "{} was not read ({error}): the dry run goes on without a plan; a launch refuses a model it cannot read",
                request.model
            );
            return Ok(PlanFirst::Unplanned(why));
        }
        Err(NoFit::Failed(error)) => {
            let why = format!("{} could not be planned ({error}): the launch goes on without a plan", request.model);
            return Ok(PlanFirst::Unplanned(why));
        }
    };
    let Some(fit) = report.fit else {
        let why = report.cannot_size.unwrap_or_default();
        return Ok(PlanFirst::Unplanned(format!(
            "{} cannot be sized honestly ({why}): the launch goes on without a plan, the engine deciding its own memory",
            request.model
        )));
    };
    if let Some(refusal) = &fit.refusal {
        let message = format!("{}; nothing was started", refusal.message);
        return Err(if refusal.asked_against_the_model() {
            Error::Usage(format!("{message}. Fix: {}", refusal.fix))
        } else {
            Error::Host { what: "the GPU memory".into(), message, fix: Some(refusal.fix.clone()) }
        });
    }
    let loads = Planned::of(&fit);
    let planned: Vec<Option<Planned>> =
        nodes.iter().map(|node| loads.iter().find(|load| load.node == node.name()).cloned()).collect();
    let memory = planned
        .iter()
        .zip(nodes)
        .map(|(load, node)| {
            let load = load.as_ref()?;
            let has = fit.nodes.iter().find(|memory| memory.node == node.name())?;
            Some(Room {
                planned: load.weights_bytes.saturating_add(load.kv_cache_bytes).saturating_add(fit.runtime_bytes),
                usable: has.gtt_bytes.saturating_sub(has.reserve_bytes),
            })
        })
        .collect();
    Ok(PlanFirst::Planned(Box::new(Fitted {
        split: engine.planned_split(&fit),
        args: engine.planned_args(&fit, &request.extra),
        planned,
        memory,
        fit,
    })))
}
