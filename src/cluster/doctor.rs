//! `cluster doctor`: every node's own doctor, detect and status, its RoCE link and jumbo-frame
//! probes to every peer, then the cross-node checks.

use futures_util::future::join_all;

use super::checks::ClusterDoctorReport;
use super::facts::{NodeFacts, PathProbe};
use super::{close_all, connect_all, in_cluster_order, ClusterSettings};
use crate::error::Result;
use crate::link::address::jumbo_payload;
use crate::node::call::{Detect, Doctor, Link, Ping, StatusCall};
use crate::node::remote::RemoteNode;
use crate::node::NodeCalls;
use crate::serving::engine::link_ports;
use crate::serving::reach::{Reach, Reached};
use std::net::SocketAddr;

pub async fn cluster_doctor(settings: &ClusterSettings, toolbox: &str) -> Result<ClusterDoctorReport> {
    let (connected, unreachable) = connect_all(settings).await;
    let mut facts: Vec<NodeFacts> = join_all(connected.iter().map(node_facts)).await;
    facts.extend(unreachable.into_iter().map(|(node, error)| NodeFacts {
        node,
        unreachable: Some(error.to_string()),
        ..Default::default()
    }));
    in_cluster_order(settings, &mut facts, |f| &f.node);

    probe_paths(&connected, &mut facts).await;
    probe_worker_ports(&connected, &mut facts).await;
    close_all(connected).await;
    Ok(ClusterDoctorReport::new(toolbox, facts))
}

/// One node's reports and RoCE link.
async fn node_facts(remote: &RemoteNode) -> NodeFacts {
    let mut facts =
        NodeFacts { node: remote.name.clone(), version: remote.version().map(str::to_string), ..Default::default() };
    if let Err(error) = remote.require_ours() {
        facts.errors.push(error.to_string());
        return facts;
    }
    let (doctor, detect, status) =
        tokio::join!(remote.call(Doctor {}), remote.call(Detect {}), remote.call(StatusCall {}));
    facts.doctor = doctor.map_err(|e| facts.errors.push(e.to_string())).ok();
    facts.detect = detect.map_err(|e| facts.errors.push(e.to_string())).ok();
    facts.status = status.map_err(|e| facts.errors.push(e.to_string())).ok();
    if let Some(netdev) = facts.link_netdev().map(str::to_string) {
        match remote.call(Link { netdev: netdev.clone() }).await {
            Ok(link) => facts.roce = link,
            Err(error) => facts.errors.push(format!("cannot read {netdev}'s address: {error}")),
        }
    }
    facts
}

/// From the head, a connection to every port the engines' workers listen on, on every worker's
/// link address: what the head's server will do (llama-server's `--rpc`). One call, the
/// connections at once, each bounded.
async fn probe_worker_ports(connected: &[RemoteNode], facts: &mut [NodeFacts]) {
    let Some(head) = facts.first().and_then(|head| connected.iter().find(|r| r.name == head.node)) else { return };
    let ports: Vec<u16> = link_ports().iter().filter(|p| p.from_head.is_some()).map(|p| p.port).collect();
    let workers: Vec<(usize, SocketAddr)> = facts
        .iter()
        .enumerate()
        .skip(1)
        .filter_map(|(index, f)| Some((index, f.roce.as_ref()?.address?)))
        .flat_map(|(index, address)| ports.iter().map(move |port| (index, SocketAddr::from((address, *port)))))
        .collect();
    if workers.is_empty() {
        return;
    }
    let addresses = workers.iter().map(|(_, address)| *address).collect();
    let answers = match head.call(Reach { addresses }).await {
        Ok(answers) => answers,
        Err(error) => vec![Reached::Unasked(error.to_string()); workers.len()],
    };
    for ((index, address), reached) in workers.into_iter().zip(answers) {
        facts[index].worker_ports.push((address.port(), reached));
    }
}

/// From every node to every peer's RoCE address, a don't-fragment ping as large as the largest
/// MTU in the cluster: a smaller MTU anywhere on the path drops it.
async fn probe_paths(connected: &[RemoteNode], facts: &mut [NodeFacts]) {
    let size = jumbo_payload(facts.iter().filter_map(|f| f.roce.as_ref()?.mtu).max().unwrap_or(9000));
    let targets: Vec<(String, std::net::Ipv4Addr)> =
        facts.iter().filter_map(|f| Some((f.node.clone(), f.roce.as_ref()?.address?))).collect();
    let probes = facts.iter().map(|from| {
        let remote = connected.iter().find(|r| r.name == from.node);
        let netdev = from.roce.as_ref().map(|l| l.netdev.clone());
        let peers: Vec<_> = targets.iter().filter(|(peer, _)| *peer != from.node).cloned().collect();
        async move {
            let (Some(remote), Some(netdev)) = (remote, netdev) else { return Vec::new() };
            join_all(peers.into_iter().map(|(peer, address)| {
                let netdev = netdev.clone();
                async move {
                    let (ok, detail) = match remote.call(Ping { netdev, address, size }).await {
                        Ok(ping) => (ping.ok, ping.detail),
                        Err(error) => (false, error.to_string()),
                    };
                    PathProbe { peer, address, size, ok, detail }
                }
            }))
            .await
        }
    });
    let probes: Vec<Vec<PathProbe>> = join_all(probes).await;
    for (node, probes) in facts.iter_mut().zip(probes) {
        node.probes = probes;
    }
}
