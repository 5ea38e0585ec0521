//! Every engine sample said where it comes from: `node` and `model` (and whatever else the caller
//! names) put in front of the engine's own labels, the engine's names untouched (`vllm:…`,
//! `llamacpp:…`, as their dashboards know them). An engine label of the same name is kept as
//! `exported_NAME`, as Prometheus itself keeps a target's clashing label.

use super::family::Family;

pub fn relabel(families: &mut [Family], labels: &[(&str, &str)]) {
    for sample in families.iter_mut().flat_map(|family| family.samples.iter_mut()) {
        for (name, _) in labels {
            let mut exported = format!("exported_{name}");
            while sample.labels.iter().any(|(known, _)| *known == exported) {
                exported.insert_str(0, "exported_");
            }
            if let Some(clash) = sample.labels.iter_mut().find(|(known, _)| known == name) {
                clash.0 = exported;
            }
        }
        let mut relabelled: Vec<(String, String)> =
            labels.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect();
        relabelled.append(&mut sample.labels);
        sample.labels = relabelled;
    }
}

#[cfg(test)]
mod tests {
    use super::super::family::MetricType;
    use super::*;

    #[test]
    fn node_and_model_come_first_and_a_clash_is_exported() {
        let mut family = Family::new("vllm:num_requests_running", MetricType::Gauge, "");
        family.push(&[("engine", "0"), ("model_name", "m")], 1.0);
        family.push(&[("node", "theirs"), ("exported_node", "older")], 2.0);
        let mut families = vec![family];
        relabel(&mut families, &[("node", "strix1"), ("model", "Qwen/Qwen3-0.6B")]);
        let labels = |index: usize| families[0].samples[index].labels.clone();
        let pairs =
            |list: &[(&str, &str)]| list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
        assert_eq!(
            labels(0),
            pairs(&[("node", "strix1"), ("model", "Qwen/Qwen3-0.6B"), ("engine", "0"), ("model_name", "m")])
        );
        assert_eq!(
            labels(1),
            pairs(&[
                ("node", "strix1"),
                ("model", "Qwen/Qwen3-0.6B"),
                ("exported_exported_node", "theirs"),
                ("exported_node", "older")
            ])
        );
        assert_eq!(families[0].name, "vllm:num_requests_running");
    }
}
