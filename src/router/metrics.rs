//! The router's own metrics (`GET /metrics`, Prometheus's text format): per key the requests it
//! let through and the tokens their answers counted, the refusals by why; per service started on
//! demand its starts, the starts that failed, the stops (for another's room, or idle), the
//! seconds each start took (a histogram) and the state it is in. Keys are named, never shown.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::metrics::{Family, MetricType};

/// The start histogram's bounds, in seconds: a tiny model in a second, a large one in minutes.
const START_BUCKETS: [f64; 11] = [1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0];

/// Why the router refused a request before any engine saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RequestRefusal {
    /// No key, or one the router does not take (401).
    Unauthorized,
    /// A model the key may not use (403).
    Forbidden,
    /// Past the key's requests or tokens a minute (429).
    RateLimited,
}

impl RequestRefusal {
    fn name(self) -> &'static str {
        match self {
            RequestRefusal::Unauthorized => "unauthorized",
            RequestRefusal::Forbidden => "forbidden",
            RequestRefusal::RateLimited => "rate_limited",
        }
    }
}

/// Why the router stopped a service it started on demand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StopReason {
    /// Another service needed its room.
    Room,
    /// No request for its `--idle`.
    Idle,
}

impl StopReason {
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Room => "room",
            StopReason::Idle => "idle",
        }
    }
}

#[derive(Default)]
struct Starts {
    started: u64,
    failed: u64,
    /// Per bucket of [`START_BUCKETS`], the starts that took at most its bound.
    buckets: [u64; START_BUCKETS.len()],
    seconds: f64,
}

#[derive(Default)]
struct Counts {
    /// (key, model) → requests let through, and the tokens their answers counted.
    requests: BTreeMap<(String, String), u64>,
    tokens: BTreeMap<(String, String), u64>,
    refused: BTreeMap<(String, RequestRefusal), u64>,
    starts: BTreeMap<String, Starts>,
    stops: BTreeMap<(String, StopReason), u64>,
}

/// Every count since the router started.
#[derive(Default)]
pub struct RouterMetrics(Mutex<Counts>);

impl RouterMetrics {
    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn request(&self, key: &str, model: &str) {
        *self.counts().requests.entry((key.to_string(), model.to_string())).or_default() += 1;
    }

    pub fn tokens(&self, key: &str, model: &str, tokens: u64) {
        let mut counts = self.counts();
        let count = counts.tokens.entry((key.to_string(), model.to_string())).or_default();
        *count = count.saturating_add(tokens);
    }

    /// A refusal of `key` (the key's name; `unknown` when the router did not take it).
    pub fn refused(&self, key: &str, why: RequestRefusal) {
        *self.counts().refused.entry((key.to_string(), why)).or_default() += 1;
    }

    pub fn started(&self, service: &str, took: Duration) {
        let mut counts = self.counts();
        let starts = counts.starts.entry(service.to_string()).or_default();
        starts.started += 1;
        starts.seconds += took.as_secs_f64();
        for (bound, count) in START_BUCKETS.iter().zip(starts.buckets.iter_mut()) {
            if took.as_secs_f64() <= *bound {
                *count += 1;
            }
        }
    }

    pub fn start_failed(&self, service: &str) {
        self.counts().starts.entry(service.to_string()).or_default().failed += 1;
    }

    pub fn stopped(&self, service: &str, why: StopReason) {
        *self.counts().stops.entry((service.to_string(), why)).or_default() += 1;
    }

