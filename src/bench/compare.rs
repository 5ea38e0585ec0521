//! `bench compare A B`: each figure of B as a ratio of A's, level by level (levels matched by
//! concurrency), named as `vllm bench serve` prints them, with which way is better, and what
//! differs between the two keys (the image, the layout, the model…) so the ratio is read for what
//! it is.

use serde::{Deserialize, Serialize};

use super::figures::Figures;
use super::result::BenchResult;
use super::stats::Distribution;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    /// What differs between A's key and B's: `image: X → Y`.
    pub differences: Vec<String>,
    pub levels: Vec<LevelComparison>,
    /// Concurrency levels only one of them has.
    pub unmatched: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelComparison {
    pub concurrency: u32,
    pub figures: Vec<FigureRatio>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FigureRatio {
    /// As vLLM prints it: `Output token throughput (tok/s)`.
    pub name: String,
    pub a: f64,
    pub b: f64,
    /// B / A (none when A is 0).
    pub ratio: Option<f64>,
    pub better: Better,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Better {
    Higher,
    Lower,
}

impl FigureRatio {
    /// B is better than A by this figure's sense (equal is neither).
    pub fn improved(&self) -> bool {
        match self.better {
            Better::Higher => self.b > self.a,
            Better::Lower => self.b < self.a,
        }
    }
}

/// Compare B against A.
pub fn compare(a: &BenchResult, b: &BenchResult) -> Comparison {
    let mut levels = Vec::new();
    let mut unmatched = Vec::new();
    for level in &a.levels {
        match b.level(level.concurrency) {
            Some(other) => levels.push(LevelComparison {
                concurrency: level.concurrency,
                figures: named(&level.figures)
                    .into_iter()
                    .zip(named(&other.figures))
                    .map(|((name, a, better), (_, b, _))| FigureRatio {
                        name: name.to_string(),
                        a,
                        b,
                        ratio: (a != 0.0).then(|| b / a),
                        better,
                    })
                    .collect(),
            }),
            None => unmatched.push(level.concurrency),
        }
    }
    unmatched
        .extend(b.levels.iter().map(|level| level.concurrency).filter(|concurrency| a.level(*concurrency).is_none()));
    Comparison { a: a.id.clone(), b: b.id.clone(), differences: differences(a, b), levels, unmatched }
}

/// Every figure with its name and sense, in vLLM's order.
pub fn named(figures: &Figures) -> Vec<(&'static str, f64, Better)> {
    let mut named = vec![
        ("Successful requests", figures.completed as f64, Better::Higher),
        ("Failed requests", figures.failed as f64, Better::Lower),
        ("Benchmark duration (s)", figures.duration, Better::Lower),
        ("Request throughput (req/s)", figures.request_throughput, Better::Higher),
        ("Output token throughput (tok/s)", figures.output_throughput, Better::Higher),
        ("Peak output token throughput (tok/s)", figures.max_output_tokens_per_s, Better::Higher),
        ("Total token throughput (tok/s)", figures.total_token_throughput, Better::Higher),
    ];
    let latencies: [(&'static [&'static str; 6], &Distribution); 4] = [
        (
            &["Mean TTFT (ms)", "Median TTFT (ms)", "Std TTFT (ms)", "P50 TTFT (ms)", "P90 TTFT (ms)", "P99 TTFT (ms)"],
            &figures.ttft_ms,
        ),
        (
            &["Mean TPOT (ms)", "Median TPOT (ms)", "Std TPOT (ms)", "P50 TPOT (ms)", "P90 TPOT (ms)", "P99 TPOT (ms)"],
            &figures.tpot_ms,
        ),
        (
            &["Mean ITL (ms)", "Median ITL (ms)", "Std ITL (ms)", "P50 ITL (ms)", "P90 ITL (ms)", "P99 ITL (ms)"],
            &figures.itl_ms,
        ),
        (
            &["Mean E2EL (ms)", "Median E2EL (ms)", "Std E2EL (ms)", "P50 E2EL (ms)", "P90 E2EL (ms)", "P99 E2EL (ms)"],
            &figures.e2el_ms,
        ),
    ];
    for (names, distribution) in latencies {
        let values = [
            distribution.mean,
            distribution.median,
            distribution.std,
            distribution.p50,
            distribution.p90,
            distribution.p99,
        ];
        named.extend(names.iter().zip(values).map(|(name, value)| (*name, value, Better::Lower)));
    }
    named
}

fn differences(a: &BenchResult, b: &BenchResult) -> Vec<String> {
    let (x, y) = (&a.key, &b.key);
    let mut out = Vec::new();
    let mut differ = |what: &str, left: String, right: String| {
        if left != right {
            out.push(format!("{what}: {left} → {right}"));
        }
    };
    differ("image", x.image.clone(), y.image.clone());
    differ("engine", x.engine.to_string(), y.engine.to_string());
    differ("model", x.model.to_string(), y.model.to_string());
    differ("layout", x.layout(), y.layout());
    differ(
        "lengths",
        format!("in {} / out {}", x.input_len, x.output_len),
        format!("in {} / out {}", y.input_len, y.output_len),
    );
    differ("prompts", x.prompts.to_string(), y.prompts.to_string());
    differ("requests per level", a.requests.to_string(), b.requests.to_string());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::result::tests::result;

    #[test]
    fn ratios_are_b_over_a_level_by_level() {
        let a = result("sha256:aaaa", "2026-11-20T10:00:00Z", &[(1, 100.0), (4, 300.0), (16, 500.0)]);
        let b = result("sha256:bbbb", "2026-11-21T10:00:00Z", &[(1, 50.0), (4, 330.0), (8, 1.0)]);
        let comparison = compare(&a, &b);
        assert_eq!(comparison.levels.iter().map(|level| level.concurrency).collect::<Vec<_>>(), vec![1, 4]);
        assert_eq!(comparison.unmatched, vec![16, 8]);
        let throughput = |concurrency: u32| {
            let level = comparison.levels.iter().find(|level| level.concurrency == concurrency).unwrap();
            level.figures.iter().find(|figure| figure.name == "Output token throughput (tok/s)").unwrap().clone()
        };
        assert_eq!(throughput(1).ratio, Some(0.5));
        assert!(!throughput(1).improved());
        assert!((throughput(4).ratio.unwrap() - 1.1).abs() < 1e-12);
        assert!(throughput(4).improved());
        // Equal TTFTs: ratio 1, not improved.
        let ttft = comparison.levels[0].figures.iter().find(|figure| figure.name == "P99 TTFT (ms)").unwrap();
        assert_eq!((ttft.ratio, ttft.improved(), ttft.better), (Some(1.0), false, Better::Lower));
        // A zero in A gives no ratio.
        let failed = comparison.levels[0].figures.iter().find(|figure| figure.name == "Failed requests").unwrap();
        assert_eq!(failed.ratio, None);
        assert_eq!(comparison.differences, vec!["image: sha256:aaaa → sha256:bbbb".to_string()]);
        assert_eq!(named(&a.levels[0].figures).len(), 7 + 4 * 6);
    }
}
