//! What the head gathers from each node for the cross-node checks: the node's own reports, its
//! RoCE link as the kernel has it (`ip -j addr`), and jumbo-frame probes to its peers (`ping`).

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::ops::detect::DetectReport;
use crate::ops::doctor::DoctorReport;
use crate::ops::status::StatusReport;

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
    pub roce: Option<RoceLink>,
    pub probes: Vec<PathProbe>,
    /// Reports the node could not give, and why.
    pub errors: Vec<String>,
}

impl NodeFacts {
    /// The netdev the node's data plane uses (its RoCE port's, or thunderbolt0), as detect decided.
    pub fn link_netdev(&self) -> Option<&str> {
        self.detect.as_ref()?.transport.netdev()
    }
}

/// The RoCE netdev as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoceLink {
    pub netdev: String,
    pub address: Option<Ipv4Addr>,
    pub prefix: Option<u8>,
    pub mtu: Option<u32>,
}

impl RoceLink {
    /// Parse `ip -j -4 addr show dev NETDEV`.
    pub fn from_ip_json(netdev: &str, json: &[u8]) -> Option<RoceLink> {
        let value: serde_json::Value = serde_json::from_slice(json).ok()?;
        let link = value.as_array()?.iter().find(|l| l["ifname"] == netdev)?;
        let inet = link["addr_info"].as_array().and_then(|a| a.iter().find(|a| a["family"] == "inet"));
        Some(RoceLink {
            netdev: netdev.to_string(),
            address: inet.and_then(|a| a["local"].as_str()?.parse().ok()),
            prefix: inet.and_then(|a| u8::try_from(a["prefixlen"].as_u64()?).ok()).filter(|p| *p <= 32),
            mtu: link["mtu"].as_u64().and_then(|m| u32::try_from(m).ok()),
        })
    }

    /// `192.168.100.0/30`: the subnet the address is in.
    pub fn subnet(&self) -> Option<(Ipv4Addr, u8)> {
        let (address, prefix) = (self.address?, self.prefix?);
        let mask = if prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(prefix)) };
        Some((Ipv4Addr::from(u32::from(address) & mask), prefix))
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

/// The argv of that ping: bounded (one packet, two seconds at most), out of the RoCE netdev.
pub fn ping_argv(netdev: &str, address: Ipv4Addr, size: u32) -> Vec<String> {
    ["ping", "-n", "-q", "-M", "do", "-c", "1", "-W", "2", "-w", "3", "-s", &size.to_string(), "-I", netdev]
        .into_iter()
        .map(str::to_string)
        .chain([address.to_string()])
        .collect()
}

/// The ICMP payload that fills an `mtu`-byte IPv4 packet (20 bytes IP + 8 bytes ICMP header).
pub fn jumbo_payload(mtu: u32) -> u32 {
    mtu.saturating_sub(28)
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP_JSON: &str = r#"[{"ifindex":7,"ifname":"enp194s0np0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],
        "mtu":9000,"qdisc":"noqueue","operstate":"UP","group":"default","txqlen":1000,
        "addr_info":[{"family":"inet","local":"192.168.100.1","prefixlen":30,"broadcast":"192.168.100.3",
        "scope":"global","label":"enp194s0np0","valid_life_time":4294967295,"preferred_life_time":4294967295}]}]"#;

    #[test]
    fn reads_address_prefix_and_mtu_from_ip_json() {
        let link = RoceLink::from_ip_json("enp194s0np0", IP_JSON.as_bytes()).unwrap();
        assert_eq!(link.address, Some(Ipv4Addr::new(192, 168, 100, 1)));
        assert_eq!((link.prefix, link.mtu), (Some(30), Some(9000)));
        assert_eq!(link.subnet(), Some((Ipv4Addr::new(192, 168, 100, 0), 30)));
        assert_eq!(RoceLink::from_ip_json("eth9", IP_JSON.as_bytes()), None);
        assert_eq!(RoceLink::from_ip_json("enp194s0np0", b"not json"), None);
        let no_address = r#"[{"ifname":"enp194s0np0","mtu":1500,"addr_info":[]}]"#;
        let link = RoceLink::from_ip_json("enp194s0np0", no_address.as_bytes()).unwrap();
        assert_eq!((link.address, link.mtu, link.subnet()), (None, Some(1500), None));
    }

    #[test]
    fn the_ping_is_bounded_and_does_not_fragment() {
        let argv = ping_argv("enp194s0np0", Ipv4Addr::new(192, 168, 100, 2), jumbo_payload(9000));
        let joined = argv.join(" ");
        assert!(joined.contains("-M do") && joined.contains("-c 1") && joined.contains("-w 3"), "{joined}");
        assert!(joined.ends_with("-s 8972 -I enp194s0np0 192.168.100.2"), "{joined}");
    }
}
