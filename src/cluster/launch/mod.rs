//! `cluster launch MODEL [--on NODES] [--name NAME]` (and `launch MODEL` on one node): a service,
//! one model served by one engine on a set of the cluster's nodes under one name, behind the
//! cluster's one OpenAI-compatible endpoint (the router on the cluster's head). The discipline
//! is the same for every engine and lives here: every node is checked before anything starts
//! (reachable, what it serves; on the service's nodes the toolbox and what its role needs in it,
//! the same image everywhere, an address on the cluster link, the model's files where they will
//! be read, free ports); the launch is refused when the name serves already, when another service
//! on one of its nodes is not known to leave it room ([`beside`]), or when the router wants
//! another address or key; the model comes from the Hub once when a node lacks it; then the
//! engine's plan (`serving::plan`) is carried out step by step, each step's commands at once and
//! its proofs before the next (`proof`); once it serves, its route is added to the router (which
//! starts with the first). Any failure, or Ctrl-C, stops everything the launch started on every
//! node, and no other service is touched. What differs per engine (the commands, what proves the
//! workers joined, what the record holds) is the engine's plan.

pub mod beside;
mod carry_out;
mod checks;
mod fit;
mod model;
mod pinned;
mod plan;
mod proof;
mod recipe;
mod register;
mod request;

use std::net::Ipv4Addr;
use std::time::Instant;

use crate::cluster::interrupt::Interrupt;
use crate::cluster::measured::measured;
use crate::cluster::router::{add_route, endpoint, listen_address, look, remove_routes, DEFAULT_PORT};
use crate::cluster::stop::stop_service;
use crate::error::{Error, Result};
use crate::node::router::RouterState;
use crate::node::Node;
use crate::reporter::Reporter;
use crate::router::routes::Route;
use crate::serving::room::Room;
pub use pinned::Pinned;
pub use request::{LaunchReport, LaunchRequest, OnDemandAsk};

