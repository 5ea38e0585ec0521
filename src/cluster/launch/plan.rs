//! The engine's plan for these nodes, as the launch reports it (`--dry-run` prints it), with no
//! effect: what every node's check found, the model's cache and identity, and the secrets each
//! command gets by name.

use std::net::Ipv4Addr;

use super::request::{HubModel, LaunchReport, LaunchRequest};
use crate::cluster::hub_gguf::HeadGguf;
use crate::cluster::model::CachedEverywhere;
use crate::error::Result;
use crate::model::identity::ModelIdentity;
use crate::model::repo_id::RepoId;
use crate::node::Node;
use crate::serving::engine::Backend;
use crate::serving::model_source::ModelSource;
use crate::serving::parallelism::Parallelism;
use crate::serving::plan::{LaunchPlan, NodeFacts, PlanRequest};
use crate::serving::ray::AUTH_TOKEN;
use crate::serving::record::ServingRecord;
use crate::serving::state::ServeCheckReport;

/// The engine's plan for these nodes, as the launch reports it, with no effect.
pub(super) fn plan(
    nodes: &[&dyn Node],
    checks: &[ServeCheckReport],
    request: &LaunchRequest,
    backend: Backend,
    split: Parallelism,
    hub_model: Option<&(RepoId, Option<CachedEverywhere>)>,
    gguf: Option<&HeadGguf>,
) -> Result<LaunchReport> {
    let cached = hub_model.and_then(|(_, cached)| cached.as_ref());
    let facts: Vec<NodeFacts> = nodes
        .iter()
        .zip(checks)
        .enumerate()
        .map(|(index, (node, check))| NodeFacts {
            node: node.name().to_string(),
            link_ip: check.cluster_link.address().unwrap_or(Ipv4Addr::LOCALHOST),
            transport: check.cluster_link.transport.clone(),
            hub_cache: cached.map(|c| c.caches[index].clone()),
            programs: check.programs.clone(),
        })
        .collect();
    let served = request.engine.served_name(&request.model, &request.extra);
    let mut secrets = Vec::new();
    if request.hf_token.is_some() {
        secrets.push("HF_TOKEN".to_string());
    }
    if request.api_key.is_some() {
        secrets.push(request.engine.api_key_env().to_string());
    }
    if backend.runs_ray() {
        secrets.push(AUTH_TOKEN.to_string());
    }
    let asked = PlanRequest {
        // A Hub GGUF is read from the head's cache; anything else as given.
        model: gguf.map_or_else(|| request.model.clone(), |gguf| gguf.path.clone()),
        served: served.clone(),
        split: split.clone(),
        host: request.host.unwrap_or(Ipv4Addr::UNSPECIFIED).to_string(),
        port: request.port,
        extra: request.extra.clone(),
        hub_commit: cached.map(|c| c.commit.to_string()),
        env: request.env.clone(),
        secrets,
    };
    let LaunchPlan { engine, backend, nodes: planned, steps } = request.engine.plan(&facts, &asked, backend);
    let probe = request.host.filter(|host| !host.is_unspecified()).unwrap_or(facts[0].link_ip);
    Ok(LaunchReport {
        engine,
        backend,
        model: request.model.clone(),
        served,
        endpoint: ServingRecord::endpoint_of(probe, request.port),
        tp: Some(split.tp),
        pp: Some(split.pp),
        why: Vec::new(),
        warnings: Vec::new(),
        nodes: planned,
        steps,
        dry_run: request.dry_run,
        api_key: request.api_key.is_some(),
        replaced: false,
        seconds_to_serve: None,
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
    })
}
