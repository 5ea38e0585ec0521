//! `cluster plan MODEL` (and `plan MODEL` on one node), and the launch's first step: the model's
//! shape read on the head (a node call: a path inside the engine's toolbox there, or the Hub over
//! its uplink, the token in the call), each node's memory from its GPU facts (`detect`: the GTT,
//! what is in use, the reserve kept back), which build of the engine the head's toolbox holds (its
//! image's labels, from the head's `status`), and, when the engine's plan depends on it, what the
//! head's server is (its build and whether it has a GPU of its own, asked of its toolbox, which
//! this starts when it is stopped). All asked at once; the plan is then the engine's pure function
//! of what they returned (`ServingEngine::fit`).
//!
//! The model is read where its engine reads it: a path inside the engine's toolbox on the head
//! (`model::shape::ask`). A model that cannot be read there is [`NoFit::Unread`]: the launch
//! refuses it, since its engine could not load it either.

mod request;

use futures_util::future::join_all;

use crate::error::{Error, MultiError, Result};
use crate::host::gpu::GpuFacts;
use crate::labels;
use crate::model::shape::ask::ShapeAsk;
use crate::model::shape::Sizing;
use crate::node::call::{Detect, Exec, StatusCall};
use crate::node::{Node, NodeCalls};
use crate::ops::status::StatusReport;
use crate::serving::fit::vllm_build::HeadImage;
use crate::serving::fit::{FitNodes, NodeMemory};
pub use request::{FitReport, FitRequest};

/// Why no plan was made.
#[derive(Debug)]
pub enum NoFit {
    /// The model could not be read where its engine reads it (not there, damaged, the Hub
    /// refused it): its engine could not load it either.
    Unread(Error),
    /// Another of the plan's questions failed (a node's memory, the layout asked).
    Failed(Error),
}

impl From<Error> for NoFit {
    fn from(error: Error) -> NoFit {
        NoFit::Failed(error)
    }
}

impl From<NoFit> for Error {
    fn from(no_plan: NoFit) -> Error {
        match no_plan {
            NoFit::Unread(error) | NoFit::Failed(error) => error,
        }
    }
}

/// The plan of `request.model` on `nodes` (the head first).
pub async fn fit_model(nodes: &[&dyn Node], request: &FitRequest) -> std::result::Result<FitReport, NoFit> {
    let engine = request.engine;
    let Some(head) = nodes.first() else {
        return Err(Error::Usage("no nodes to plan for. Fix: give --nodes or a cluster file".into()).into());
    };
    let mut asked = request.asked.clone();
    if let Some(split) = engine.parallelism_asked(request.tp, request.pp, nodes.len())? {
        asked.tp = u32::try_from(split.tp).ok();
        asked.pp = u32::try_from(split.pp).ok();
    }
    let shape = ShapeAsk {
        source: request.source.clone(),
        format: engine.profile().model_format,
        revision: request.revision.clone(),
        toolbox: request.toolbox.clone(),
        start_toolbox: request.ask_devices,
        hub_env: request.hub_env.clone(),
        hf_token: request.hf_token.clone(),
    };
    let devices = async {
        let argv = engine.profile().head_question.filter(|_| request.ask_devices)?;
        let ask = Exec { toolbox: request.toolbox.clone(), argv: argv.iter().map(|a| a.to_string()).collect() };
        Some(head.call(ask).await)
    };
    let detects = join_all(nodes.iter().map(|node| node.call(Detect {})));
    let (read, detects, devices, status) = tokio::join!(head.call(shape), detects, devices, head.call(StatusCall {}));
    let read = read.map_err(NoFit::Unread)?;
    let image = head_image(status, &request.toolbox);

    let mut problems = MultiError::new("nothing was planned");
    let mut memory = Vec::new();
    let mut transport = None;
    for (node, detect) in nodes.iter().zip(detects) {
        match detect.and_then(|detect| {
            transport.get_or_insert(detect.transport.clone());
            let in_use = detect.gpu.gtt_used_bytes.filter(|_| request.count_in_use);
            let gpu = GpuFacts { gtt_used_bytes: in_use, ..detect.gpu };
            NodeMemory::of(node.name(), &gpu, request.reserve_gib, request.keep_free_gib)
        }) {
            Ok(found) => memory.push(found),
            Err(error) => problems.push(node.name(), error),
        }
    }
    if !problems.is_empty() {
        return Err(Error::from(problems).into());
    }
    let mut notes = Vec::new();
    if engine.profile().head_question.is_some() && !request.ask_devices {
        notes.push(format!(
            "the head's {} was not asked which GPUs it sees (a dry run starts no toolbox): its own GPU is assumed",
            engine.profile().title
        ));
    }
    let mut head_said = None;
    let head_gpu = match devices {
        None => None,
        Some(Ok(said)) => {
            let gpu = if said.success() { engine.head_gpu(&said.stdout) } else { None };
            if gpu.is_none() {
                notes.push(format!(
                    "the head's {} could not say which GPUs it sees ({}): its own GPU is assumed",
                    engine.profile().title,
                    said.last_lines(1).join(" ")
                ));
            }
            head_said = said.success().then_some(said.stdout);
            gpu
        }
        Some(Err(error)) => {
            notes.push(format!(
                "the head's toolbox {} was not asked which GPUs its {} sees ({error}): its own GPU is assumed",
                request.toolbox,
                engine.profile().title
            ));
            None
        }
    };
    let (fit, cannot_size) = match &read.sizing {
        Sizing::Sized(shape) => {
            let nodes = FitNodes { memory, transport: transport.unwrap_or_default(), head_gpu, head_said, image };
            (Some(engine.fit(shape, &nodes, &asked)?), None)
        }
        Sizing::CannotSize { architecture, why } => (None, Some(format!("{architecture}: {why}"))),
    };
    Ok(FitReport { engine, model: request.model.clone(), read, head_gpu, fit, cannot_size, notes })
}

/// What the image of the head's toolbox `toolbox` says of its engine, from the head's `status`.
fn head_image(status: Result<StatusReport>, toolbox: &str) -> HeadImage {
    let status = match status {
        Ok(status) => status,
        Err(error) => {
            return HeadImage { vllm: None, why: format!("the head's toolboxes could not be listed ({error})") }
        }
    };
    match status.toolboxes.into_iter().find(|found| found.name == toolbox) {
        Some(found) if found.vllm.is_some() => HeadImage { vllm: found.vllm, why: String::new() },
        Some(_) => HeadImage {
            vllm: None,
            why: format!("the image of the head's toolbox {toolbox} has no {} label", labels::VLLM_VERSION),
        },
        None => HeadImage { vllm: None, why: format!("the head has no toolbox {toolbox} to ask") },
    }
}

#[cfg(test)]
mod tests;
