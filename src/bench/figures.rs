//! The figures of one load level, computed as `vllm bench serve` computes them
//! (`calculate_metrics` in vllm/benchmarks/serve.py), from each request's outcome and the level's
//! wall-clock duration (from sending the first request to the last answer's end):
//!
//! - completed / failed requests; total input tokens (what the completed requests sent) and
//!   total output tokens (what they generated, as the server counted);
//! - request throughput = completed / duration; output token throughput = output tokens /
//!   duration; total token throughput = (input + output tokens) / duration;
//! - TTFT per completed request; TPOT = (E2EL − TTFT) / (output tokens − 1) for requests with more
//!   than one output token; ITL = every gap between consecutive streamed messages, all requests
//!   pooled; E2EL per completed request; each summarized by [`Distribution`];
//! - peak output token throughput: the most tokens that arrived within one whole second counted
//!   from the first request's start, and the most requests in flight in any such second.

use serde::{Deserialize, Serialize};

use super::exchange::RequestOutcome;
use super::stats::Distribution;

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Figures {
    pub completed: u64,
    pub failed: u64,
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    /// Seconds.
    pub duration: f64,
    /// Requests per second.
    pub request_throughput: f64,
    /// Output tokens per second.
    pub output_throughput: f64,
    /// Input and output tokens per second.
    pub total_token_throughput: f64,
    pub max_output_tokens_per_s: f64,
    pub max_concurrent_requests: u64,
    /// Milliseconds.
    pub ttft_ms: Distribution,
    pub tpot_ms: Distribution,
    pub itl_ms: Distribution,
    pub e2el_ms: Distribution,
}

impl Figures {
    /// `duration` in seconds.
    pub fn of(outcomes: &[RequestOutcome], duration: f64) -> Figures {
        let completed: Vec<&RequestOutcome> = outcomes.iter().filter(|outcome| outcome.success).collect();
        let total_input_tokens: u64 = completed.iter().map(|outcome| outcome.prompt_tokens).sum();
        let total_output_tokens: u64 = completed.iter().map(|outcome| outcome.output_tokens).sum();
        let per_second = |count: f64| if duration > 0.0 { count / duration } else { 0.0 };
        let ttfts: Vec<f64> = completed.iter().map(|outcome| outcome.ttft).collect();
        let tpots: Vec<f64> = completed
            .iter()
            .filter(|outcome| outcome.output_tokens > 1)
            .map(|outcome| (outcome.latency - outcome.ttft) / (outcome.output_tokens - 1) as f64)
            .collect();
        let itls: Vec<f64> = completed.iter().flat_map(|outcome| outcome.itl.iter().copied()).collect();
        let e2els: Vec<f64> = completed.iter().map(|outcome| outcome.latency).collect();
        let (max_output_tokens_per_s, max_concurrent_requests) = peaks(&completed);
        Figures {
            completed: completed.len() as u64,
            failed: (outcomes.len() - completed.len()) as u64,
            total_input_tokens,
            total_output_tokens,
            duration,
            request_throughput: per_second(completed.len() as f64),
            output_throughput: per_second(total_output_tokens as f64),
            total_token_throughput: per_second((total_input_tokens + total_output_tokens) as f64),
            max_output_tokens_per_s,
            max_concurrent_requests,
            ttft_ms: Distribution::of_seconds(&ttfts),
            tpot_ms: Distribution::of_seconds(&tpots),
            itl_ms: Distribution::of_seconds(&itls),
            e2el_ms: Distribution::of_seconds(&e2els),
        }
    }
}

/// vLLM's one-second buckets from the earliest start: tokens arrived in each, requests active in
/// each (a request counts in every bucket from its start's to its end's).
fn peaks(completed: &[&RequestOutcome]) -> (f64, u64) {
    let Some(origin) = completed.iter().map(|outcome| outcome.start).reduce(f64::min) else {
        return (0.0, 0);
    };
    let end = completed.iter().map(|outcome| outcome.start + outcome.latency).fold(origin, f64::max);
    let buckets = (end - origin).ceil() as usize + 1;
    let mut tokens = vec![0u64; buckets];
    let mut active = vec![0u64; buckets];
    for outcome in completed {
        for at in outcome.token_times() {
            let bucket = (at - origin).floor();
            if bucket >= 0.0 && (bucket as usize) < buckets {
                tokens[bucket as usize] += 1;
            }
        }
        let last = ((outcome.start + outcome.latency - origin).floor().max(0.0) as usize).min(buckets - 1);
        let first = ((outcome.start - origin).floor().max(0.0) as usize).min(last);
        for requests in &mut active[first..=last] {
            *requests += 1;
        }
    }
    (tokens.iter().copied().max().unwrap_or(0) as f64, active.iter().copied().max().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(start: f64, ttft: f64, itl: Vec<f64>, output_tokens: u64) -> RequestOutcome {
        let latency = ttft + itl.iter().sum::<f64>();
        RequestOutcome { success: true, start, ttft, itl, latency, output_tokens, prompt_tokens: 10, error: None }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// Two requests with known timings, against vLLM's formulas worked by hand.
    #[test]
    fn known_timings_give_vllms_figures() {
        let outcomes = vec![
            outcome(0.0, 0.5, vec![0.1, 0.1, 0.1], 4),
            outcome(0.0, 1.0, vec![0.2, 0.2, 0.2], 4),
            RequestOutcome {
                success: false,
                start: 0.0,
                ttft: 0.0,
                itl: vec![],
                latency: 0.0,
                output_tokens: 0,
                prompt_tokens: 10,
                error: Some("HTTP 500".into()),
            },
        ];
        let figures = Figures::of(&outcomes, 2.0);
        assert_eq!((figures.completed, figures.failed), (2, 1));
        // Only completed requests count their tokens.
        assert_eq!((figures.total_input_tokens, figures.total_output_tokens), (20, 8));
        assert!(close(figures.request_throughput, 1.0));
        assert!(close(figures.output_throughput, 4.0));
        assert!(close(figures.total_token_throughput, 14.0));
        // TTFT 500 and 1000 ms.
        assert!(close(figures.ttft_ms.mean, 750.0));
        assert!(close(figures.ttft_ms.p99, 995.0));
        // TPOT = (E2EL - TTFT) / (4 - 1): 100 ms and 200 ms.
        assert!(close(figures.tpot_ms.mean, 150.0));
        assert!(close(figures.tpot_ms.median, 150.0));
        // ITL pooled: three of 100 ms, three of 200 ms.
        assert!(close(figures.itl_ms.mean, 150.0));
        assert!(close(figures.itl_ms.median, 150.0));
        assert!(close(figures.itl_ms.std, 50.0));
        // E2EL 800 ms and 1600 ms.
        assert!(close(figures.e2el_ms.mean, 1200.0));
        // Tokens at 0.5 0.6 0.7 0.8 and 1.0 1.2 1.4 1.6: 4 in second 0 and 4 in second 1; both
        // requests are active in seconds 0 and 1.
        assert!(close(figures.max_output_tokens_per_s, 4.0));
        assert_eq!(figures.max_concurrent_requests, 2);
    }

    #[test]
    fn one_token_requests_have_no_tpot_and_nothing_completed_is_all_zero() {
        let figures = Figures::of(&[outcome(0.0, 0.25, vec![], 1)], 0.5);
        assert_eq!(figures.tpot_ms, Distribution::default());
        assert!(close(figures.ttft_ms.p50, 250.0));
        assert!(close(figures.output_throughput, 2.0));
        let nothing = Figures::of(&[], 0.0);
        assert_eq!(nothing, Figures::default());
    }
}
