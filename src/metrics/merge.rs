//! Families from several sources (every rank's engine on every node, the nodes' telemetry, the
//! watch) as one exposition: each family once, with the first HELP and TYPE given for it, and each
//! series once. What cannot be merged is left out and said: a family whose type differs from the
//! one already taken, a series (name and labels) already given (Prometheus would refuse the whole
//! scrape for either).

use std::collections::{HashMap, HashSet};

use super::family::{Family, Sample};

#[derive(Debug, Default)]
pub struct Merged {
    pub families: Vec<Family>,
    /// What was left out, and why.
    pub left_out: Vec<String>,
}

pub fn merge(sources: impl IntoIterator<Item = Vec<Family>>) -> Merged {
    let mut merged = Merged::default();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let mut series: HashSet<(String, Vec<(String, String)>)> = HashSet::new();
    for family in sources.into_iter().flatten() {
        let Family { name, help, kind, samples } = family;
        let index = match by_name.get(&name) {
            Some(&index) => index,
            None => {
                merged.families.push(Family { name: name.clone(), help: None, kind, samples: Vec::new() });
                by_name.insert(name.clone(), merged.families.len() - 1);
                merged.families.len() - 1
            }
        };
        let Some(taken) = merged.families.get_mut(index) else { continue };
        if taken.kind != kind {
            merged.left_out.push(format!(
                "{} sample(s) of {name}: it is a {} here, a {} where it was first given",
                samples.len(),
                kind.name(),
                taken.kind.name()
            ));
            continue;
        }
        if taken.help.is_none() {
            taken.help = help;
        }
        for sample in samples {
            if series.insert(sample.series_key()) {
                taken.samples.push(sample);
            } else {
                merged.left_out.push(format!("{}: given twice", describe(&sample)));
            }
        }
    }
    merged
}

fn describe(sample: &Sample) -> String {
    let labels: Vec<String> = sample.labels.iter().map(|(name, value)| format!("{name}={value:?}")).collect();
    format!("{}{{{}}}", sample.name, labels.join(","))
}

#[cfg(test)]
mod tests {
    use super::super::family::MetricType;
    use super::*;

    fn gauge(name: &str, node: &str, value: f64) -> Family {
        let mut family = Family::new(name, MetricType::Gauge, &format!("{name} from {node}"));
        family.push(&[("node", node)], value);
        family
    }

    #[test]
    fn one_family_per_name_every_series_once() {
        let first = vec![gauge("vllm:num_requests_running", "a", 1.0), gauge("up", "a", 1.0)];
        let second = vec![gauge("vllm:num_requests_running", "b", 2.0), gauge("vllm:num_requests_running", "a", 9.0)];
        let mut counter = Family::new("up", MetricType::Counter, "");
        counter.push(&[("node", "c")], 1.0);
        let merged = merge([first, second, vec![counter]]);
        let running = &merged.families[0];
        assert_eq!(running.help.as_deref(), Some("vllm:num_requests_running from a"));
        assert_eq!(running.samples.iter().map(|s| s.value).collect::<Vec<_>>(), [1.0, 2.0]);
        assert_eq!(merged.families.len(), 2);
        assert_eq!(
            merged.left_out,
            [
                "vllm:num_requests_running{node=\"a\"}: given twice".to_string(),
                "1 sample(s) of up: it is a counter here, a gauge where it was first given".to_string(),
            ]
        );
    }

    #[test]
    fn the_same_labels_in_another_order_are_the_same_series() {
        let mut first = Family::new("x", MetricType::Gauge, "");
        first.push(&[("a", "1"), ("b", "2")], 1.0);
        let mut second = Family::new("x", MetricType::Gauge, "");
        second.push(&[("b", "2"), ("a", "1")], 2.0);
        let merged = merge([vec![first], vec![second]]);
        assert_eq!((merged.families[0].samples.len(), merged.left_out.len()), (1, 1));
    }
}
