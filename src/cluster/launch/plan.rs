//! The engine's plan for these nodes, as the launch reports it (`--dry-run` prints it), with no
//! effect: what every node's check found (its address, programs, and the free ports the service
//! takes), the model's cache and identity, the name the engine serves it as, and the secrets each
//! command gets by name.

use std::net::{Ipv4Addr, SocketAddr};

use super::pinned::without_asked_revision;
use super::request::{HubModel, LaunchReport, LaunchRequest};
use crate::cluster::hub_gguf::HeadGguf;
use crate::cluster::model::CachedEverywhere;
use crate::error::{Error, Result};
use crate::model::identity::ModelIdentity;
use crate::model::repo_id::RepoId;
use crate::model::source::ModelSource;
use crate::node::Node;
use crate::serving::engine::Backend;
use crate::serving::engine_args::EngineArgs;
use crate::serving::parallelism::Parallelism;
use crate::serving::plan::{LaunchPlan, NodeForPlan, PlanRequest};
use crate::serving::ports::ENGINE_PORTS_FROM;
use crate::serving::ray::AUTH_TOKEN;
use crate::serving::state::ServeCheckReport;

/// What the launch found before its engine's plan: every service node's check, the model in the
/// caches or on the head, and the flags the model-aware plan gives the engine.
pub(super) struct Facts<'a> {
    pub checks: &'a [&'a ServeCheckReport],
    pub hub_model: Option<&'a (RepoId, Option<CachedEverywhere>)>,
    pub gguf: Option<&'a HeadGguf>,
    /// The model-aware plan's flags, those the operator did not give: before the operator's own.
    pub planned_args: Vec<String>,
}

/// The engine's plan for the service's `nodes` (its head first, each with its check), as the
/// launch reports it, with no effect; `endpoint` is the router's.
pub(super) fn plan(
    nodes: &[&dyn Node],
    facts: &Facts,
    request: &LaunchRequest,
    backend: Backend,
    split: Parallelism,
    endpoint: String,
) -> Result<LaunchReport> {
    let Facts { checks, hub_model, gguf, .. } = *facts;
    let cached = hub_model.and_then(|(_, cached)| cached.as_ref());
    let engine_port = checks[0].free_ports.first().copied().unwrap_or(ENGINE_PORTS_FROM);
    let node_facts: Vec<NodeForPlan> = nodes
        .iter()
        .zip(checks)
        .enumerate()
        .map(|(index, (node, check))| NodeForPlan {
            node: node.name().to_string(),
            link_ip: check.cluster_link.address().unwrap_or(Ipv4Addr::LOCALHOST),
            transport: check.cluster_link.transport.clone(),
            hub_cache: cached.and_then(|c| c.caches.get(index).cloned()),
            programs: check.programs.clone(),
            listen_port: check.free_ports.get(1).copied().unwrap_or_else(|| request.engine.profile().node_port),
        })
        .collect();
    let served = request.service.to_string();
    let mut extra = facts.planned_args.clone();
    extra.extend(without_asked_revision(request, named_extra(request)?).into_words());
    // The endpoint's key is the router's: the engines, on the link or the loopback, get none.
    let mut secrets = Vec::new();
    if request.hf_token.is_some() {
        secrets.push("HF_TOKEN".to_string());
    }
    if backend.runs_ray() {
        secrets.push(AUTH_TOKEN.to_string());
    }
    let asked = PlanRequest {
        // A Hub GGUF is read from the head's cache; anything else as given.
        model: gguf.map_or_else(|| request.model.clone(), |gguf| gguf.path.clone()),
        served: served.clone(),
        split: split.clone(),
        host: node_facts[0].link_ip.to_string(),
        port: engine_port,
        extra: EngineArgs::new(extra),
        hub_commit: cached.map(|c| c.commit.to_string()),
        env: request.env.clone(),
        secrets,
        image_flags: checks[0].flags.clone(),
        cuda_graphs: request.cuda_graphs,
    };
    let LaunchPlan { engine, backend, nodes: planned, steps, notes } =
        request.engine.plan(&node_facts, &asked, backend);
    Ok(LaunchReport {
        service: request.service.to_string(),
        engine,
        backend,
        model: request.model.clone(),
        served,
        endpoint,
        upstream: SocketAddr::from((node_facts[0].link_ip, engine_port)),
        tp: Some(split.tp),
        pp: Some(split.pp),
        on: nodes.iter().map(|node| node.name().to_string()).collect(),
        why: notes,
        warnings: Vec::new(),
        nodes: planned,
        steps,
        dry_run: request.dry_run,
        api_key: request.api_key.is_some(),
        replaced: false,
        router_started: false,
        seconds_to_serve: None,
        fit: None,
        measured: Vec::new(),
        hub_model: match (hub_model, gguf, &request.source) {
            (Some((repo, found)), _, _) => Some(HubModel {
                repo: repo.clone(),
                commit: found.as_ref().map(|c| c.commit.clone()),
                pulled: found.as_ref().and_then(|c| c.pull.clone()),
            }),
            (None, Some(gguf), _) => Some(HubModel {
                repo: gguf.repo.clone(),
                commit: Some(gguf.pull.commit.clone()),
                pulled: Some(gguf.pull.clone()),
            }),
            // A dry run: the head would pull it first.
            (None, None, ModelSource::HubGguf { repo, .. }) => {
                Some(HubModel { repo: repo.clone(), commit: None, pulled: None })
            }
            (None, None, _) => None,
        },
        gguf: gguf.map(|gguf| gguf.identity.clone()).or_else(|| {
            checks[0].sha256.clone().map(|sha256| ModelIdentity::Gguf {
                name: std::path::Path::new(&request.model)
                    .file_name()
                    .map_or_else(|| request.model.clone(), |name| name.to_string_lossy().into_owned()),
                sha256,
            })
        }),
        on_demand: None,
    })
}

/// The engine's arguments, asking it to serve the model as the service's name: its naming flag
/// added when the operator gave none and the engine would call it otherwise. A naming flag that
/// says another name than `--name` is refused (the router and the engine must agree).
fn named_extra(request: &LaunchRequest) -> Result<EngineArgs> {
    let engine = request.engine;
    let name = request.service.as_str();
    let name_flag = engine.profile().name_flag;
    match request.extra.given(name_flag) {
        Some((_, value)) if value == name => Ok(request.extra.clone()),
        Some((flag, value)) => Err(Error::Usage(format!(
            "the engine's `{flag} {value}` names the service otherwise than `--name {name}`: the router sends \
             requests for {name} to an engine that must answer to it. Fix: give one name (`--name {value}`, or \
             drop `{flag}`)"
        ))),
        None if engine.served_name(&request.model, &request.extra) == name => Ok(request.extra.clone()),
        None => Ok(request.extra.clone().with(name_flag, name)),
    }
}
