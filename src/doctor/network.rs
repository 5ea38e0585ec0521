//! The link between nodes: which transport RCCL will use, and the Thunderbolt cable when it is
//! (or would be) that link.

use super::{check, mtu_check, Check, Status};
use crate::host::netdev::THUNDERBOLT;
use crate::host::{HostFacts, Netdev};
use crate::spec::Transport;

/// What the thunderbolt-net link is usually set to: far above Ethernet's jumbo frames.
const THUNDERBOLT_MTU: u32 = 65520;

pub(super) fn checks(facts: &HostFacts, checks: &mut Vec<Check>) {
    let transport = Transport::of(facts);
    checks.push(transport_check(&transport));
    // With RoCE carrying the traffic, a Thunderbolt cable is not used.
    if matches!(transport, Transport::Roce { .. }) {
        return;
    }
    if let Some(thunderbolt) = facts.interface(THUNDERBOLT) {
        thunderbolt_checks(thunderbolt, checks);
    }
}

fn transport_check(transport: &Transport) -> Check {
    let label = transport.label();
    match transport {
        Transport::Roce { device, port, netdev, gid_index } => check(
            "transport",
            Status::Pass,
            format!("{label}: RCCL uses {device} port {port} on {netdev} (GID index {gid_index}) and no other HCA"),
            None,
        ),
        Transport::ThunderboltTcp { netdev } => check(
            "transport",
            Status::Info,
            format!("{label} over {netdev}: no active RoCE port, so RDMA is off (NCCL_IB_DISABLE=1) and RCCL and Gloo use {netdev}"),
            None,
        ),
        Transport::EthernetTcp => check(
            "transport",
            Status::Info,
            format!("{label}: no active RoCE port and {THUNDERBOLT} is not up, so RCCL picks an interface itself (~70-100 µs instead of RoCE's ~5 µs)"),
            None,
        ),
    }
}

fn thunderbolt_checks(thunderbolt: &Netdev, checks: &mut Vec<Check>) {
    let name = &thunderbolt.name;
    if thunderbolt.is_up() {
        checks.push(check(name.as_str(), Status::Pass, format!("{name} is up"), None));
    } else {
        checks.push(check(
            name.as_str(),
            Status::Warn,
            format!(
                "{name} is {}: no Thunderbolt link to the peer",
                thunderbolt.operstate.as_deref().unwrap_or("unknown")
            ),
            Some(format!("check the Thunderbolt 4 / USB4 cable, then `sudo nmcli connection up {name}`")),
        ));
    }
    let why = ": TCP over Thunderbolt needs large frames to keep up";
    checks.push(mtu_check(format!("{name}:mtu"), name, thunderbolt.mtu, "", why, THUNDERBOLT_MTU, ""));
    checks.push(match &thunderbolt.ipv4 {
        Some(addresses) if !addresses.is_empty() => {
            check(format!("{name}:ipv4"), Status::Pass, format!("{name} {}", addresses.join(" ")), None)
        }
        Some(_) => check(
            format!("{name}:ipv4"),
            Status::Warn,
            format!("{name} has no IPv4 address: Ray and RCCL cannot reach the peer over it"),
            Some(format!(
                "`sudo nmcli connection modify {name} ipv4.method manual ipv4.addresses 192.168.2.N/24` (N: 1, 2, ... \
                 one per node), then `sudo nmcli connection up {name}`"
            )),
        ),
        None => check(
            format!("{name}:ipv4"),
            Status::Info,
            format!("{name}'s IPv4 addresses unknown (/proc/net/route or /proc/net/fib_trie unreadable)"),
            None,
        ),
    });
}
