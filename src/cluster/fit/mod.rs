//! `cluster plan MODEL` (and `plan MODEL` on one node), and the launch's first step: the model's
//! shape read on the head (a node call: its own files, or the Hub over its uplink, the token in the
//! call), each node's memory from its GPU facts (`detect`: the GTT, what is in use, the reserve
//! kept back), and, when the engine's plan depends on it, whether the head's server has a GPU of
//! its own (asked of its toolbox, which this starts when it is stopped). All asked at once; the
//! plan is then the engine's pure function of what they returned (`ServingEngine::fit`).

mod request;

use futures_util::future::join_all;

use crate::error::{Error, MultiError, Result};
use crate::host::gpu::GpuFacts;
use crate::model::shape::ask::ShapeAsk;
use crate::model::shape::Sizing;
use crate::node::call::{Detect, Exec};
use crate::node::{Node, NodeCalls};
use crate::serving::fit::{FitNodes, NodeMemory};
pub use request::{FitReport, FitRequest};

/// The plan of `request.model` on `nodes` (the head first).
pub async fn fit_model(nodes: &[&dyn Node], request: &FitRequest) -> Result<FitReport> {
    let engine = request.engine;
    let Some(head) = nodes.first() else {
        return Err(Error::Usage("no nodes to plan for. Fix: give --nodes or a cluster file".into()));
    };
    let mut asked = request.asked.clone();
    if let Some(split) = engine.parallelism_asked(request.tp, request.pp, nodes.len())? {
        asked.tp = u32::try_from(split.tp).ok();
        asked.pp = u32::try_from(split.pp).ok();
    }
    let shape = ShapeAsk {
        source: engine.shape_source(&request.source, request.revision.as_deref())?,
        hub_env: request.hub_env.clone(),
        hf_token: request.hf_token.clone(),
    };
    let devices = async {
        let argv = engine.devices_question().filter(|_| request.ask_devices)?;
        let ask = Exec { toolbox: request.toolbox.clone(), argv: argv.iter().map(|a| a.to_string()).collect() };
        Some(head.call(ask).await)
    };
    let detects = join_all(nodes.iter().map(|node| node.call(Detect {})));
    let (read, detects, devices) = tokio::join!(head.call(shape), detects, devices);
    let read = read?;

    let mut problems = MultiError::new("nothing was planned");
    let mut memory = Vec::new();
    let mut transport = None;
    for (node, detect) in nodes.iter().zip(detects) {
        match detect.and_then(|detect| {
            transport.get_or_insert(detect.transport.clone());
            let in_use = detect.gpu.gtt_used_bytes.filter(|_| request.count_in_use);
            NodeMemory::of(node.name(), &GpuFacts { gtt_used_bytes: in_use, ..detect.gpu }, request.reserve_gib)
        }) {
            Ok(found) => memory.push(found),
            Err(error) => problems.push(node.name(), error),
        }
    }
    if !problems.is_empty() {
        return Err(problems.into());
    }
    let mut notes = Vec::new();
    if engine.devices_question().is_some() && !request.ask_devices {
        notes.push(format!(
            "the head's {} was not asked which GPUs it sees (a dry run starts no toolbox): its own GPU is assumed",
            engine.title()
        ));
    }
    let head_gpu = match devices {
        None => None,
        Some(Ok(said)) if said.success() => engine.head_gpu(&said.stdout),
        Some(Ok(said)) => {
            notes.push(format!(
                "the head's {} could not say which GPUs it sees ({}): its own GPU is assumed",
                engine.title(),
                said.last_lines(1).join(" ")
            ));
            None
        }
        Some(Err(error)) => {
            notes.push(format!(
                "the head's toolbox {} was not asked which GPUs its {} sees ({error}): its own GPU is assumed",
                request.toolbox,
                engine.title()
            ));
            None
        }
    };
    let (plan, cannot_size) = match &read.sizing {
        Sizing::Sized(shape) => {
            let nodes = FitNodes { memory, transport: transport.unwrap_or_default(), head_gpu };
            (Some(engine.fit(shape, &nodes, &asked)?), None)
        }
        Sizing::CannotSize { architecture, why } => (None, Some(format!("{architecture}: {why}"))),
    };
    Ok(FitReport { engine, model: request.model.clone(), read, head_gpu, plan, cannot_size, notes })
}

#[cfg(test)]
mod tests;
