//! Which link RCCL and Gloo will use between nodes, and the environment that pins them to it.
//! `doctor` reports the same choice the spec acts on.
//!
//! - an active RoCE v2 port: RDMA through that device and port only (`NCCL_IB_HCA`), its GID
//!   index, sockets (bootstrap, Gloo) on its netdev;
//! - else `thunderbolt0` up (the guide's fallback for nodes without RDMA NICs, a Thunderbolt 4 /
//!   USB4 cable): TCP over it, with RDMA off so NCCL never tries an HCA that cannot reach the peer;
//! - else plain Ethernet TCP on whatever interface NCCL picks: nothing to pin.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::host::netdev::THUNDERBOLT;
use crate::host::HostFacts;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Transport {
    Roce {
        device: String,
        port: u32,
        netdev: String,
        gid_index: u32,
    },
    ThunderboltTcp {
        netdev: String,
    },
    /// Also what a report from before transports were reported stands for.
    #[default]
    EthernetTcp,
}

impl Transport {
    pub fn of(facts: &HostFacts) -> Transport {
        if let Some(port) = facts.rdma.nccl_port() {
            if let (Some(netdev), Some(gid_index)) = (&port.netdev, port.roce_v2_gid_index) {
                return Transport::Roce {
                    device: port.device.clone(),
                    port: port.port,
                    netdev: netdev.clone(),
                    gid_index,
                };
            }
        }
        if facts.interface(THUNDERBOLT).is_some_and(|tb| tb.is_up()) {
            return Transport::ThunderboltTcp { netdev: THUNDERBOLT.to_string() };
        }
        Transport::EthernetTcp
    }

    /// The interface cluster traffic leaves by, when it is pinned to one.
    pub fn netdev(&self) -> Option<&str> {
        match self {
            Transport::Roce { netdev, .. } | Transport::ThunderboltTcp { netdev } => Some(netdev),
            Transport::EthernetTcp => None,
        }
    }

    /// "RoCE", "Thunderbolt TCP", "plain Ethernet TCP".
    pub fn label(&self) -> &'static str {
        match self {
            Transport::Roce { .. } => "RoCE",
            Transport::ThunderboltTcp { .. } => "Thunderbolt TCP",
            Transport::EthernetTcp => "plain Ethernet TCP",
        }
    }

    /// The NCCL/RCCL and Gloo environment that keeps traffic on this transport. NCCL reads
    /// `NCCL_SOCKET_IFNAME` and `NCCL_IB_HCA` as prefixes unless they start with `=`: the exact
    /// names, so `rocep194s0f0` never also takes `rocep194s0f01` (a prefix match broke
    /// `ncclCommInitRank` on E810 nodes). Gloo takes its interface name as it is.
    pub fn env(&self) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        let mut set = |key: &str, value: String| env.insert(key.to_string(), value);
        match self {
            Transport::Roce { device, port, netdev, gid_index } => {
                set("NCCL_SOCKET_IFNAME", format!("={netdev}"));
                set("GLOO_SOCKET_IFNAME", netdev.clone());
                set("NCCL_IB_GID_INDEX", gid_index.to_string());
                set("NCCL_IB_HCA", format!("={device}:{port}"));
            }
            Transport::ThunderboltTcp { netdev } => {
                set("NCCL_SOCKET_IFNAME", format!("={netdev}"));
                set("GLOO_SOCKET_IFNAME", netdev.clone());
                set("NCCL_IB_DISABLE", "1".to_string());
            }
            Transport::EthernetTcp => {}
        }
        env
    }
}
