//! A metric family as Prometheus's text format has it: a name, its HELP and TYPE, and its samples
//! (a histogram's `_bucket`, `_sum` and `_count` lines, a summary's quantiles, are samples of the
//! one family).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
    Summary,
    /// No TYPE line.
    Untyped,
}

impl MetricType {
    /// As a TYPE line spells it.
    pub fn name(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
            MetricType::Summary => "summary",
            MetricType::Untyped => "untyped",
        }
    }

    pub fn parse(word: &str) -> Option<MetricType> {
        [MetricType::Counter, MetricType::Gauge, MetricType::Histogram, MetricType::Summary, MetricType::Untyped]
            .into_iter()
            .find(|kind| kind.name() == word)
    }

    /// The suffixes a sample's name may add to its family's name.
    pub fn suffixes(self) -> &'static [&'static str] {
        match self {
            MetricType::Histogram => &["_bucket", "_sum", "_count"],
            MetricType::Summary => &["_sum", "_count"],
            _ => &[],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Family {
    pub name: String,
    /// The HELP text, unescaped.
    pub help: Option<String>,
    pub kind: MetricType,
    pub samples: Vec<Sample>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The family's name, or it with a histogram's or summary's suffix.
    pub name: String,
    /// Names and unescaped values, in the order given.
    pub labels: Vec<(String, String)>,
    pub value: f64,
    /// Milliseconds since the epoch, when the line gives one.
    pub timestamp_ms: Option<i64>,
}

impl Family {
    /// An empty family with its HELP.
    pub fn new(name: &str, kind: MetricType, help: &str) -> Family {
        Family { name: name.to_string(), help: Some(help.to_string()), kind, samples: Vec::new() }
    }

    /// Add a sample named as the family, with these labels.
    pub fn push(&mut self, labels: &[(&str, &str)], value: f64) {
        self.push_named("", labels, value);
    }

    /// Add a sample named as the family with `suffix` (a histogram's `_bucket`, `_sum` or
    /// `_count`), with these labels.
    pub fn push_named(&mut self, suffix: &str, labels: &[(&str, &str)], value: f64) {
        let labels = labels.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect();
        self.samples.push(Sample { name: format!("{}{suffix}", self.name), labels, value, timestamp_ms: None });
    }

    /// Whether a sample called `name` belongs to this family (its name, or it with one of its
    /// type's suffixes).
    pub fn owns(&self, name: &str) -> bool {
        name == self.name
            || name.strip_prefix(self.name.as_str()).is_some_and(|suffix| self.kind.suffixes().contains(&suffix))
    }
}

impl Sample {
    /// The value of label `name`.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// What tells this series from every other: its name and its labels, in name order.
    pub fn series_key(&self) -> (String, Vec<(String, String)>) {
        let mut labels = self.labels.clone();
        labels.sort();
        (self.name.clone(), labels)
    }
}

/// The sum of the values of `name`'s samples over every label set, as a family list holds them;
/// None when no sample has that name.
pub fn sum_of(families: &[Family], name: &str) -> Option<f64> {
    let mut values = families.iter().flat_map(|family| &family.samples).filter(|sample| sample.name == name).peekable();
    values.peek()?;
    Some(values.map(|sample| sample.value).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_owns_its_suffixed_samples_a_gauge_only_its_name() {
        let histogram = Family::new("vllm:e2e_request_latency_seconds", MetricType::Histogram, "");
        assert!(histogram.owns("vllm:e2e_request_latency_seconds_bucket"));
        assert!(histogram.owns("vllm:e2e_request_latency_seconds_count"));
        assert!(!histogram.owns("vllm:e2e_request_latency_seconds_created"));
        let gauge = Family::new("up", MetricType::Gauge, "");
        assert!(gauge.owns("up") && !gauge.owns("up_sum") && !gauge.owns("u"));
        assert_eq!(MetricType::parse("summary"), Some(MetricType::Summary));
        assert_eq!(MetricType::parse("Gauge"), None);
    }

    #[test]
    fn sums_a_name_over_its_label_sets() {
        let mut family = Family::new("vllm:num_requests_running", MetricType::Gauge, "");
        family.push(&[("engine", "0")], 2.0);
        family.push(&[("engine", "1")], 3.0);
        assert_eq!(sum_of(&[family], "vllm:num_requests_running"), Some(5.0));
        assert_eq!(sum_of(&[], "vllm:num_requests_running"), None);
    }
}