/// Launch on the nodes of `cluster` the request names (every node when none; the cluster's head,
/// its first node, runs the router). A failure or a signal stops what was started.
pub async fn launch(cluster: &[&dyn Node], request: &LaunchRequest, reporter: &dyn Reporter) -> Result<LaunchReport> {
    // The model's recipe, when the operator names no layout: its nodes, its split, its flags.
    let recipe = recipe::for_launch(cluster, request)?;
    let by_recipe = recipe.as_ref().map(|recipe| recipe::applied(recipe, request));
    let as_asked = request;
    let request = by_recipe.as_ref().unwrap_or(request);
    let on = service_nodes(cluster, &request.on)?;
    let nodes: Vec<&dyn Node> = on.iter().map(|index| cluster[*index]).collect();
    let engine = request.engine;
    let backends = engine.backends(request.backend, nodes.len())?;
    let asked = engine.parallelism_asked(request.tp, request.pp, nodes.len())?;
    let keep = request.port.unwrap_or(DEFAULT_PORT);
    // All of these only look: asked together, they cost one round trip.
    let (checks, model, router) = tokio::join!(
        checks::check_every_node(cluster, &on, request, &backends, keep),
        model::look_up_model(&nodes, request),
        look(cluster[0], request.api_key.as_ref(), false)
    );
    let ((checks, backend, mut why), model, router) = (checks?, model?, router?);
    if let Some(pinned) = &request.pinned {
        pinned.refuse_another_image(request, checks[on[0]].image.as_deref(), checks[on[0]].image_id.as_deref())?;
    }
    if let Some(recipe) = &recipe {
        let identity = model::identity(&checks[on[0]], model.as_ref(), request);
        if let Some(stale) = recipe.stale(checks[on[0]].image.as_deref(), identity.as_ref()) {
            // Planned afresh, as the operator asked it, saying why the recipe was not used.
            let afresh = LaunchRequest { recipes: None, ..as_asked.clone() };
            let mut report = Box::pin(launch(cluster, &afresh, reporter)).await?;
            report.why.insert(0, format!("{stale}: planned afresh (`cluster plan MODEL --try` finds it again)"));
            return Ok(report);
        }
        why.insert(0, recipe.used());
    }
    checks::refuse_when_serving(cluster, request, &checks)?;
    // The model-aware plan: refused here when the model cannot serve on these nodes; without
    // one (a model it cannot size), sharing a node is refused (never guessed).
    let (fitted, unplanned) = match fit::plan_first(&nodes, request).await? {
        fit::PlanFirst::Planned(fitted) => (Some(*fitted), None),
        fit::PlanFirst::Unplanned(why) => {
            reporter.warning(&why);
            (None, Some(why))
        }
    };
    let memory: Vec<Option<Room>> =
        fitted.as_ref().map_or_else(|| vec![None; on.len()], |fitted| fitted.memory.clone());
    // A service started on demand has its room made when it starts, not now.
    if request.on_demand.is_none() {
        beside::refuse_beside(cluster, &on, request, &checks, &memory)?;
        checks::refuse_second_ray(cluster, &on, request, backend, &checks)?;
    }
    let listen = refuse_another_router(&router, request)?;
    let head_link = checks[0].cluster_link.address().unwrap_or(Ipv4Addr::LOCALHOST);
    let service_checks: Vec<_> = on.iter().map(|index| &checks[*index]).collect();
    let split = match fitted.as_ref().and_then(|fitted| fitted.split.clone()) {
        Some(planned) => {
            if nodes.len() > 1 && asked.is_none() {
                why.push(format!("planned: {}", planned.why));
            }
            planned
        }
        None => asked.unwrap_or_else(|| {
            let chosen = engine.parallelism(nodes.len(), &service_checks[0].cluster_link.transport);
            if nodes.len() > 1 {
                why.push(chosen.why.clone());
            }
            chosen
        }),
    };
    let planned_args = fitted.as_ref().map(|fitted| fitted.args.clone()).unwrap_or_default();
    let hub = model::model_in_every_cache(&nodes, request, model, reporter).await?;
    let gguf = model::gguf_on_the_head(&nodes, request, reporter).await?;
    let endpoint = endpoint(listen, head_link);
    let facts = plan::Facts { checks: &service_checks, hub_model: hub.as_ref(), gguf: gguf.as_ref(), planned_args };
    let mut report = plan::plan(&nodes, &facts, request, backend, split, endpoint)?;
    why.append(&mut report.why);
    report.why = why;
    report.fit = fitted.as_ref().map(|fitted| fitted.fit.clone());
    report.warnings.extend(unplanned);
    match &request.on_demand {
        Some(ask) if !request.dry_run => {
            return register::register_on_demand(cluster, request, ask, report, fitted.as_ref(), &router, listen).await
        }
        _ if request.dry_run => return Ok(report.shown()),
        _ => {}
    }
    if let Some(pinned) = &request.pinned {
        // What a relaunch found where it reads the model (a GGUF hashed, pulled): what served.
        pinned.refuse_other_weights(request, report.identity().as_ref())?;
    }
    for reason in &report.why {
        reporter.step_finished(nodes[0].name(), reason);
    }
    let name = request.service.to_string();
    if checks.iter().any(|check| check.service(&name).is_some_and(|state| state.active())) {
        reporter.step_started(nodes[0].name(), &format!("stopping {name}, which serves now (--replace)"));
        stop_service(cluster, &name).await.into_result()?;
        if router.routes.iter().any(|route| route.name == name) {
            remove_routes(cluster[0], std::slice::from_ref(&name), false).await?;
        }
        report.replaced = true;
    }

    let interrupt = Interrupt::watch();
    let started = Instant::now();
    let memory: Vec<Option<u64>> = memory.iter().map(|m| m.map(|m| m.planned)).collect();
    let planned = fitted.as_ref().map(|fitted| fitted.planned.clone()).unwrap_or_default();
    let recording = carry_out::Recording {
        router_listen: listen,
        memory: &memory,
        planned: &planned,
        transport: &service_checks[0].cluster_link.transport,
    };
    let mut outcome = carry_out::carry_out(&nodes, request, &report, &recording, &interrupt, reporter).await;
    if let Ok((served, _)) = &outcome {
        report.served = served.clone();
        reporter.step_started(cluster[0].name(), &format!("routing {name} at {}", report.endpoint));
        let since = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        match add_route(cluster[0], route_of(&report, since), listen, request.api_key.as_ref()).await {
            Ok(_) => reporter.step_finished(cluster[0].name(), &format!("{name} answers at {}", report.endpoint)),
            Err(error) => outcome = Err(error),
        }
    }
    if outcome.is_ok() && !planned.is_empty() {
        // What the engine said it allocated, beside what the plan put on each node.
        let on_link: Vec<_> = nodes.iter().zip(&report.nodes).map(|(node, plan)| (*node, plan.link_ip)).collect();
        let loads: Vec<_> = planned.iter().flatten().cloned().collect();
        report.measured = measured(&on_link, &report.service, engine, &loads).await;
    }
    reporter.finish();
    match outcome {
        Ok((_, warnings)) => {
            report.warnings.extend(warnings);
            report.router_started = router.process.is_none();
            report.seconds_to_serve = Some(started.elapsed().as_secs_f64());
            Ok(report.shown())
        }
        Err(error) => {
            reporter.warning(&format!("the launch failed: stopping what it started of {name} on every node"));
            let cleanup = stop_service(&nodes, &name).await;
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

/// The service's nodes, as indices into `cluster` in the order `on` names them (its head first);
/// every node of the cluster when `on` names none.
fn service_nodes(cluster: &[&dyn Node], on: &[String]) -> Result<Vec<usize>> {
    if on.is_empty() {
        return Ok((0..cluster.len()).collect());
    }
    let mut indices = Vec::new();
    for name in on {
        let index = cluster.iter().position(|node| node.name() == name).ok_or_else(|| {
            let names: Vec<&str> = cluster.iter().map(|node| node.name()).collect();
            Error::Usage(format!("--on {name}: not a node of this cluster ({})", names.join(", ")))
        })?;
        if indices.contains(&index) {
            return Err(Error::Usage(format!("--on names {name} twice")));
        }
        indices.push(index);
    }
    Ok(indices)
}

/// Where the router listens for this launch: the running router, when the launch asks for no
/// other address, and wants the same key; else a usage error saying what it serves.
fn refuse_another_router(router: &RouterState, request: &LaunchRequest) -> Result<std::net::SocketAddr> {
    let listen = listen_address(router.process.as_ref(), request.host, request.port);
    let Some(running) = &router.process else { return Ok(listen) };
    let other_port = request.port.is_some_and(|port| port != running.listen.port());
    let other_host = request.host.is_some_and(|host| std::net::IpAddr::V4(host) != running.listen.ip());
    if other_port || other_host {
        let asked = listen_address(None, request.host, request.port);
        return Err(Error::Usage(format!(
            "the cluster's endpoint is the router on {}, serving {}; {} cannot have another at {asked}. Fix: \
             launch it without --port and --host (it joins the endpoint there), or stop every service first \
             (`strix-toolbox cluster stop --all`)",
            running.listen,
            router.routes.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", "),
            request.service
        )));
    }
    if !router.key_matches {
        return Err(Error::Usage(format!(
            "the cluster's endpoint (the router on {}) wants {} API key than {} would be launched with: one \
             endpoint, one key. Fix: the same --api-key-file (or STRIX_API_KEY) as its other services",
            running.listen,
            if router.api_key { "another" } else { "no" },
            request.service
        )));
    }
    Ok(listen)
}

/// The service's route: its name, where its engine answers, what it serves, since when.
fn route_of(report: &LaunchReport, since: String) -> Route {
    Route {
        name: report.service.clone(),
        upstream: report.upstream,
        engine: report.engine.name().to_string(),
        model: report.model.clone(),
        nodes: report.on.clone(),
        since,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::local::LocalNode;

    #[test]
    fn on_names_nodes_of_the_cluster_once_each_head_first() {
        let settings = crate::settings::Settings::resolve(
            "/".into(),
            crate::container_engine::kind::EngineChoice::Podman,
            std::sync::Arc::new(crate::reporter::Silent),
        );
        let nodes: Vec<LocalNode> =
            ["node1", "node2", "node3"].iter().map(|n| LocalNode::named(n, settings.clone())).collect();
        let cluster: Vec<&dyn Node> = nodes.iter().map(|n| n as &dyn Node).collect();
        assert_eq!(service_nodes(&cluster, &[]).unwrap(), [0, 1, 2]);
        assert_eq!(service_nodes(&cluster, &["node3".into(), "node1".into()]).unwrap(), [2, 0]);
        let unknown = service_nodes(&cluster, &["node9".into()]).unwrap_err().to_string();
        assert!(unknown.contains("node9") && unknown.contains("node1, node2, node3"), "{unknown}");
        assert!(service_nodes(&cluster, &["node2".into(), "node2".into()]).is_err());
    }
}
