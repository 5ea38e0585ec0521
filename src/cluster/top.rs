//! `cluster top`'s frame: the cluster's families ([`super::metrics`]) as a line per node (GPU
//! memory in use and in all, busy share, power, temperature, the RDMA ports' bytes per second),
//! a line per service (tokens per second, requests running and waiting, KV cache in use), and
//! each service registered to start on demand with the state the router says it is in.
//! Rates take two readings: a counter's rise between them over the seconds between them, summed
//! over its series; a series that fell restarted from zero (its engine or node restarted), so its
//! rise is its value now, as Prometheus's `rate()` counts it; a series only one reading has gives
//! none, and with no series in both the rate is unknown (None), never a made-up zero.
//!
//! The engines' names for each figure are listed here, each engine's as it exposes them; a frame
//! takes whichever a service's metrics have, so no line asks which engine it is.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::metrics::{Family, Sample};

/// Generated tokens, a counter: vLLM's (vllm/v1/metrics/loggers.py); llama-server's
/// (tools/server/server-task.cpp; it adds a request's tokens when the request ends).
const GENERATED_TOKENS: &[&str] = &["vllm:generation_tokens_total", "llamacpp:tokens_predicted_total"];
/// Requests being worked on now, a gauge.
const REQUESTS_RUNNING: &[&str] = &["vllm:num_requests_running", "llamacpp:requests_processing"];
/// Requests waiting for a slot, a gauge (llama-server: deferred).
const REQUESTS_WAITING: &[&str] = &["vllm:num_requests_waiting", "llamacpp:requests_deferred"];
/// The KV cache's share in use, 0 to 1: vLLM v1's, its v0 name, and llama-server's before it
/// dropped the gauge (today's llama-server has none: the figure is unknown for it).
const KV_CACHE_USED: &[&str] =
    &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "llamacpp:kv_cache_usage_ratio"];

/// The cluster's families at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// Seconds since an arbitrary origin (a monotonic clock), to take differences of.
    pub at_seconds: f64,
    pub families: Vec<Family>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopFrame {
    /// Seconds between the two readings the rates come from (None: one reading, rates unknown).
    pub rate_seconds: Option<f64>,
    pub nodes: Vec<NodeLine>,
    pub services: Vec<ServiceLine>,
    /// The services registered to start on demand, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_demand: Vec<OnDemandLine>,
}

/// A service registered to start on demand, and its state (`serving`, `starting`, `stopping`,
/// `stopped`), as the router's `strix_router_service_state` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OnDemandLine {
    pub service: String,
    pub state: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeLine {
    pub node: String,
    /// Its agent answered with its telemetry.
    pub up: bool,
    /// Why not, when it did not.
    pub error: Option<String>,
    /// GTT and VRAM together.
    pub gpu_memory_used_bytes: Option<f64>,
    pub gpu_memory_total_bytes: Option<f64>,
    /// The mean over its cards, 0 to 100.
    pub gpu_busy_percent: Option<f64>,
    /// Summed over its cards.
    pub gpu_power_watts: Option<f64>,
    /// The hottest card.
    pub gpu_temperature_celsius: Option<f64>,
    /// Every RDMA port's bytes sent per second, summed.
    pub link_transmit_bytes_per_second: Option<f64>,
    pub link_receive_bytes_per_second: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceLine {
    pub service: String,
    pub model: String,
    /// The node whose engine was scraped (the service's head).
    pub node: String,
    /// Its engine answered `/metrics`.
    pub up: bool,
    pub error: Option<String>,
    pub tokens_per_second: Option<f64>,
    pub requests_running: Option<f64>,
    pub requests_waiting: Option<f64>,
    /// 0 to 100.
    pub kv_cache_used_percent: Option<f64>,
}

/// The frame `current` makes, with its rates from `previous` when there is one.
pub fn frame(previous: Option<&Reading>, current: &Reading) -> TopFrame {
    let seconds = previous.map(|p| current.at_seconds - p.at_seconds).filter(|s| *s > 0.0);
    let before = previous.filter(|_| seconds.is_some()).map(|p| p.families.as_slice());
    let now = current.families.as_slice();
    let nodes = samples(now, "strix_node_up")
        .filter_map(|up| {
            let node = up.label("node")?;
            let ours = |s: &Sample| s.label("node") == Some(node);
            let rate = |name: &str| seconds.and_then(|s| Some(rise(before?, now, name, &ours)? / s));
            Some(NodeLine {
                node: node.to_string(),
                up: up.value == 1.0,
                error: error_of(now, &|s| ours(s) && s.label("service").is_none()),
                gpu_memory_used_bytes: sum(now, "strix_gpu_memory_used_bytes", &ours),
                gpu_memory_total_bytes: sum(now, "strix_gpu_memory_total_bytes", &ours),
                gpu_busy_percent: mean(now, "strix_gpu_busy_ratio", &ours).map(|ratio| ratio * 100.0),
                gpu_power_watts: sum(now, "strix_gpu_power_watts", &ours),
                gpu_temperature_celsius: samples(now, "strix_gpu_temperature_celsius")
                    .filter(|s| ours(s))
                    .map(|s| s.value)
                    .reduce(f64::max),
                link_transmit_bytes_per_second: rate("strix_rdma_port_transmit_bytes_total"),
                link_receive_bytes_per_second: rate("strix_rdma_port_receive_bytes_total"),
            })
        })
        .collect();
    let services = samples(now, "strix_engine_up")
        .filter_map(|up| {
            let (node, service, model) = (up.label("node")?, up.label("service")?, up.label("model")?);
            let ours = |s: &Sample| {
                s.label("node") == Some(node) && s.label("service") == Some(service) && s.label("model") == Some(model)
            };
            let first = |names: &[&str], read: &dyn Fn(&str) -> Option<f64>| names.iter().find_map(|name| read(name));
            Some(ServiceLine {
                service: service.to_string(),
                model: model.to_string(),
                node: node.to_string(),
                up: up.value == 1.0,
                error: error_of(now, &ours),
                tokens_per_second: first(GENERATED_TOKENS, &|name| {
                    seconds.and_then(|s| Some(rise(before?, now, name, &ours)? / s))
                }),
                requests_running: first(REQUESTS_RUNNING, &|name| sum(now, name, &ours)),
                requests_waiting: first(REQUESTS_WAITING, &|name| sum(now, name, &ours)),
                kv_cache_used_percent: first(KV_CACHE_USED, &|name| mean(now, name, &ours)).map(|share| share * 100.0),
            })
        })
        .collect();
    let on_demand = samples(now, "strix_router_service_state")
        .filter(|sample| sample.value == 1.0)
        .filter_map(|sample| {
            Some(OnDemandLine { service: sample.label("service")?.into(), state: sample.label("state")?.into() })
        })
        .collect();
    TopFrame { rate_seconds: seconds, nodes, services, on_demand }
}

/// The samples named `name`.
fn samples<'a>(families: &'a [Family], name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
    families.iter().filter(move |f| f.owns(name)).flat_map(|f| &f.samples).filter(move |s| s.name == name)
}

