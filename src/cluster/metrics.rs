//! The cluster's metrics, read once: every node's telemetry (GPU memory, busy share, power,
//! temperature, RDMA port counters, from its host tree) and every service's engine `/metrics`,
//! each scraped by the node that runs its server ([`Telemetry`]), relabelled with its `node`,
//! `service` and `model`, and the router's own (its keys' requests and tokens, its starts on
//! demand: [`RouterScrape`] on the cluster's head, relabelled with its `node`), merged into one
//! family per name. What could not be read is said, never
//! left a silent hole: `strix_node_up` and `strix_engine_up` are 0 for it and
//! `strix_scrape_error` names why (a comment line too, in [`ClusterReading::exposition`]). The
//! engines' API key is the scrapes' bearer only: no family, label or comment holds it.
//!
//! `cluster metrics` prints or serves this, `cluster top` reads it twice for its rates, and
//! `cluster watch --metrics` serves it beside the watch's own families.

use std::time::Duration;

use futures_util::future::join_all;

use crate::metrics::{
    merge, parse, relabel, render, telemetry_families, Family, Merged, MetricType, NodeReading, ENGINE_LIMITS,
};
use crate::node::router::{RouterExposition, RouterScrape};
use crate::node::telemetry::{EngineScrape, Telemetry, TelemetryReport};
use crate::node::{Node, NodeCalls};
use crate::secret::Secret;

/// An engine's scrape deadline unless told otherwise.
pub const DEFAULT_SCRAPE_LIMIT: Duration = Duration::from_secs(5);
/// How long a node gets to answer beyond its scrapes' deadline (reading its host tree and its
/// records, the ssh round trip).
const ANSWER_SLACK: Duration = Duration::from_secs(10);

/// How to read the cluster.
#[derive(Debug, Clone)]
pub struct MetricsAsk {
    /// The engines' API key (`STRIX_API_KEY`), sent to each engine as its scrape's bearer.
    pub api_key: Option<Secret>,
    /// Each engine scrape's deadline (the node's whole answer gets [`ANSWER_SLACK`] more).
    pub scrape_limit: Duration,
    /// The services whose engine also gets a one-token probe, within the same deadline, by
    /// whichever node runs its server (`cluster watch`'s looks).
    pub probe: Vec<String>,
}

impl Default for MetricsAsk {
    fn default() -> MetricsAsk {
        MetricsAsk { api_key: None, scrape_limit: DEFAULT_SCRAPE_LIMIT, probe: Vec::new() }
    }
}

/// One look at every node.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterReading {
    /// In the cluster's order: the connected nodes, then those that could not be connected.
    pub nodes: Vec<NodeSeen>,
    /// The router's own metrics, as the first node that answered (the cluster's head, when it
    /// did) scraped them; None: not asked.
    pub router: Option<RouterSeen>,
}

/// The router's metrics as its node scraped them.
#[derive(Debug, Clone, PartialEq)]
pub struct RouterSeen {
    pub node: String,
    pub exposition: RouterExposition,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeSeen {
    pub node: String,
    /// Its answer, or why there is none.
    pub answer: Result<TelemetryReport, String>,
}

/// Every node's telemetry and its services' engines, as one list of families: what the watch's
/// endpoint serves. `cluster` are the connected nodes; `unreachable` those that could not be
/// connected, each with why (they are `strix_node_up 0`).
pub async fn cluster_families(
    cluster: &[&dyn Node],
    unreachable: &[(String, String)],
    ask: &MetricsAsk,
) -> Vec<Family> {
    read_cluster(cluster, unreachable, ask).await.families().families
}

/// Ask every node at once, each within the scrape deadline and [`ANSWER_SLACK`].
pub async fn read_cluster(cluster: &[&dyn Node], unreachable: &[(String, String)], ask: &MetricsAsk) -> ClusterReading {
    let call = Telemetry {
        engines: true,
        api_key: ask.api_key.clone(),
        limit_ms: u64::try_from(ask.scrape_limit.as_millis()).unwrap_or(u64::MAX),
        probe: ask.probe.clone(),
    };
    let limit = ask.scrape_limit.saturating_add(ANSWER_SLACK);
    let router = async {
        let head = cluster.first()?;
        let exposition = match tokio::time::timeout(limit, head.call(RouterScrape {})).await {
            Ok(Ok(exposition)) => exposition,
            Ok(Err(error)) => RouterExposition::Failed(error.to_string()),
            Err(_) => RouterExposition::Failed(format!("it did not answer within {}s", limit.as_secs())),
        };
        Some(RouterSeen { node: head.name().to_string(), exposition })
    };
    let answers = join_all(cluster.iter().map(|node| {
        let call = call.clone();
        async move {
            let answer = match tokio::time::timeout(limit, node.call(call)).await {
                Ok(Ok(report)) => Ok(report),
                Ok(Err(error)) => Err(error.to_string()),
                Err(_) => Err(format!("it did not answer within {}s", limit.as_secs())),
            };
            NodeSeen { node: node.name().to_string(), answer }
        }
    }));
    let (answers, router) = futures_util::join!(answers, router);
    let mut nodes = answers;
    nodes.extend(unreachable.iter().map(|(node, why)| NodeSeen { node: node.clone(), answer: Err(why.clone()) }));
    ClusterReading { nodes, router }
}

impl ClusterReading {
    /// The families: the nodes' telemetry, whether each engine was read and why not, then every
    /// engine's own, relabelled. What the merge left out is in [`Merged::left_out`].
    pub fn families(&self) -> Merged {
        self.families_with(Vec::new())
    }

