//! The watch's own metrics, beside the engines' and the nodes': how many probes it sent and how
//! many failed, how many restarts it made, how many GPU hangs its nodes' kernels told, and its state as one gauge per state (1 for the one it
//! is in), each labelled with the service and its model.

use super::machine::{State, Watcher};
use crate::metrics::{Family, MetricType};

pub fn watch_families(service: &str, model: &str, watcher: &Watcher) -> Vec<Family> {
    let labels = [("service", service), ("model", model)];
    let tally = watcher.tally();
    let mut probes =
        Family::new("strix_watch_probes_total", MetricType::Counter, "Short completion probes the watch sent.");
    probes.push(&labels, tally.probes as f64);
    let mut failures = Family::new(
        "strix_watch_probe_failures_total",
        MetricType::Counter,
        "Probes that failed or got no answer in time.",
    );
    failures.push(&labels, tally.probe_failures as f64);
    let mut restarts = Family::new(
        "strix_watch_restarts_total",
        MetricType::Counter,
        "Relaunches of the whole service the watch decided.",
    );
    restarts.push(&labels, tally.restarts as f64);
    let mut gpu_hangs = Family::new(
        "strix_watch_gpu_hangs_total",
        MetricType::Counter,
        "GPU hangs the kernels of the service's nodes told (amdgpu: MES, ring timeouts, page faults, resets).",
    );
    gpu_hangs.push(&labels, tally.gpu_hangs as f64);
    let mut state =
        Family::new("strix_watch_state", MetricType::Gauge, "The service's state as the watch sees it (1: in it).");
    for each in State::ALL {
        let value = if each == watcher.state() { 1.0 } else { 0.0 };
        state.push(&[("service", service), ("model", model), ("state", each.name())], value);
    }
    vec![probes, failures, restarts, gpu_hangs, state]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::machine::Start;
    use crate::watch::policy::WatchPolicy;

    #[test]
    fn one_state_is_set_and_counters_end_in_total() {
        let watcher = Watcher::new(WatchPolicy::default(), Start::Serving);
        let families = watch_families("qwen", "Qwen/Qwen3-0.6B", &watcher);
        let state = families.iter().find(|f| f.name == "strix_watch_state").unwrap();
        assert_eq!(state.samples.len(), State::ALL.len());
        let set: Vec<&str> = state.samples.iter().filter(|s| s.value == 1.0).filter_map(|s| s.label("state")).collect();
        assert_eq!(set, ["serving"]);
        assert!(families.iter().filter(|f| f.kind == MetricType::Counter).all(|f| f.name.ends_with("_total")));
        assert!(families.iter().flat_map(|f| &f.samples).all(|s| s.label("service") == Some("qwen")));
    }
}
