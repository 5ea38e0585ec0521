//! RDMA: device nodes, and per port its link, its netdev's MTU and its RoCE v2 GID.

use super::{check, mtu_check, Check, Status, JUMBO_MTU};
use crate::host::{HostFacts, RdmaPort};
use crate::spec::Transport;

pub(super) fn checks(facts: &HostFacts, checks: &mut Vec<Check>) {
    let rdma = &facts.rdma;
    if !rdma.present() && rdma.ports.is_empty() {
        checks.push(check(
            "rdma",
            Status::Warn,
            "no RDMA devices under /dev/infiniband: tensor parallelism across nodes will use TCP (~70-100 µs) instead of RoCE (~5 µs)",
            Some("load the NIC's RDMA driver (`sudo modprobe irdma` for Intel E810, `sudo modprobe mlx5_ib` for ConnectX) and install rdma-core".into()),
        ));
        return;
    }
    if !rdma.present() {
        checks.push(check(
            "rdma",
            Status::Fail,
            "RDMA ports exist in sysfs but /dev/infiniband has no device nodes",
            Some("load ib_uverbs and rdma_ucm (`sudo modprobe ib_uverbs rdma_ucm`)".into()),
        ));
    }
    let any_active = rdma.ports.iter().any(RdmaPort::is_active);
    for port in &rdma.ports {
        let name = format!("rdma:{}/{}", port.device, port.port);
        let netdev = port.netdev.as_deref().unwrap_or("?");
        if port.is_active() {
            checks.push(check(
                &name,
                Status::Pass,
                format!("{} port {} ACTIVE/LinkUp on {netdev}", port.device, port.port),
                None,
            ));
        } else {
            // An idle second port is normal (one cable to the peer), and the Thunderbolt fallback
            // still links the node: only a node left without any link fails.
            let linked = Transport::of(facts) != Transport::EthernetTcp;
            let status = if linked { Status::Warn } else { Status::Fail };
            checks.push(check(
                &name,
                status,
                format!(
                    "{} port {} is {} / {}",
                    port.device,
                    port.port,
                    port.state.as_deref().unwrap_or("unknown"),
                    port.phys_state.as_deref().unwrap_or("unknown")
                ),
                Some(format!("check the cable and the switch port, then `sudo ip link set dev {netdev} up`")),
            ));
        }
        // The link's own settings matter on the port in use and, while no port is up, on every
        // port: whichever comes up should not then fail on its MTU or its address.
        if port.is_active() || !any_active {
            port_mtu_check(&name, port, checks);
            gid_check(&name, port, checks);
        }
    }
}

fn port_mtu_check(name: &str, port: &RdmaPort, checks: &mut Vec<Check>) {
    let netdev = port.netdev.as_deref().unwrap_or("?");
    let down = if port.is_active() { "" } else { " (port down)" };
    let why = format!("; RoCE wants jumbo frames ({JUMBO_MTU}) end to end");
    checks.push(mtu_check(format!("{name}:mtu"), netdev, port.mtu, down, &why, JUMBO_MTU, " (and the switch port)"));
}

fn gid_check(name: &str, port: &RdmaPort, checks: &mut Vec<Check>) {
    let netdev = port.netdev.as_deref().unwrap_or("?");
    if port.link_layer.as_deref() == Some("Ethernet") && port.roce_v2_gid_index.is_none() {
        checks.push(check(
            format!("{name}:gid"),
            Status::Fail,
            format!("no RoCE v2 GID with an IPv4 address on {netdev}: NCCL_IB_GID_INDEX cannot be set"),
            Some(format!(
                "give {netdev} an IPv4 address (`sudo nmcli connection modify {netdev} ipv4.addresses 10.0.0.N/24 \
                 ipv4.method manual`)"
            )),
        ));
    }
}
