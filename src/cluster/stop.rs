//! `cluster stop [NAME] [--all]` (and `stop` on one node): a service by its name, whatever its
//! toolbox, stopped on every node that answers — the engine's server first everywhere (it drives
//! the workers: vLLM its Ray actors, llama-server the RPC servers), then everything else — and its
//! route removed from the router (which exits with the last route). Each node is named with what
//! it stopped or why it could not. The other services keep serving. Idempotent.

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use super::router::remove_routes;
use crate::error::{Error, MultiError, Result};
use crate::node::router::RouterState;
use crate::node::{Node, NodeCalls};
use crate::serving::service_name::{the_only_one, ServiceName};
use crate::serving::state::{ServeCheck, ServingState};
use crate::serving::stop::{ServeStop, ServeStopped, StopPart};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStop {
    pub node: String,
    pub stopped: Option<ServeStopped>,
    /// Why it could not be stopped (unreachable, its engine down…).
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopReport {
    /// The services stopped, by name (none: nothing was recorded to stop).
    #[serde(default)]
    pub services: Vec<String>,
    pub nodes: Vec<NodeStop>,
    /// The router once their routes went (None: not asked, the cluster's head did not answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router: Option<RouterState>,
    /// Why the router could not drop their routes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_error: Option<String>,
}

/// Which services a stop means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopTarget {
    /// This one.
    Named(ServiceName),
    /// The only one there is (several: a usage error listing them).
    TheOnlyOne,
    /// Every one.
    All,
}

impl StopReport {
    pub fn failed(&self) -> Vec<&NodeStop> {
        self.nodes.iter().filter(|n| n.error.is_some()).collect()
    }

    /// An error naming every node that could not be stopped.
    pub fn into_result(self) -> Result<StopReport> {
        let mut failed = MultiError::new("could not stop everything");
        for node in self.failed() {
            let error = Error::Node {
                node: node.node.clone(),
                message: node.error.clone().unwrap_or_default(),
                fix: Some("`strix-toolbox cluster stop` once the node answers".into()),
            };
            failed.push(&node.node, error);
        }
        if failed.is_empty() {
            Ok(self)
        } else {
            Err(failed.into())
        }
    }

    /// One sentence for the end of an error: `done` when every node stopped, else what is left.
    pub fn summary(&self, done: &str) -> String {
        let failed: Vec<String> =
            self.failed().iter().map(|n| format!("{}: {}", n.node, n.error.as_deref().unwrap_or("?"))).collect();
        if failed.is_empty() {
            format!("{done} on every node.")
        } else {
            format!(
                "Stopping failed on {}. Fix: `strix-toolbox cluster stop` once those nodes answer",
                failed.join("; ")
            )
        }
    }

    /// Another service's stop on the same nodes, added to this one's.
    fn merge(&mut self, other: StopReport) {
        self.services.extend(other.services);
        for theirs in other.nodes {
            match self.nodes.iter_mut().find(|ours| ours.node == theirs.node) {
                None => self.nodes.push(theirs),
                Some(ours) => {
                    ours.error = ours.error.take().or(theirs.error);
                    ours.stopped = match (ours.stopped.take(), theirs.stopped) {
                        (Some(a), Some(b)) => Some(a.and(b)),
                        (a, b) => a.or(b),
                    };
                }
            }
        }
    }
}

/// Stop the service `name` on `nodes`: the engine's server first on all, then everything else
/// on all (a node without its record has nothing to stop).
pub async fn stop_service(nodes: &[&dyn Node], name: &str) -> StopReport {
    stop_service_with(nodes, name, false).await
}

/// [`stop_service`], its processes killed `at_once` (SIGKILL without SIGTERM's grace: a server
/// the watch found stalled answers no SIGTERM).
pub async fn stop_service_with(nodes: &[&dyn Node], name: &str, at_once: bool) -> StopReport {
    let ask = |part| ServeStop { service: name.to_string(), part, at_once };
    let server = join_all(nodes.iter().map(|node| node.call(ask(StopPart::Server)))).await;
    let all = join_all(nodes.iter().map(|node| node.call(ask(StopPart::All)))).await;
    let nodes = nodes
        .iter()
        .zip(server.into_iter().zip(all))
        .map(|(node, (server, all))| match (server, all) {
            (Ok(first), Ok(second)) => {
                NodeStop { node: node.name().to_string(), stopped: Some(first.and(second)), error: None }
            }
            (Err(error), _) | (_, Err(error)) => {
                NodeStop { node: node.name().to_string(), stopped: None, error: Some(error.to_string()) }
            }
        })
        .collect();
    StopReport { services: vec![name.to_string()], nodes, router: None, router_error: None }
}

