//! The node's cluster link: which netdev it is (the transport's: an ACTIVE RoCE port's netdev,
//! else `thunderbolt0` when up; [`Transport::of`]) and its address as the kernel has it
//! (`ip -j -4 addr`). [`cluster_link`] is the one rule every service on the link binds by: Ray and
//! vLLM (a launch), the model's blob server, the head's registry. And a bounded don't-fragment
//! ping out of a netdev: the truth the cross-node checks compare, asked on the node itself.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};
use tokio::process::Command;

use crate::error::{Error, Result};
use crate::host::HostFacts;
use crate::settings::Settings;
use crate::spec::Transport;

/// The cluster link (a RoCE netdev, or thunderbolt0) as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterLink {
    pub netdev: String,
    pub address: Option<Ipv4Addr>,
    pub prefix: Option<u8>,
    pub mtu: Option<u32>,
}

impl ClusterLink {
    /// Parse `ip -j -4 addr show dev NETDEV`.
    pub fn from_ip_json(netdev: &str, json: &[u8]) -> Option<ClusterLink> {
        let value: serde_json::Value = serde_json::from_slice(json).ok()?;
        let link = value.as_array()?.iter().find(|l| l["ifname"] == netdev)?;
        let inet = link["addr_info"].as_array().and_then(|a| a.iter().find(|a| a["family"] == "inet"));
        Some(ClusterLink {
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

/// The node's cluster link: the transport that decides it, and its netdev as the kernel has it
/// (None: the transport has no netdev, or the kernel has no such netdev).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLink {
    pub transport: Transport,
    pub link: Option<ClusterLink>,
}

impl NodeLink {
    /// The address a service on the link binds to, or why there is none, with the fix.
    pub fn address(&self) -> Result<Ipv4Addr> {
        if let Some(address) = self.link.as_ref().and_then(|link| link.address) {
            return Ok(address);
        }
        let (message, fix) = match self.transport.netdev() {
            Some(netdev) => (
                format!("its cluster link {netdev} has no IPv4 address"),
                format!(
                    "give it one on the cluster's subnet (`nmcli con mod … ipv4.addresses`, or `ip addr add \
                     ADDR/PREFIX dev {netdev}`)"
                ),
            ),
            None => (
                "it has no cluster link (no ACTIVE RoCE port, no thunderbolt0 up)".to_string(),
                "`strix-toolbox doctor` on it names what is missing".to_string(),
            ),
        };
        Err(Error::Host { what: "the cluster link".into(), message, fix: Some(fix) })
    }
}

/// This node's cluster link, from its facts and its kernel.
pub async fn cluster_link(settings: &Settings) -> Result<NodeLink> {
    let transport = Transport::of(&HostFacts::read(&settings.open_host_root()?)?);
    let link = match transport.netdev() {
        Some(netdev) => read_link(netdev).await?,
        None => None,
    };
    Ok(NodeLink { transport, link })
}

/// How a ping went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PingReport {
    pub ok: bool,
    /// ping's own words when it failed.
    pub detail: String,
}

/// `netdev` as the kernel reports it; None when there is no such netdev.
pub async fn read_link(netdev: &str) -> Result<Option<ClusterLink>> {
    let output = run(&["ip", "-j", "-4", "addr", "show", "dev", netdev]).await?;
    Ok(ClusterLink::from_ip_json(netdev, &output.stdout))
}

/// One don't-fragment ping of `size` payload bytes to `address` out of `netdev`.
pub async fn ping(netdev: &str, address: Ipv4Addr, size: u32) -> Result<PingReport> {
    let argv = ping_argv(netdev, address, size);
    let words: Vec<&str> = argv.iter().map(String::as_str).collect();
    let output = run(&words).await?;
    let said = String::from_utf8_lossy(if output.stderr.is_empty() { &output.stdout } else { &output.stderr });
    let detail = said.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or("no answer").trim().to_string();
    Ok(PingReport { ok: output.status.success(), detail: if output.status.success() { String::new() } else { detail } })
}

async fn run(argv: &[&str]) -> Result<std::process::Output> {
    let (program, args) = argv.split_first().ok_or_else(|| Error::Internal("an empty command line".into()))?;
    Command::new(program).args(args).stdin(std::process::Stdio::null()).kill_on_drop(true).output().await.map_err(|e| {
        Error::Command {
            program: program.to_string(),
            message: format!("cannot run it: {e}"),
            fix: Some("install iproute2 and iputils-ping".into()),
        }
    })
}

/// The argv of that ping: bounded (one packet, two seconds at most), out of the RoCE netdev.
fn ping_argv(netdev: &str, address: Ipv4Addr, size: u32) -> Vec<String> {
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
        let link = ClusterLink::from_ip_json("enp194s0np0", IP_JSON.as_bytes()).unwrap();
        assert_eq!(link.address, Some(Ipv4Addr::new(192, 168, 100, 1)));
        assert_eq!((link.prefix, link.mtu), (Some(30), Some(9000)));
        assert_eq!(link.subnet(), Some((Ipv4Addr::new(192, 168, 100, 0), 30)));
        assert_eq!(ClusterLink::from_ip_json("eth9", IP_JSON.as_bytes()), None);
        assert_eq!(ClusterLink::from_ip_json("enp194s0np0", b"not json"), None);
        let no_address = r#"[{"ifname":"enp194s0np0","mtu":1500,"addr_info":[]}]"#;
        let link = ClusterLink::from_ip_json("enp194s0np0", no_address.as_bytes()).unwrap();
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
