//! Every node checked before anything starts: reachable, its toolbox made for the engine with
//! the programs its role needs, the model's files where they will be read, the same image
//! everywhere, an address on the cluster link, and nothing serving already (unless `--replace`).

use futures_util::future::join_all;

use super::request::LaunchRequest;
use crate::error::{Error, MultiError, Result};
use crate::node::{Node, NodeCalls};
use crate::serving::engine::Backend;
use crate::serving::record::ServingRecord;
use crate::serving::state::{ServeCheck, ServeCheckReport};

/// Every node's check, refusing the launch on the first problem anywhere (nothing started yet);
/// the backend as the image settles it, and why.
pub(super) async fn check_every_node(
    nodes: &[&dyn Node],
    request: &LaunchRequest,
    backends: &[Backend],
) -> Result<(Vec<ServeCheckReport>, Backend, Vec<String>)> {
    // When the image settles the backend, what every candidate needs is asked at once.
    let engine = request.engine;
    let mut asks = Vec::new();
    for index in 0..nodes.len() {
        let mut programs: Vec<String> = Vec::new();
        for backend in backends {
            for names in engine.programs(*backend, backend.role_of(index)) {
                for name in names.iter().map(|n| n.to_string()) {
                    if !programs.contains(&name) {
                        programs.push(name);
                    }
                }
            }
        }
        // The role the model's files are read in does not depend on which candidate wins.
        let role = backends[0].role_of(index);
        asks.push(ServeCheck {
            toolbox: request.toolbox.clone(),
            start: !request.dry_run,
            programs,
            paths: engine.model_paths(&request.source, role)?,
            flags: if index == 0 { engine.backend_question(backends) } else { None },
            sha256_of: engine.identity_file(&request.source, role).filter(|_| !request.dry_run),
        });
    }
    let results = join_all(nodes.iter().zip(asks).map(|(node, ask)| node.call(ask))).await;
    let mut problems = MultiError::new("nothing was started");
    let mut answered = Vec::new();
    for (node, result) in nodes.iter().zip(results) {
        match result {
            Ok(check) => answered.push(check),
            Err(error) => problems.push(node.name(), error),
        }
    }
    let head_flags = answered.first().and_then(|head| head.flags.as_deref());
    let (backend, why) = engine.settle_backend(backends, head_flags);
    let mut checks = Vec::new();
    if problems.is_empty() {
        for (index, (node, check)) in nodes.iter().zip(answered).enumerate() {
            for error in node_problems(request, backend, index, &check, nodes.len()) {
                problems.push(node.name(), error);
            }
            checks.push(check);
        }
    }
    if problems.is_empty() {
        let images: Vec<&str> = checks.iter().filter_map(|c| c.image.as_deref()).collect();
        if images.windows(2).any(|pair| pair[0] != pair[1]) {
            let each: Vec<String> = nodes
                .iter()
                .zip(&checks)
                .map(|(n, c)| format!("{} {}", n.name(), crate::image::short_digest(c.image.as_deref().unwrap_or("-"))))
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
        Ok((checks, backend, why))
    } else {
        Err(problems.into())
    }
}

/// What is wrong with one node for its part in the launch.
fn node_problems(
    request: &LaunchRequest,
    backend: Backend,
    index: usize,
    check: &ServeCheckReport,
    nodes: usize,
) -> Vec<Error> {
    let mut problems = Vec::new();
    if let Some(engine) = check.engine.filter(|engine| *engine != request.engine) {
        problems.push(Error::toolbox(
            &request.toolbox,
            format!("toolbox {} was made for {engine}, not {}", request.toolbox, request.engine),
            format!("`--engine {engine}`, or `--name` a toolbox made for {}", request.engine),
        ));
    }
    let role = backend.role_of(index);
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
            fix: Some(request.engine.missing_model_fix().into()),
        });
    }
    if nodes > 1 {
        problems.extend(check.cluster_link.address().err());
    }
    problems
}

/// Something of a launch runs on a node and `--replace` was not given: nothing starts.
pub(super) fn refuse_when_serving(
    nodes: &[&dyn Node],
    request: &LaunchRequest,
    checks: &[ServeCheckReport],
) -> Result<()> {
    let active: Vec<(&str, &ServingRecord)> = checks
        .iter()
        .zip(nodes)
        .filter_map(|(check, node)| check.serving.as_ref().filter(|s| s.active()).map(|s| (node.name(), &s.record)))
        .collect();
    if active.is_empty() || request.replace {
        return Ok(());
    }
    let names: Vec<&str> = active.iter().map(|(node, _)| *node).collect();
    let record = active[0].1;
    Err(Error::Toolbox {
        name: request.toolbox.clone(),
        message: format!(
            "{} already serve{} ({} with {} at {}); nothing was started",
            names.join(", "),
            if names.len() == 1 { "s" } else { "" },
            record.model,
            record.engine,
            record.endpoint
        ),
        fix: Some("`--replace` stops it first, or `strix-toolbox cluster stop`".into()),
    })
}
