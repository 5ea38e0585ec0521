//! Every node checked before anything starts: reachable, and what every service there is; on the
//! service's nodes, its toolbox made for the engine with the programs its role needs, the model's
//! files where they will be read, the same image everywhere, an address on the cluster link, and
//! the ports the service would take. Then the refusals, all before anything starts: the same name
//! serving already (unless `--replace`), another service on one of its nodes whose memory it is
//! not known to fit beside ([`super::beside`]), a second Ray-backed service on a node.

use futures_util::future::join_all;

use super::request::LaunchRequest;
use crate::error::{Error, MultiError, Result};
use crate::node::{Node, NodeCalls};
use crate::serving::engine::Backend;
use crate::serving::ports::ENGINE_PORTS_FROM;
use crate::serving::record::ServingRecord;
use crate::serving::state::{ServeCheck, ServeCheckReport};

/// Every node's check: the service's (`on`, indices into `cluster`, its head first) as the launch
/// needs them, the cluster's others for what they serve; `keep` is the endpoint's port, kept on
/// the cluster's head for the router. Refused on the first problem anywhere (nothing started
/// yet). Every node's report in the cluster's order, and the backend as the image settles it,
/// and why.
pub(super) async fn check_every_node(
    cluster: &[&dyn Node],
    on: &[usize],
    request: &LaunchRequest,
    backends: &[Backend],
    keep: u16,
) -> Result<(Vec<ServeCheckReport>, Backend, Vec<String>)> {
    // When the image settles the backend, what every candidate needs is asked at once.
    let engine = request.engine;
    let mut asks = Vec::new();
    for index in 0..cluster.len() {
        let mut ask = ServeCheck { keep: if index == 0 { vec![keep] } else { Vec::new() }, ..ServeCheck::default() };
        if let Some(rank) = on.iter().position(|i| *i == index) {
            let mut programs: Vec<String> = Vec::new();
            for backend in backends {
                for names in engine.programs(*backend, backend.role_of(rank)) {
                    for name in names.iter().map(|n| n.to_string()) {
                        if !programs.contains(&name) {
                            programs.push(name);
                        }
                    }
                }
            }
            // The role the model's files are read in does not depend on which candidate wins.
            let role = backends[0].role_of(rank);
            ask = ServeCheck {
                toolbox: Some(request.toolbox.clone()),
                start: !request.only_looks(),
                programs,
                paths: engine.model_paths(&request.source, role)?,
                flags: if rank == 0 { engine.image_question(backends) } else { None },
                sha256_of: engine.identity_file(&request.source, role).filter(|_| !request.only_looks()),
                free_ports: vec![ENGINE_PORTS_FROM, engine.profile().node_port],
                ..ask
            };
        }
        asks.push(ask);
    }
    let results = join_all(cluster.iter().zip(asks).map(|(node, ask)| node.call(ask))).await;
    let mut problems = MultiError::new("nothing was started");
    let mut answered = Vec::new();
    for (node, result) in cluster.iter().zip(results) {
        match result {
            Ok(check) => answered.push(check),
            Err(error) => problems.push(node.name(), error),
        }
    }
    if !problems.is_empty() {
        return Err(problems.into());
    }
    let head_flags = answered[on[0]].flags.as_deref();
    let (backend, why) = engine.settle_backend(backends, head_flags);
    for (rank, index) in on.iter().enumerate() {
        for error in node_problems(request, backend, rank, &answered[*index], on.len()) {
            problems.push(cluster[*index].name(), error);
        }
    }
    if problems.is_empty() {
        // By the image id, which every node says alike (`ToolboxStatus::image_identity`): the
        // same id is the same image whatever digest each node was given it by.
        let images: Vec<&str> = on.iter().filter_map(|i| answered[*i].image_id.as_deref()).collect();
        if images.windows(2).any(|pair| pair[0] != pair[1]) {
            let each: Vec<String> = on
                .iter()
                .map(|i| {
                    let image = answered[*i].image_id.as_deref().unwrap_or("-");
                    format!("{} {}", cluster[*i].name(), crate::image::short_digest(image))
                })
                .collect();
            problems.push(
                "the cluster",
                Error::Toolbox {
                    name: request.toolbox.clone(),
                    message: format!("the nodes run different toolbox images ({})", each.join(", ")),
                    fix: Some("`strix-toolbox cluster refresh` puts every node on one".into()),
                },
            );
        }
    }
    if problems.is_empty() {
        Ok((answered, backend, why))
    } else {
        Err(problems.into())
    }
}