/// Every service recorded on `nodes`, by node (a node that cannot say is named with why).
pub async fn services_on(nodes: &[&dyn Node]) -> Vec<(String, Result<Vec<ServingState>>)> {
    let asks = nodes.iter().map(|node| node.call(ServeCheck::default()));
    let answers = join_all(asks).await;
    nodes.iter().zip(answers).map(|(node, answer)| (node.name().to_string(), answer.map(|c| c.services))).collect()
}

/// The names of every service recorded on any of `listed`'s nodes, sorted, each once.
pub fn names(listed: &[(String, Result<Vec<ServingState>>)]) -> Vec<String> {
    let mut names: Vec<String> = listed
        .iter()
        .filter_map(|(_, services)| services.as_ref().ok())
        .flatten()
        .map(|state| state.record.service.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Stop `target` on `nodes`, then drop its routes at `router` (the cluster's head, when it
/// answered). Usage error: no NAME while several services are recorded.
pub async fn stop_services(nodes: &[&dyn Node], router: Option<&dyn Node>, target: &StopTarget) -> Result<StopReport> {
    let listed = services_on(nodes).await;
    let recorded = names(&listed);
    let chosen: Vec<String> = match target {
        StopTarget::Named(name) => vec![name.to_string()],
        StopTarget::All => recorded.clone(),
        StopTarget::TheOnlyOne => {
            let names: Vec<&str> = recorded.iter().map(String::as_str).collect();
            the_only_one(&names, "strix-toolbox cluster stop NAME, or --all")?.map(str::to_string).into_iter().collect()
        }
    };
    let mut report = StopReport {
        services: Vec::new(),
        nodes: nodes
            .iter()
            .map(|node| NodeStop { node: node.name().to_string(), stopped: Some(ServeStopped::default()), error: None })
            .collect(),
        router: None,
        router_error: None,
    };
    for (node, services) in &listed {
        if let Err(error) = services {
            report.merge(StopReport {
                nodes: vec![NodeStop { node: node.clone(), stopped: None, error: Some(error.to_string()) }],
                ..StopReport::default()
            });
        }
    }
    for name in &chosen {
        report.merge(stop_service(nodes, name).await);
    }
    if let (Some(router), true) = (router, !chosen.is_empty() || *target == StopTarget::All) {
        match remove_routes(router, &chosen, *target == StopTarget::All).await {
            Ok(state) => report.router = Some(state),
            Err(error) => report.router_error = Some(error.to_string()),
        }
    }
    Ok(report)
}

/// Stop every service the toolbox `toolbox` serves on `nodes`, and drop their routes at `router`
/// (what a refresh of the toolbox, or a canary's refusal, stops).
pub async fn stop_toolbox(nodes: &[&dyn Node], router: Option<&dyn Node>, toolbox: &str) -> StopReport {
    let listed = services_on(nodes).await;
    let mut chosen: Vec<String> = listed
        .iter()
        .filter_map(|(_, services)| services.as_ref().ok())
        .flatten()
        .filter(|state| state.record.toolbox == toolbox)
        .map(|state| state.record.service.clone())
        .collect();
    chosen.sort();
    chosen.dedup();
    let mut report = StopReport::default();
    for name in &chosen {
        report.merge(stop_service(nodes, name).await);
    }
    if let (Some(router), false) = (router, chosen.is_empty()) {
        match remove_routes(router, &chosen, false).await {
            Ok(state) => report.router = Some(state),
            Err(error) => report.router_error = Some(error.to_string()),
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stopped(node: &str, processes: &[&str]) -> NodeStop {
        let processes = processes.iter().map(|p| p.to_string()).collect();
        NodeStop {
            node: node.into(),
            stopped: Some(ServeStopped { processes, ..ServeStopped::default() }),
            error: None,
        }
    }

    #[test]
    fn stops_of_several_services_add_up_per_node() {
        let mut report = StopReport {
            services: vec!["a".into()],
            nodes: vec![stopped("node1", &["llama-server"])],
            ..Default::default()
        };
        report.merge(StopReport {
            services: vec!["b".into()],
            nodes: vec![
                stopped("node1", &["vllm"]),
                NodeStop { node: "node2".into(), stopped: None, error: Some("unreachable".into()) },
            ],
            ..Default::default()
        });
        assert_eq!(report.services, ["a", "b"]);
        assert_eq!(report.nodes[0].stopped.as_ref().unwrap().processes, ["llama-server", "vllm"]);
        assert_eq!(report.failed().len(), 1);
        assert!(report.summary("stopped").contains("node2: unreachable"));
    }
}