    /// [`Self::families`] with `also` (the watch's own) merged in.
    fn families_with(&self, also: Vec<Family>) -> Merged {
        let readings: Vec<NodeReading> = self
            .nodes
            .iter()
            .map(|seen| NodeReading { node: &seen.node, telemetry: seen.answer.as_ref().ok().map(|r| &r.host) })
            .collect();
        let mut engine_up = Family::new(
            "strix_engine_up",
            MetricType::Gauge,
            "Whether the service's engine answered its /metrics (1) or not (0), scraped by its node.",
        );
        let mut errors = Family::new(
            "strix_scrape_error",
            MetricType::Gauge,
            "A reading that failed this time (1), and why: a node's telemetry (no service label) or a service's \
             engine.",
        );
        let mut engines = Vec::new();
        for seen in &self.nodes {
            let node = seen.node.as_str();
            let report = match &seen.answer {
                Ok(report) => report,
                Err(why) => {
                    errors.push(&[("node", node), ("why", why)], 1.0);
                    continue;
                }
            };
            for engine in &report.engines {
                let labels = [("node", node), ("service", engine.service.as_str()), ("model", engine.model.as_str())];
                let parsed = match &engine.scrape {
                    EngineScrape::Metrics(text) => {
                        parse(text, &ENGINE_LIMITS).map_err(|e| format!("its metrics came back unreadable: {e}"))
                    }
                    EngineScrape::Failed(why) => Err(why.clone()),
                };
                match parsed {
                    Ok(mut families) => {
                        engine_up.push(&labels, 1.0);
                        relabel(&mut families, &labels);
                        engines.push(families);
                    }
                    Err(why) => {
                        engine_up.push(&labels, 0.0);
                        let mut with_why = labels.to_vec();
                        with_why.push(("why", why.as_str()));
                        errors.push(&with_why, 1.0);
                    }
                }
            }
        }
        if let Some(RouterSeen { node, exposition: RouterExposition::Metrics(text) }) = &self.router {
            // The router's own names are ours (`strix_router_…`): its node says where it runs.
            if let Ok(mut families) = parse(text, &ENGINE_LIMITS) {
                relabel(&mut families, &[("node", node.as_str())]);
                engines.push(families);
            }
        }
        let ours: Vec<Family> = [engine_up, errors].into_iter().filter(|f| !f.samples.is_empty()).collect();
        merge([telemetry_families(&readings), ours].into_iter().chain(engines).chain([also]))
    }

    /// Prometheus's text format, what failed and what the merge left out first as comment lines.
    pub fn exposition(&self) -> String {
        self.exposition_with(Vec::new())
    }

