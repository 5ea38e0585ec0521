//! The plan carried out: its steps in order, each step's commands started at once on their nodes
//! (each with the record of what it serves, and its secrets by stdin), and its proofs before the
//! next step.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use futures_util::future::join_all;

use super::proof::{link_use, prove, Proving};
use super::request::{LaunchReport, LaunchRequest};
use crate::cluster::interrupt::Interrupt;
use crate::error::{Error, MultiError, Result};
use crate::model::gguf_pick::GgufPick;
use crate::model::source::ModelSource;
use crate::node::{Node, NodeCalls};
use crate::reporter::Reporter;
use crate::secret::Secret;
use crate::serving::compile_cache::CompileCache;
use crate::serving::fit::Planned;
use crate::serving::plan::{NodePlan, PlannedCommand, StartKind};
use crate::serving::process::ProcessStart;
use crate::serving::ray::{RayStart, AUTH_TOKEN};
use crate::serving::record::{recorded_env, ServingRecord};
use crate::spec::Transport;

/// What the records of a launch keep beside its plan.
pub(super) struct Recording<'a> {
    /// Where the router of the endpoint listens.
    pub router_listen: SocketAddr,
    /// The GPU memory planned on each of the service's nodes (None: no plan figure).
    pub memory: &'a [Option<u64>],
    /// What the plan put on each of the service's nodes (empty: no plan).
    pub planned: &'a [Option<Planned>],
    pub transport: &'a Transport,
}

/// The plan's steps in order, each proven before the next; the name the engine serves under,
/// and what the proofs found wrong without failing.
pub(super) async fn carry_out(
    nodes: &[&dyn Node],
    request: &LaunchRequest,
    plan: &LaunchReport,
    recording: &Recording<'_>,
    interrupt: &Interrupt,
    reporter: &dyn Reporter,
) -> Result<(String, Vec<String>)> {
    let transport = recording.transport;
    // The endpoint's key is the router's: the engine gets none.
    let mut secrets: BTreeMap<String, Secret> = BTreeMap::new();
    if let Some(token) = &request.hf_token {
        secrets.insert("HF_TOKEN".into(), token.clone());
    }
    if plan.backend.runs_ray() {
        secrets.insert(AUTH_TOKEN.into(), Secret::random()?);
    }
    let started = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let identity = plan.identity();
    // A Hub GGUF's identity is its file: the commit it came at is kept beside, for a relaunch.
    let gguf_commit = match &request.source {
        ModelSource::HubGguf { .. } => plan.hub_model.as_ref().and_then(|hub| Some(hub.commit.as_ref()?.to_string())),
        _ => None,
    };
    let mut proving = Proving {
        nodes,
        service: &plan.service,
        engine: plan.engine,
        planned: &plan.nodes,
        probe: plan.upstream,
        api_key: None,
        timeout: request.timeout,
        interrupt,
        reporter,
        served: plan.served.clone(),
        transport: transport.clone(),
        warnings: Vec::new(),
    };
    for step in &plan.steps {
        let starts = step.starts.iter().map(|(node, command)| {
            let launched = &plan.nodes[*node];
            let command = &launched.commands[*command];
            reporter.step_started(&launched.node, &describe(command, launched));
            let mut record = ServingRecord::new(
                &plan.service,
                &request.toolbox,
                &request.model,
                &plan.served,
                plan.engine,
                plan.backend,
                launched.role,
                plan.nodes.len(),
                plan.upstream.port(),
                launched.link_ip,
                plan.nodes[0].link_ip,
                &plan.endpoint,
            );
            record.on = plan.on.clone();
            record.router_listen = Some(recording.router_listen);
            record.memory_bytes = recording.memory.get(*node).copied().flatten();
            record.planned = recording.planned.get(*node).cloned().flatten();
            record.tp = plan.tp;
            record.pp = plan.pp;
            record.transport = (plan.nodes.len() > 1).then(|| transport.clone());
            record.api_key = plan.api_key;
            record.started = started.clone();
            record.identity = identity.clone();
            record.gguf_commit = gguf_commit.clone();
            record.extra = request.extra.clone();
            record.env = recorded_env(&request.env);
            record.cuda_graphs = request.cuda_graphs;
            record.keep_free_gib = request.keep_free_gib;
            record.file = match &request.source {
                ModelSource::HubGguf { pick: GgufPick::File(name), .. } => Some(name.clone()),
                _ => None,
            };
            start(nodes[*node], request, command, record, &secrets)
        });
        let mut failed = MultiError::new("the launch could not start everything");
        for ((node, _), result) in step.starts.iter().zip(join_all(starts).await) {
            if let Err(error) = result {
                failed.push(nodes[*node].name(), error);
            }
        }
        if !failed.is_empty() {
            return Err(failed.into());
        }
        proving.stopped("the start")?;
        for proof in &step.proofs {
            prove(&mut proving, proof).await?;
        }
    }
    link_use(&mut proving).await;
    Ok((proving.served, proving.warnings))
}

/// One planned command, started on its node through the call its kind takes.
async fn start(
    node: &dyn Node,
    request: &LaunchRequest,
    command: &PlannedCommand,
    record: ServingRecord,
    secrets: &BTreeMap<String, Secret>,
) -> Result<()> {
    let erase = if request.fresh_compile_cache { CompileCache::Erase } else { CompileCache::Keep };
    let compile_cache = command.uses_compile_cache.then_some(erase);
    match &command.start {
        StartKind::Ray { role } => {
            let token =
                secrets.get(AUTH_TOKEN).cloned().ok_or_else(|| Error::Internal("Ray without its token".into()))?;
            let call = RayStart {
                toolbox: request.toolbox.clone(),
                role: role.clone(),
                env: command.env.clone(),
                token,
                compile_cache,
                record,
            };
            node.call(call).await.map(drop)
        }
        StartKind::Process { name, listens } => {
            let call = ProcessStart {
                toolbox: request.toolbox.clone(),
                name: name.clone(),
                argv: command.argv.clone(),
                env: command.env.clone(),
                secrets: command.secret_env.iter().filter_map(|n| Some((n.clone(), secrets.get(n)?.clone()))).collect(),
                listens: *listens,
                compile_cache,
                record,
            };
            node.call(call).await.map(drop)
        }
    }
}

/// What the progress says a command does.
fn describe(command: &PlannedCommand, node: &NodePlan) -> String {
    match &command.start {
        StartKind::Ray { role: crate::serving::ray::RayRole::Head } => {
            format!("starting Ray's head on {}", node.link_ip)
        }
        StartKind::Ray { .. } => format!("starting a Ray worker on {}", node.link_ip),
        StartKind::Process { listens: Some(address), .. } => format!("starting {} on {address}", command.argv[0]),
        StartKind::Process { .. } => command.argv.iter().take(3).cloned().collect::<Vec<_>>().join(" "),
    }
}