    /// The families, with each on-demand service's `state` now.
    pub fn families(&self, states: &[(String, &'static str)]) -> Vec<Family> {
        let counts = self.counts();
        let mut requests = Family::new(
            "strix_router_requests_total",
            MetricType::Counter,
            "Requests the router let through to a service, by key and model.",
        );
        for ((key, model), count) in &counts.requests {
            requests.push(&[("key", key), ("model", model)], *count as f64);
        }
        let mut tokens = Family::new(
            "strix_router_tokens_total",
            MetricType::Counter,
            "Tokens the engines counted in their answers (usage.total_tokens), by key and model.",
        );
        for ((key, model), count) in &counts.tokens {
            tokens.push(&[("key", key), ("model", model)], *count as f64);
        }
        let mut refused = Family::new(
            "strix_router_refused_total",
            MetricType::Counter,
            "Requests the router refused before any engine saw them, by key and why.",
        );
        for ((key, why), count) in &counts.refused {
            refused.push(&[("key", key), ("reason", why.name())], *count as f64);
        }
        let mut started =
            Family::new("strix_router_starts_total", MetricType::Counter, "Starts of a service on demand that served.");
        let mut failed =
            Family::new("strix_router_start_failures_total", MetricType::Counter, "Starts on demand that failed.");
        let mut seconds = Family::new(
            "strix_router_start_seconds",
            MetricType::Histogram,
            "Seconds a start on demand took, from its launch until the service served (the stops that made room for it are counted as stops).",
        );
        for (service, starts) in &counts.starts {
            started.push(&[("service", service)], starts.started as f64);
            failed.push(&[("service", service)], starts.failed as f64);
            for (bound, count) in START_BUCKETS.iter().zip(starts.buckets) {
                let le = crate::metrics::render::format_value(*bound);
                seconds.push_named("_bucket", &[("service", service), ("le", &le)], count as f64);
            }
            seconds.push_named("_bucket", &[("service", service), ("le", "+Inf")], starts.started as f64);
            seconds.push_named("_sum", &[("service", service)], starts.seconds);
            seconds.push_named("_count", &[("service", service)], starts.started as f64);
        }
        let mut stops = Family::new(
            "strix_router_stops_total",
            MetricType::Counter,
            "Services started on demand that the router stopped, by why: room (for another's start) or idle.",
        );
        for ((service, why), count) in &counts.stops {
            stops.push(&[("service", service), ("reason", why.name())], *count as f64);
        }
        let mut state = Family::new(
            "strix_router_service_state",
            MetricType::Gauge,
            "Each service started on demand: 1 for the state it is in (serving, starting, stopping, stopped).",
        );
        for (service, now) in states {
            for each in super::demand::STATES {
                state.push(&[("service", service), ("state", each)], if each == *now { 1.0 } else { 0.0 });
            }
        }
        vec![requests, tokens, refused, started, failed, seconds, stops, state]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{parse, render, ENGINE_LIMITS};

    #[test]
    fn counts_render_as_prometheus_reads_them() {
        let metrics = RouterMetrics::default();
        metrics.request("alice", "coder");
        metrics.request("alice", "coder");
        metrics.tokens("alice", "coder", 31);
        metrics.refused("unknown", RequestRefusal::Unauthorized);
        metrics.started("coder", Duration::from_millis(4500));
        metrics.start_failed("chat");
        metrics.stopped("coder", StopReason::Idle);
        let text = render(&metrics.families(&[("coder".into(), "serving")]));
        for line in [
            "strix_router_requests_total{key=\"alice\",model=\"coder\"} 2\n",
            "strix_router_tokens_total{key=\"alice\",model=\"coder\"} 31\n",
            "strix_router_refused_total{key=\"unknown\",reason=\"unauthorized\"} 1\n",
            "strix_router_starts_total{service=\"coder\"} 1\n",
            "strix_router_start_failures_total{service=\"chat\"} 1\n",
            "strix_router_start_seconds_bucket{service=\"coder\",le=\"2\"} 0\n",
            "strix_router_start_seconds_bucket{service=\"coder\",le=\"5\"} 1\n",
            "strix_router_start_seconds_bucket{service=\"coder\",le=\"+Inf\"} 1\n",
            "strix_router_start_seconds_sum{service=\"coder\"} 4.5\n",
            "strix_router_stops_total{service=\"coder\",reason=\"idle\"} 1\n",
            "strix_router_service_state{service=\"coder\",state=\"serving\"} 1\n",
            "strix_router_service_state{service=\"coder\",state=\"stopped\"} 0\n",
        ] {
            assert!(text.contains(line), "{line} in:\n{text}");
        }
        assert!(parse(&text, &ENGINE_LIMITS).is_ok());
    }
}