    /// [`Self::exposition`] with `also` (the watch's own families) merged in.
    pub fn exposition_with(&self, also: Vec<Family>) -> String {
        let merged = self.families_with(also);
        let mut text = String::new();
        for seen in &self.nodes {
            match &seen.answer {
                Err(why) => text.push_str(&comment(&format!("{}: no telemetry: {why}", seen.node))),
                Ok(report) => {
                    for engine in &report.engines {
                        if let EngineScrape::Failed(why) = &engine.scrape {
                            let what = format!("{} on {}: no engine metrics: {why}", engine.service, seen.node);
                            text.push_str(&comment(&what));
                        }
                    }
                }
            }
        }
        if let Some(RouterSeen { node, exposition: RouterExposition::Failed(why) }) = &self.router {
            text.push_str(&comment(&format!("the router on {node}: no metrics: {why}")));
        }
        for why in &merged.left_out {
            text.push_str(&comment(&format!("left out: {why}")));
        }
        text.push_str(&render(&merged.families));
        text
    }
}

/// One comment line (a line feed in `what` would start a line Prometheus reads).
fn comment(what: &str) -> String {
    format!("# {}\n", what.replace(['\n', '\r'], " "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::telemetry::{NodeTelemetry, PortTraffic};
    use crate::node::telemetry::EngineReading;

    fn reading() -> ClusterReading {
        let host = NodeTelemetry {
            ports: vec![PortTraffic {
                device: "rocep194s0f0".into(),
                port: 1,
                transmit_bytes: Some(4000),
                ..Default::default()
            }],
            ..Default::default()
        };
        let engine = |service: &str, scrape: EngineScrape| EngineReading {
            service: service.into(),
            model: "/models/tiny.gguf".into(),
            engine: crate::serving::llama::LLAMA_CPP,
            address: "192.168.2.1:8001".parse().unwrap(),
            scrape,
            probe: None,
        };
        let metrics = "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 2\n";
        ClusterReading {
            nodes: vec![
                NodeSeen {
                    node: "node1".into(),
                    answer: Ok(TelemetryReport {
                        boot_id: None,
                        host,
                        engines: vec![
                            engine("tiny", EngineScrape::Metrics(metrics.into())),
                            engine("gone", EngineScrape::Failed("nothing listens at 192.168.2.1:8001".into())),
                        ],
                    }),
                },
                NodeSeen { node: "node2".into(), answer: Err("ssh: Connection refused\nagain".into()) },
            ],
            router: Some(RouterSeen {
                node: "node1".into(),
                exposition: RouterExposition::Metrics(
                    "# HELP strix_router_starts_total s\n# TYPE strix_router_starts_total counter\n\
                     strix_router_starts_total{service=\"tiny\"} 1\n"
                        .into(),
                ),
            }),
        }
    }

    #[test]
    fn every_node_and_engine_is_said_read_or_why_not() {
        let merged = reading().families();
        assert!(merged.left_out.is_empty(), "{:?}", merged.left_out);
        let find = |name: &str| merged.families.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("{name}"));
        let ups: Vec<(Option<&str>, f64)> =
            find("strix_node_up").samples.iter().map(|s| (s.label("node"), s.value)).collect();
        assert_eq!(ups, [(Some("node1"), 1.0), (Some("node2"), 0.0)]);
        let engines: Vec<(Option<&str>, f64)> =
            find("strix_engine_up").samples.iter().map(|s| (s.label("service"), s.value)).collect();
        assert_eq!(engines, [(Some("tiny"), 1.0), (Some("gone"), 0.0)]);
        let errors = &find("strix_scrape_error").samples;
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[0].label("why"), Some("nothing listens at 192.168.2.1:8001"));
        assert_eq!((errors[1].label("node"), errors[1].label("service")), (Some("node2"), None));
        let running = &find("llamacpp:requests_processing").samples[0];
        assert_eq!(
            running.labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
            ["node=node1", "service=tiny", "model=/models/tiny.gguf"]
        );
        let port = &find("strix_rdma_port_transmit_bytes_total").samples[0];
        assert_eq!((port.label("node"), port.value), (Some("node1"), 4000.0));
        let started = &find("strix_router_starts_total").samples[0];
        assert_eq!(
            (started.label("service"), started.label("node"), started.value),
            (Some("tiny"), Some("node1"), 1.0)
        );
    }

    #[tokio::test]
    async fn every_node_is_asked_through_its_agent_and_one_that_fails_is_named() {
        let nodes = crate::cluster::testing::nodes(&["node1", "node2"]);
        let device = nodes[0].host_root.join("sys/class/drm/card0/device");
        std::fs::create_dir_all(&device).unwrap();
        std::fs::write(device.join("gpu_busy_percent"), "64\n").unwrap();
        let lost = crate::cluster::testing::failing(&nodes[1].node, |_| true);
        let cluster: [&dyn Node; 2] = [&nodes[0].node, &lost];
        let unreachable = [("node3".to_string(), "ssh: No route to host".to_string())];
        let reading = read_cluster(&cluster, &unreachable, &MetricsAsk::default()).await;
        let seen: Vec<(&str, bool)> = reading.nodes.iter().map(|n| (n.node.as_str(), n.answer.is_ok())).collect();
        assert_eq!(seen, [("node1", true), ("node2", false), ("node3", false)]);
        let merged = reading.families();
        let busy = merged.families.iter().find(|f| f.name == "strix_gpu_busy_ratio").expect("node1's busy share");
        assert_eq!((busy.samples[0].label("node"), busy.samples[0].value), (Some("node1"), 0.64));
        let errors = merged.families.iter().find(|f| f.name == "strix_scrape_error").expect("the failures");
        let why: Vec<(Option<&str>, Option<&str>)> =
            errors.samples.iter().map(|s| (s.label("node"), s.label("why"))).collect();
        assert_eq!(
            why,
            [
                (Some("node2"), Some("node node2: the connection was lost")),
                (Some("node3"), Some("ssh: No route to host"))
            ]
        );
        assert!(merged.families.iter().all(|f| f.name != "strix_engine_up"), "no service is recorded");
    }

    #[test]
    fn the_exposition_names_what_failed_in_comments_and_parses_back() {
        let text = reading().exposition();
        assert!(text.starts_with("# gone on node1"), "{text}");
        assert!(text.contains("# gone on node1: no engine metrics: nothing listens at 192.168.2.1:8001\n"), "{text}");
        assert!(text.contains("# node2: no telemetry: ssh: Connection refused again\n"), "{text}");
        let families = parse(&text, &ENGINE_LIMITS).unwrap();
        assert!(families.iter().any(|f| f.name == "strix_scrape_error"));
    }
}
