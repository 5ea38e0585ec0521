//! The cluster link, the one the nodes' tensor-parallel traffic (and Ray, vLLM) uses, and each
//! node's fake host tree made to say what the real link in its namespace is.

use std::net::Ipv4Addr;
use std::path::Path;

use super::TestNode;
use crate::support::netns::NetNs;

/// The E810 port's netdev, as the RoCE link is named in every node.
pub const ROCE_NETDEV: &str = "enp194s0np0";
pub const JUMBO_MTU: u32 = 9000;
/// The interface the thunderbolt-net driver creates for a Thunderbolt 4 / USB4 cable.
pub const THUNDERBOLT_NETDEV: &str = "thunderbolt0";
/// What thunderbolt-net links are set to (the fixture's, and doctor's advice).
pub const THUNDERBOLT_MTU: u32 = 65520;

/// The RoCE fixture's active port, and the netdev it names (renamed to `ROCE_NETDEV` in a node).
const FIXTURE_ROCE_PORT: &str = "sys/class/infiniband/rocep194s0f0/ports/1";
const FIXTURE_ROCE_NETDEV: &str = "enp194s0f0";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// E810 RoCE ports: `enp194s0np0`, MTU 9000. Two nodes: a "DAC cable", one veth pair,
    /// 192.168.100.1/30 and .2/30. Three or more: a "switch" (a bridge), 192.168.100.I/24. One
    /// node: no link. Host trees from `strix-e810-healthy`, whose RDMA toolboxes (memlock=-1)
    /// cannot start on this machine.
    Roce,
    /// Thunderbolt networking, the transport of nodes without RDMA NICs: `thunderbolt0`, MTU
    /// 65520, 192.168.2.I/24 on a bridge for any number of nodes (TESTBED.md, "Ray across
    /// namespaces"). Host trees from `strix-thunderbolt-only`: their toolboxes start here.
    Thunderbolt,
}

impl Link {
    pub fn netdev(self) -> &'static str {
        match self {
            Link::Roce => ROCE_NETDEV,
            Link::Thunderbolt => THUNDERBOLT_NETDEV,
        }
    }

    pub fn mtu(self) -> u32 {
        match self {
            Link::Roce => JUMBO_MTU,
            Link::Thunderbolt => THUNDERBOLT_MTU,
        }
    }

    /// Node `index`'s address on the link.
    pub fn address(self, index: usize) -> Ipv4Addr {
        let host = u8::try_from(index).expect("node index");
        match self {
            Link::Roce => Ipv4Addr::new(192, 168, 100, host),
            Link::Thunderbolt => Ipv4Addr::new(192, 168, 2, host),
        }
    }

    /// The fixture a node's host tree is copied from.
    pub(super) fn fixture(self) -> &'static str {
        match self {
            Link::Roce => "strix-e810-healthy",
            Link::Thunderbolt => "strix-thunderbolt-only",
        }
    }

    /// A cable between exactly two RoCE nodes; a switch otherwise (RoCE alone has no link then).
    fn wiring(self, nodes: usize) -> Wiring {
        match (self, nodes) {
            (Link::Roce, 1) => Wiring::None,
            (Link::Roce, 2) => Wiring::Cable,
            _ => Wiring::Switch,
        }
    }

    /// Connect the nodes' namespaces and give each its address. Returns the switch's namespace,
    /// when there is one (`stxS-switch`, bridge `br0`, one port per node).
    pub(super) fn connect(self, slot: u8, nodes: &[TestNode]) -> Option<NetNs> {
        let (netdev, mtu) = (self.netdev(), self.mtu().to_string());
        let wiring = self.wiring(nodes.len());
        let mut switch = None;
        match wiring {
            Wiring::None => return None,
            Wiring::Cable => {
                let [first, second] = nodes else { unreachable!("a cable joins two nodes") };
                first.netns().ip(&[
                    "link",
                    "add",
                    netdev,
                    "mtu",
                    &mtu,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    netdev,
                    "mtu",
                    &mtu,
                    "netns",
                    second.netns().name(),
                ]);
            }
            Wiring::Switch => {
                let bridge = NetNs::named(format!("stx{slot}-switch"));
                bridge.ip(&["link", "add", "br0", "mtu", &mtu, "type", "bridge"]);
                for node in nodes {
                    let port = format!("port{}", node.index);
                    node.netns().ip(&[
                        "link",
                        "add",
                        netdev,
                        "mtu",
                        &mtu,
                        "type",
                        "veth",
                        "peer",
                        "name",
                        &port,
                        "mtu",
                        &mtu,
                        "netns",
                        bridge.name(),
                    ]);
                    bridge.ip(&["link", "set", &port, "master", "br0", "up"]);
                }
                bridge.ip(&["link", "set", "br0", "up"]);
                switch = Some(bridge);
            }
        }
        let prefix = if wiring == Wiring::Cable { 30 } else { 24 };
        for node in nodes {
            let address = format!("{}/{prefix}", node.link_address);
            node.netns().ip(&["addr", "add", &address, "dev", netdev]);
            node.netns().ip(&["link", "set", netdev, "up"]);
        }
        switch
    }

    /// Make the node's fake host tree describe its link: the netdev's name, MTU and state, the
    /// RoCE GIDs carrying its address, and its IPv4 tables copied from the namespace itself.
    pub(super) fn wire_host_tree(self, node: &TestNode) {
        let tree = node.host_tree.path();
        let net = tree.join("sys/class/net");
        match self {
            Link::Roce => {
                std::fs::rename(net.join(FIXTURE_ROCE_NETDEV), net.join(ROCE_NETDEV))
                    .expect("rename the fixture's netdev");
                write_gids(&tree.join(FIXTURE_ROCE_PORT), node.link_address);
            }
            Link::Thunderbolt => {
                std::fs::write(net.join(THUNDERBOLT_NETDEV).join("operstate"), "up\n").expect("write operstate");
            }
        }
        std::fs::write(net.join(self.netdev()).join("mtu"), format!("{}\n", self.mtu())).expect("write mtu");
        copy_ipv4_tables(node.netns(), tree);
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wiring {
    None,
    Cable,
    Switch,
}

/// The RoCE port's v2 GIDs (IPv4-mapped, `::ffff:c0a8:64NN`) carry `address`, on `ROCE_NETDEV`.
fn write_gids(port: &Path, address: Ipv4Addr) {
    let [a, b, c, d] = address.octets();
    let mapped = format!("0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}");
    for entry in std::fs::read_dir(port.join("gid_attrs/ndevs")).expect("fixture ndevs") {
        let slot = entry.expect("ndev entry").file_name();
        std::fs::write(port.join("gid_attrs/ndevs").join(&slot), format!("{ROCE_NETDEV}\n")).expect("write ndev");
        let gid = port.join("gids").join(&slot);
        let text = std::fs::read_to_string(&gid).expect("fixture gid");
        if text.contains(":ffff:") {
            std::fs::write(&gid, format!("{mapped}\n")).expect("write gid");
        }
    }
}

/// The namespace's own `/proc/net/route` and `/proc/net/fib_trie` (what host facts read IPv4
/// addresses from, src/host/ipv4.rs) into the tree: the tree's addresses are the link's.
fn copy_ipv4_tables(netns: &NetNs, tree: &Path) {
    for table in ["route", "fib_trie"] {
        let output = netns.enter("cat").arg(format!("/proc/net/{table}")).output().expect("cat in the namespace");
        assert!(output.status.success(), "/proc/net/{table} of {}", netns.name());
        std::fs::write(tree.join("proc/net").join(table), output.stdout).expect("write the tree's IPv4 table");
    }
}