/// What is wrong with one node for its part in the launch.
fn node_problems(
    request: &LaunchRequest,
    backend: Backend,
    rank: usize,
    check: &ServeCheckReport,
    nodes: usize,
) -> Vec<Error> {
    let mut problems = Vec::new();
    if let Some(engine) = check.engine.filter(|engine| *engine != request.engine) {
        problems.push(Error::toolbox(
            &request.toolbox,
            format!("toolbox {} was made for {engine}, not {}", request.toolbox, request.engine),
            format!("`--engine {engine}`, or `--toolbox` a toolbox made for {}", request.engine),
        ));
    }
    let role = backend.role_of(rank);
    let needed = if check.looked { request.engine.programs(backend, role) } else { Vec::new() };
    for names in needed {
        if !names.iter().any(|name| check.programs.iter().any(|p| p == name)) {
            problems.push(Error::toolbox(
                &request.toolbox,
                format!("toolbox {} has no {} (its role: {role:?})", request.toolbox, names.join(" or ")),
                format!(
                    "refresh it from an image made for {} (`strix-toolbox cluster refresh --engine {}`)",
                    request.engine, request.engine
                ),
            ));
        }
    }
    if !check.missing.is_empty() {
        problems.push(Error::Host {
            what: request.model.clone(),
            message: format!(
                "the model is not where the launch reads it: no {} in toolbox {}",
                check.missing.join(", "),
                request.toolbox
            ),
            fix: Some(request.engine.profile().missing_model_fix.into()),
        });
    }
    if nodes > 1 {
        problems.extend(check.cluster_link.address().err());
    }
    problems
}

/// The service's name serves already somewhere and `--replace` was not given: nothing starts.
pub(super) fn refuse_when_serving(
    cluster: &[&dyn Node],
    request: &LaunchRequest,
    checks: &[ServeCheckReport],
) -> Result<()> {
    let name = request.service.as_str();
    let active: Vec<(&str, &ServingRecord)> = checks
        .iter()
        .zip(cluster)
        .filter_map(|(check, node)| check.service(name).filter(|s| s.active()).map(|s| (node.name(), &s.record)))
        .collect();
    let Some((_, record)) = active.first().filter(|_| !request.replace) else { return Ok(()) };
    let names: Vec<&str> = active.iter().map(|(node, _)| *node).collect();
    Err(Error::Toolbox {
        name: request.toolbox.clone(),
        message: format!(
            "{name} already serves on {} ({} with {} at {}); nothing was started",
            names.join(", "),
            record.model,
            record.engine,
            record.endpoint
        ),
        fix: Some(format!("`--replace` stops it first, `--name` another name, or `strix-toolbox cluster stop {name}`")),
    })
}

/// Ray runs one cluster per node: a Ray-backed launch onto a node where another service runs
/// Ray is refused, naming it.
pub(super) fn refuse_second_ray(
    cluster: &[&dyn Node],
    on: &[usize],
    request: &LaunchRequest,
    backend: Backend,
    checks: &[ServeCheckReport],
) -> Result<()> {
    if !backend.runs_ray() {
        return Ok(());
    }
    let mut problems = MultiError::new("nothing was started");
    for index in on {
        let other = checks[*index]
            .active()
            .find(|state| state.record.backend.runs_ray() && state.record.service != request.service.as_str());
        if let Some(other) = other {
            problems.push(
                cluster[*index].name(),
                Error::Toolbox {
                    name: request.toolbox.clone(),
                    message: format!(
                        "{} runs Ray there for {}: one Ray cluster per node, so {} cannot run over Ray beside it",
                        cluster[*index].name(),
                        other.record.service,
                        request.service
                    ),
                    fix: Some(format!(
                        "`--backend mp`, `--on` other nodes, or `strix-toolbox cluster stop {}` first",
                        other.record.service
                    )),
                },
            );
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.into())
    }
}
