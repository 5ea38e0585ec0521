//! The summary statistics `vllm bench serve` prints for each latency (numpy's): mean, median,
//! standard deviation (population: `np.std`, ddof 0) and percentiles by linear interpolation
//! between the closest ranks (`np.percentile`'s default method, "linear": the p-th percentile of
//! n sorted values sits at rank (n-1)·p/100). An empty list gives zeros, as vLLM's `np.mean(x or
//! 0)` does.

use serde::{Deserialize, Serialize};

/// One latency's distribution over a run, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Distribution {
    pub mean: f64,
    pub median: f64,
    pub std: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

impl Distribution {
    /// Of `values` (seconds), in milliseconds.
    pub fn of_seconds(values: &[f64]) -> Distribution {
        let mut sorted: Vec<f64> = values.iter().map(|value| value * 1000.0).filter(|v| v.is_finite()).collect();
        sorted.sort_by(f64::total_cmp);
        Distribution {
            mean: mean(&sorted),
            median: percentile(&sorted, 50.0),
            std: std(&sorted),
            p50: percentile(&sorted, 50.0),
            p90: percentile(&sorted, 90.0),
            p99: percentile(&sorted, 99.0),
        }
    }
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.iter().sum::<f64>() / values.len() as f64
}

fn std(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mean = mean(values);
    (values.iter().map(|value| (value - mean).powi(2)).sum::<f64>() / values.len() as f64).sqrt()
}

/// `np.percentile(sorted, p)` with the default ("linear") method; `sorted` ascending.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let rank = (n - 1) as f64 * p.clamp(0.0, 100.0) / 100.0;
            let below = rank.floor() as usize;
            let above = (below + 1).min(n - 1);
            let fraction = rank - below as f64;
            sorted[below] + (sorted[above] - sorted[below]) * fraction
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn percentiles_match_numpy_linear() {
        // np.percentile([1, 2, 3, 4], [50, 90, 99]) == [2.5, 3.7, 3.97]
        let values = [1.0, 2.0, 3.0, 4.0];
        assert!(close(percentile(&values, 50.0), 2.5));
        assert!(close(percentile(&values, 90.0), 3.7));
        assert!(close(percentile(&values, 99.0), 3.97));
        assert!(close(percentile(&values, 0.0), 1.0));
        assert!(close(percentile(&values, 100.0), 4.0));
        // np.percentile(range(1, 11), 90) == 9.1
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        assert!(close(percentile(&ten, 90.0), 9.1));
        assert!(close(percentile(&[7.0], 99.0), 7.0));
        assert_eq!(percentile(&[], 50.0), 0.0);
    }

    #[test]
    fn distribution_in_milliseconds_with_population_std() {
        // Seconds 0.010, 0.020, 0.030, 0.040 → ms; np.std([10, 20, 30, 40]) == 11.180339887...
        let distribution = Distribution::of_seconds(&[0.040, 0.010, 0.030, 0.020]);
        assert!(close(distribution.mean, 25.0));
        assert!(close(distribution.median, 25.0));
        assert!(close(distribution.p50, 25.0));
        assert!(close(distribution.p90, 37.0));
        assert!(close(distribution.p99, 39.7));
        assert!(close(distribution.std, 125.0f64.sqrt()));
        assert_eq!(Distribution::of_seconds(&[]), Distribution::default());
    }
}
