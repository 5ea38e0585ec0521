//! What the head gathers from each node for the cross-node checks: the node's own reports, its
//! RoCE link as the kernel has it (`ip -j addr`), and jumbo-frame probes to its peers (`ping`).

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::link::address::ClusterLink;
use crate::ops::detect::DetectReport;
use crate::ops::doctor::DoctorReport;
use crate::ops::status::StatusReport;
use crate::serving::reach::Reached;

/// One node, as far as the head could learn it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFacts {
    pub node: String,
    /// Why the node could not be reached or asked (then the rest is empty).
    pub unreachable: Option<String>,
    /// The node's strix-toolbox version (None: not installed).
    pub version: Option<String>,
    pub doctor: Option<DoctorReport>,
    pub detect: Option<DetectReport>,
    pub status: Option<StatusReport>,
    pub roce: Option<ClusterLink>,
    pub probes: Vec<PathProbe>,
    /// The ports the serving engines' workers listen on, on this node's link address, as the
    /// head's connection found each (nothing need listen: a refusal proves the port reachable,
    /// silence a firewall dropping it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worker_ports: Vec<(u16, Reached)>,
    /// Reports the node could not give, and why.
    pub errors: Vec<String>,
}

impl NodeFacts {
    /// The netdev the node's data plane uses (its RoCE port's, or thunderbolt0), as detect decided.
    pub fn link_netdev(&self) -> Option<&str> {
        self.detect.as_ref()?.transport.netdev()
    }
}

/// A don't-fragment ping of `size` payload bytes from a node to a peer's RoCE address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathProbe {
    pub peer: String,
    pub address: Ipv4Addr,
    pub size: u32,
    pub ok: bool,
    /// ping's own words when it failed.
    pub detail: String,
}
