//! The router's health: `GET /health` asks every engine its own `/health` at once and answers 200
//! when each said 200, else 503 naming the failing ones; `GET /health/{model}` asks the one that
//! serves `model` (the name percent-decoded, so `Qwen/Qwen3-8B` may come as it is or as
//! `Qwen%2FQwen3-8B`). Neither needs the key: a load balancer or the watch asks them. A service
//! started on demand that does not serve now is no failure: it says its state, with 200.
//!
//! ```json
//! {"status": "unavailable", "failing": ["coder"], "services": {"coder": "connect failed: ...", "llama": "ok"}}
//! ```

use futures_util::future::join_all;
use hyper::StatusCode;
use serde_json::{json, Map, Value};

use super::bounds::Bounds;
use super::table::{RoutingTable, Upstream};
use super::upstream::get;

/// What one engine's `/health` said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceHealth {
    Healthy,
    /// Why not: the status it answered, or why it did not.
    Failing(String),
    /// Started on demand, not serving now: its state (`stopped (starts on a request)`).
    OnDemand(&'static str),
}

impl ServiceHealth {
    fn failing(&self) -> bool {
        matches!(self, ServiceHealth::Failing(_))
    }
}

/// Ask `upstream`'s `/health`.
pub async fn probe(upstream: &Upstream, bounds: &Bounds) -> ServiceHealth {
    match get(upstream, "/health", bounds).await {
        Ok((StatusCode::OK, _)) => ServiceHealth::Healthy,
        Ok((status, _)) => ServiceHealth::Failing(format!("answered {status} at {}", upstream.address)),
        Err(failure) => ServiceHealth::Failing(format!("{failure} ({})", upstream.address)),
    }
}

/// Every service of `table`, asked at once.
pub async fn probe_all(table: &RoutingTable, bounds: &Bounds) -> Vec<(String, ServiceHealth)> {
    let probes = table.iter().map(|(name, upstream)| async move { (name.to_string(), probe(upstream, bounds).await) });
    join_all(probes).await
}

/// The answer to `/health`: 200 when every service is healthy, else 503; a router that serves
/// nothing is not healthy either (nothing it would answer could succeed).
pub fn health_report(services: &[(String, ServiceHealth)]) -> (StatusCode, Value) {
    let failing: Vec<&str> =
        services.iter().filter(|(_, health)| health.failing()).map(|(name, _)| name.as_str()).collect();
    let healthy = failing.is_empty() && !services.is_empty();
    let each: Map<String, Value> = services.iter().map(|(name, health)| (name.clone(), json!(said(health)))).collect();
    let status = if healthy { "ok" } else { "unavailable" };
    let code = if healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (code, json!({"status": status, "failing": failing, "services": each}))
}

/// The answer to `/health/{model}`.
pub fn service_report(name: &str, health: &ServiceHealth) -> (StatusCode, Value) {
    let (code, status) = match health {
        ServiceHealth::Healthy => (StatusCode::OK, "ok"),
        ServiceHealth::OnDemand(_) => (StatusCode::OK, "on_demand"),
        ServiceHealth::Failing(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
    };
    (code, json!({"status": status, "service": name, "health": said(health)}))
}

fn said(health: &ServiceHealth) -> &str {
    match health {
        ServiceHealth::Healthy => "ok",
        ServiceHealth::Failing(why) => why,
        ServiceHealth::OnDemand(state) => state,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthy_only_when_every_service_is() {
        let failing = ServiceHealth::Failing("answered 503 Service Unavailable at 127.0.0.1:8002".into());
        let (status, body) = health_report(&[("a".into(), ServiceHealth::Healthy), ("b".into(), failing)]);
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            body,
            json!({"status": "unavailable", "failing": ["b"], "services": {
                "a": "ok", "b": "answered 503 Service Unavailable at 127.0.0.1:8002"
            }})
        );
        let (status, body) = health_report(&[("a".into(), ServiceHealth::Healthy)]);
        assert_eq!((status, body["status"].as_str()), (StatusCode::OK, Some("ok")));
        assert_eq!(health_report(&[]).0, StatusCode::SERVICE_UNAVAILABLE);
        let stopped = ServiceHealth::OnDemand("stopped (starts on a request)");
        let (status, body) = health_report(&[("a".into(), ServiceHealth::Healthy), ("c".into(), stopped.clone())]);
        assert_eq!((status, &body["failing"]), (StatusCode::OK, &json!([])), "stopped on demand is no failure");
        assert_eq!(body["services"]["c"], "stopped (starts on a request)");
        assert_eq!(service_report("c", &stopped).0, StatusCode::OK);
        assert_eq!(
            service_report("a", &ServiceHealth::Healthy),
            (StatusCode::OK, json!({"status": "ok", "service": "a", "health": "ok"}))
        );
    }
}
