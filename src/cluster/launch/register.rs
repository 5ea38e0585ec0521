//! `cluster launch MODEL --on-demand`: the launch checked and planned as a dry run is (every node
//! looked at, the model sized by the plan, the router's address and key), then registered with
//! the router instead of started. A model the plan refuses on its nodes is refused now; one the
//! plan cannot size is refused too (without the plan's figures the router could not know what
//! fits beside what). The router (started now when none runs) starts it when a request names it.

use std::net::SocketAddr;

use super::fit::Fitted;
use super::request::{LaunchReport, LaunchRequest, OnDemandAsk, OnDemandRegistration};
use crate::cluster::on_demand::OnDemandLaunch;
use crate::cluster::router::register;
use crate::error::{Error, Result};
use crate::node::router::RouterState;
use crate::node::Node;
use crate::router::routes::Registered;

/// Register `report`'s service (planned as `fitted`) on the cluster's head, the router at
/// `listen`.
pub(super) async fn register_on_demand(
    cluster: &[&dyn Node],
    request: &LaunchRequest,
    ask: &OnDemandAsk,
    mut report: LaunchReport,
    fitted: Option<&Fitted>,
    router: &RouterState,
    listen: SocketAddr,
) -> Result<LaunchReport> {
    let Some(fitted) = fitted else {
        return Err(Error::Usage(format!(
            "{} cannot be started on demand: the plan cannot size it ({}), and the router decides what fits beside \
             what by the plan's figures. Fix: launch it without --on-demand",
            request.service,
            report.warnings.join("; ")
        )));
    };
    let registered = Registered {
        name: request.service.to_string(),
        engine: request.engine.name().to_string(),
        model: request.model.clone(),
        nodes: report.on.clone(),
        room: fitted.memory.clone(),
        idle_seconds: ask.idle.map(|idle| idle.as_secs()),
        wait_seconds: ask.wait.as_secs(),
        since: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        launch: serde_json::to_value(OnDemandLaunch::of(request, report.on.clone(), cluster[0].name(), ask))
            .map_err(|error| Error::Internal(format!("cannot encode the launch to keep: {error}")))?,
    };
    register(cluster[0], registered, listen, request.api_key.as_ref()).await?;
    report.router_started = router.process.is_none();
    report.on_demand = Some(OnDemandRegistration {
        idle_seconds: ask.idle.map(|idle| idle.as_secs()),
        wait_seconds: ask.wait.as_secs(),
        planned_bytes: fitted.memory.iter().map(|room| room.map(|room| room.planned)).collect(),
    });
    Ok(report.shown())
}