fn sum(families: &[Family], name: &str, ours: &dyn Fn(&Sample) -> bool) -> Option<f64> {
    samples(families, name).filter(|s| ours(s)).map(|s| s.value).reduce(|a, b| a + b)
}

fn mean(families: &[Family], name: &str, ours: &dyn Fn(&Sample) -> bool) -> Option<f64> {
    let values: Vec<f64> = samples(families, name).filter(|s| ours(s)).map(|s| s.value).collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// `strix_scrape_error`'s why for the sample `ours` picks.
fn error_of(families: &[Family], ours: &dyn Fn(&Sample) -> bool) -> Option<String> {
    samples(families, "strix_scrape_error").find(|s| ours(s)).and_then(|s| s.label("why")).map(str::to_string)
}

/// How much counter `name` rose between the readings over the series `ours` picks that both
/// have (a series that fell restarted: its rise is its value now); None when none is in both.
fn rise(before: &[Family], now: &[Family], name: &str, ours: &dyn Fn(&Sample) -> bool) -> Option<f64> {
    let earlier: HashMap<_, f64> =
        samples(before, name).filter(|s| ours(s)).map(|s| (s.series_key(), s.value)).collect();
    samples(now, name)
        .filter(|s| ours(s))
        .filter_map(|s| {
            let was = *earlier.get(&s.series_key())?;
            Some(if s.value >= was { s.value - was } else { s.value })
        })
        .reduce(|a, b| a + b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::MetricType;

    /// The families of a two-node cluster serving `tiny` on node1 with `tokens` generated so far
    /// (on two engine series, split 3:1) and `sent` bytes sent by node1's port.
    fn families(tokens: f64, sent: f64) -> Vec<Family> {
        let mut up = Family::new("strix_node_up", MetricType::Gauge, "");
        up.push(&[("node", "node1")], 1.0);
        up.push(&[("node", "node2")], 0.0);
        let mut used = Family::new("strix_gpu_memory_used_bytes", MetricType::Gauge, "");
        used.push(&[("node", "node1"), ("kind", "gtt")], 3e9);
        used.push(&[("node", "node1"), ("kind", "vram")], 1e9);
        let mut busy = Family::new("strix_gpu_busy_ratio", MetricType::Gauge, "");
        busy.push(&[("node", "node1"), ("card", "card0")], 0.5);
        busy.push(&[("node", "node1"), ("card", "card1")], 0.25);
        let mut sent_bytes = Family::new("strix_rdma_port_transmit_bytes_total", MetricType::Counter, "");
        sent_bytes.push(&[("node", "node1"), ("device", "rocep1"), ("port", "1")], sent);
        let mut engine_up = Family::new("strix_engine_up", MetricType::Gauge, "");
        engine_up.push(&[("node", "node1"), ("service", "tiny"), ("model", "m")], 1.0);
        let mut error = Family::new("strix_scrape_error", MetricType::Gauge, "");
        error.push(&[("node", "node2"), ("why", "ssh: refused")], 1.0);
        let labels =
            |engine: &'static str| [("node", "node1"), ("service", "tiny"), ("model", "m"), ("engine", engine)];
        let mut generated = Family::new("vllm:generation_tokens_total", MetricType::Counter, "");
        generated.push(&labels("0"), tokens * 0.75);
        generated.push(&labels("1"), tokens * 0.25);
        let mut running = Family::new("vllm:num_requests_running", MetricType::Gauge, "");
        running.push(&labels("0"), 2.0);
        running.push(&labels("1"), 1.0);
        let mut kv = Family::new("vllm:kv_cache_usage_perc", MetricType::Gauge, "");
        kv.push(&labels("0"), 0.5);
        kv.push(&labels("1"), 0.1);
        vec![up, used, busy, sent_bytes, engine_up, error, generated, running, kv]
    }

    #[test]
    fn rates_are_the_rise_between_two_readings_over_their_seconds() {
        let first = Reading { at_seconds: 10.0, families: families(100.0, 4000.0) };
        let second = Reading { at_seconds: 12.0, families: families(180.0, 10_000.0) };
        let frame = frame(Some(&first), &second);
        assert_eq!(frame.rate_seconds, Some(2.0));
        let node1 = &frame.nodes[0];
        assert_eq!((node1.node.as_str(), node1.up), ("node1", true));
        assert_eq!(node1.gpu_memory_used_bytes, Some(4e9));
        assert_eq!(node1.gpu_busy_percent, Some(37.5));
        assert_eq!(node1.link_transmit_bytes_per_second, Some(3000.0));
        assert_eq!(node1.link_receive_bytes_per_second, None, "no such counter");
        let node2 = &frame.nodes[1];
        assert_eq!(
            (node2.up, node2.error.as_deref(), node2.gpu_memory_used_bytes),
            (false, Some("ssh: refused"), None)
        );
        let tiny = &frame.services[0];
        assert_eq!(tiny.tokens_per_second, Some(40.0));
        assert_eq!(tiny.requests_running, Some(3.0));
        assert_eq!(tiny.requests_waiting, None);
        assert!((tiny.kv_cache_used_percent.unwrap() - 30.0).abs() < 1e-9);
    }

    #[test]
    fn one_reading_has_no_rates_and_a_counter_that_fell_restarted_from_zero() {
        let only = Reading { at_seconds: 5.0, families: families(100.0, 4000.0) };
        let alone = frame(None, &only);
        assert_eq!(alone.rate_seconds, None);
        assert_eq!((alone.services[0].tokens_per_second, alone.nodes[0].link_transmit_bytes_per_second), (None, None));
        assert_eq!(alone.services[0].requests_running, Some(3.0), "gauges need one reading");

        // The engine restarted: 1000 tokens before, 20 now (15 and 5 per series): 20 since.
        let before = Reading { at_seconds: 0.0, families: families(1000.0, 4000.0) };
        let after = Reading { at_seconds: 4.0, families: families(20.0, 4000.0) };
        let restarted = frame(Some(&before), &after);
        assert_eq!(restarted.services[0].tokens_per_second, Some(5.0));
        assert_eq!(restarted.nodes[0].link_transmit_bytes_per_second, Some(0.0), "nothing sent is zero");

        // A clock that did not move gives no rate rather than a division by zero.
        let same = Reading { at_seconds: 0.0, families: families(1.0, 1.0) };
        assert_eq!(frame(Some(&before), &same).rate_seconds, None);
    }

    #[test]
    fn services_on_demand_are_shown_in_the_state_the_router_says() {
        let mut state = Family::new("strix_router_service_state", MetricType::Gauge, "");
        for (service, now) in [("coder", "serving"), ("chat", "stopped")] {
            for each in ["serving", "starting", "stopping", "stopped"] {
                state.push(&[("node", "node1"), ("service", service), ("state", each)], f64::from(each == now));
            }
        }
        let mut families = families(1.0, 1.0);
        families.push(state);
        let frame = frame(None, &Reading { at_seconds: 0.0, families });
        let shown: Vec<(&str, &str)> = frame.on_demand.iter().map(|l| (l.service.as_str(), l.state.as_str())).collect();
        assert_eq!(shown, [("coder", "serving"), ("chat", "stopped")]);
    }

    #[test]
    fn a_series_new_in_the_second_reading_adds_no_rise() {
        let mut later = families(180.0, 10_000.0);
        let mut other = Family::new("strix_rdma_port_transmit_bytes_total", MetricType::Counter, "");
        other.push(&[("node", "node1"), ("device", "rocep2"), ("port", "1")], 1e12);
        later.push(other);
        let first = Reading { at_seconds: 0.0, families: families(100.0, 4000.0) };
        let frame = frame(Some(&first), &Reading { at_seconds: 2.0, families: later });
        assert_eq!(frame.nodes[0].link_transmit_bytes_per_second, Some(3000.0));
    }
}
