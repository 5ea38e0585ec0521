//! `cluster stop` (and `stop` on one node): what launches started, stopped on every node that
//! answers — vLLM first everywhere (it drives the Ray workers), then Ray — each node named with
//! what it stopped or why it could not. Idempotent.

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use crate::error::{Error, MultiError, Result};
use crate::node::{Node, NodeCalls};
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
    pub nodes: Vec<NodeStop>,
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
}

/// Stop serving on `nodes`: `vllm serve` first on all, then everything else on all.
pub async fn stop_serving(nodes: &[&dyn Node], toolbox: &str) -> StopReport {
    let ask = |part| ServeStop { toolbox: toolbox.to_string(), part };
    let vllm = join_all(nodes.iter().map(|node| node.call(ask(StopPart::Vllm)))).await;
    let all = join_all(nodes.iter().map(|node| node.call(ask(StopPart::All)))).await;
    let nodes = nodes
        .iter()
        .zip(vllm.into_iter().zip(all))
        .map(|(node, (vllm, all))| match (vllm, all) {
            (Ok(first), Ok(second)) => NodeStop {
                node: node.name().to_string(),
                stopped: Some(ServeStopped {
                    vllm: first.vllm || second.vllm,
                    ray: second.ray,
                    forced: first.forced || second.forced,
                }),
                error: None,
            },
            (Err(error), _) | (_, Err(error)) => {
                NodeStop { node: node.name().to_string(), stopped: None, error: Some(error.to_string()) }
            }
        })
        .collect();
    StopReport { nodes }
}
