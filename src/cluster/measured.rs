//! The plan checked against the engine, across a service's nodes: each node's server log read
//! from its start (where the engine says what it allocated while loading: a tail would lose it
//! once requests fill the log), then the engine's own reading of those lines beside what the
//! plan put on each node (`ServingEngine::measured`). The launch does it once the service
//! answers; `cluster status` each time it is asked.

use std::net::Ipv4Addr;

use futures_util::future::join_all;

use crate::node::{Node, NodeCalls};
use crate::serving::engine::EngineRef;
use crate::serving::fit::{Measured, NodeLog, Planned};
use crate::serving::logs::{LogTail, ServeLogs};

/// What `engine` said on `nodes` (each with its cluster-link address) for `service`, beside
/// `planned`; a node whose log cannot be read says nothing.
pub async fn measured(
    nodes: &[(&dyn Node, Ipv4Addr)],
    service: &str,
    engine: EngineRef,
    planned: &[Planned],
) -> Vec<Measured> {
    let from_start =
        LogTail { service: service.to_string(), file: engine.profile().server.to_string(), lines: Vec::new(), end: 0 };
    let ask = ServeLogs { service: Some(service.to_string()), lines: 0, seen: vec![from_start] };
    let tails = join_all(nodes.iter().map(|(node, _)| node.call(ask.clone()))).await;
    let tails: Vec<Vec<LogTail>> = tails.into_iter().map(Result::unwrap_or_default).collect();
    let logs: Vec<NodeLog> = nodes
        .iter()
        .zip(&tails)
        .map(|((node, link_ip), tails)| NodeLog { node: node.name(), link_ip: *link_ip, tails })
        .collect();
    engine.measured(planned, &logs)
}
