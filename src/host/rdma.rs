//! RDMA facts: /dev/infiniband nodes and, per port, link state, netdev, MTU and the RoCE v2 GID.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::devices::char_devices_under;
use super::{netdev, HostRoot};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RdmaFacts {
    /// Character devices under /dev/infiniband (uverbs*, rdma_cm, umad*...).
    pub devices: Vec<PathBuf>,
    pub ports: Vec<RdmaPort>,
    /// Groups owning /dev/infiniband nodes that others may not open: membership of one is then
    /// needed to use RDMA (Fedora's rdma-core leaves the nodes open to all).
    #[serde(default)]
    pub restricted_to_gids: BTreeSet<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RdmaPort {
    /// The RDMA device, e.g. "rocep194s0f0" (E810) or "mlx5_0" (ConnectX).
    pub device: String,
    pub port: u32,
    /// As sysfs has it, e.g. "4: ACTIVE".
    pub state: Option<String>,
    /// As sysfs has it, e.g. "5: LinkUp".
    pub phys_state: Option<String>,
    /// "Ethernet" for RoCE, "InfiniBand" for IB.
    pub link_layer: Option<String>,
    /// e.g. "100 Gb/sec (4X EDR)".
    pub rate: Option<String>,
    /// The network interface behind the port (its GID table's, else its PCI function's).
    pub netdev: Option<String>,
    pub mtu: Option<u32>,
    /// The netdev's operstate ("up", "down").
    pub operstate: Option<String>,
    /// The GID index NCCL_IB_GID_INDEX must take: RoCE v2 with an IPv4-mapped address.
    pub roce_v2_gid_index: Option<u32>,
}

impl RdmaPort {
    /// ACTIVE and LinkUp: the port can carry traffic.
    pub fn is_active(&self) -> bool {
        let has = |value: &Option<String>, word: &str| value.as_deref().is_some_and(|v| v.contains(word));
        has(&self.state, "ACTIVE") && has(&self.phys_state, "LinkUp")
    }

    /// An active RoCE port with a usable v2 GID and a netdev: what NCCL needs.
    pub fn is_usable_roce(&self) -> bool {
        self.is_active() && self.roce_v2_gid_index.is_some() && self.netdev.is_some()
    }
}

impl RdmaFacts {
    pub fn present(&self) -> bool {
        !self.devices.is_empty()
    }

    /// The port NCCL should use: the first active RoCE v2 port.
    pub fn nccl_port(&self) -> Option<&RdmaPort> {
        self.ports.iter().find(|p| p.is_usable_roce())
    }

    /// The netdevs behind the ports, each once, in port order.
    pub fn netdevs(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for name in self.ports.iter().filter_map(|p| p.netdev.as_deref()) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }
}

const CLASS: &str = "/sys/class/infiniband";

pub fn read(root: &HostRoot, warnings: &mut Vec<String>) -> RdmaFacts {
    let devices = char_devices_under(root, "/dev/infiniband");
    let mut ports = Vec::new();
    for device in root.list(CLASS) {
        for port_name in root.list(format!("{CLASS}/{device}/ports")) {
            let Ok(port) = port_name.parse::<u32>() else {
                warnings.push(format!("{CLASS}/{device}/ports/{port_name}: not a port number"));
                continue;
            };
            ports.push(read_port(root, &device, port, warnings));
        }
    }
    let restricted_to_gids = devices
        .iter()
        .filter_map(|node| root.metadata(node))
        .filter(|m| m.mode() & 0o006 != 0o006)
        .map(|m| m.gid())
        .collect();
    RdmaFacts { devices, ports, restricted_to_gids }
}

fn read_port(root: &HostRoot, device: &str, port: u32, warnings: &mut Vec<String>) -> RdmaPort {
    let dir = format!("{CLASS}/{device}/ports/{port}");
    let attribute = |name: &str| root.attribute(format!("{dir}/{name}")).filter(|v| !v.is_empty());

    // The netdev is recorded per GID slot; the first populated slot names it. A port whose GID
    // table is empty (down, no addresses) is found through its PCI function instead.
    let netdev = root
        .list(format!("{dir}/gid_attrs/ndevs"))
        .iter()
        .find_map(|n| attribute(&format!("gid_attrs/ndevs/{n}")))
        .or_else(|| netdev_of_pci_function(root, device, port));

    let roce_v2_gid_index = root.list(format!("{dir}/gid_attrs/types")).iter().find_map(|n| {
        let index: u32 = n.parse().ok()?;
        let kind = attribute(&format!("gid_attrs/types/{n}"))?;
        let gid = attribute(&format!("gids/{n}"))?;
        (kind.eq_ignore_ascii_case("RoCE v2") && is_ipv4_mapped(&gid)).then_some(index)
    });

    let mtu = netdev.as_deref().and_then(|name| netdev::mtu(root, name, warnings));
    let operstate = netdev.as_deref().and_then(|name| netdev::operstate(root, name));

    RdmaPort {
        device: device.to_string(),
        port,
        state: attribute("state"),
        phys_state: attribute("phys_state"),
        link_layer: attribute("link_layer"),
        rate: attribute("rate"),
        netdev,
        mtu,
        operstate,
        roce_v2_gid_index,
    }
}

/// The netdev of the device's PCI function (`device/net/*`): the only one, or, where one function
/// has a netdev per port (ConnectX-3), the one whose `dev_port` is this port's.
fn netdev_of_pci_function(root: &HostRoot, device: &str, port: u32) -> Option<String> {
    let dir = format!("{CLASS}/{device}/device/net");
    let mut names = root.list(&dir);
    if names.len() <= 1 {
        return names.pop();
    }
    let index = port.checked_sub(1)?.to_string();
    names.into_iter().find(|name| root.attribute(format!("{dir}/{name}/dev_port")).as_deref() == Some(&index))
}

/// `0000:0000:0000:0000:0000:ffff:c0a8:0101` — an IPv4 address in a GID.
pub fn is_ipv4_mapped(gid: &str) -> bool {
    let groups: Vec<&str> = gid.split(':').collect();
    groups.len() == 8
        && groups[..5].iter().all(|g| g.chars().all(|c| c == '0') && !g.is_empty())
        && groups[5].eq_ignore_ascii_case("ffff")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_ipv4_mapped_gids() {
        assert!(is_ipv4_mapped("0000:0000:0000:0000:0000:ffff:c0a8:6401"));
        assert!(!is_ipv4_mapped("fe80:0000:0000:0000:b696:91ff:fea5:1e00"));
        assert!(!is_ipv4_mapped("0000:0000:0000:0000:0000:0000:0000:0000"));
        assert!(!is_ipv4_mapped("garbage"));
    }

    #[test]
    fn finds_the_netdev_of_a_port_with_an_empty_gid_table() {
        let dir = tempfile::tempdir().unwrap();
        let net = dir.path().join("sys/class/infiniband/mlx4_0/device/net");
        for (name, dev_port) in [("enp1s0", "0"), ("enp1s0d1", "1")] {
            std::fs::create_dir_all(net.join(name)).unwrap();
            std::fs::write(net.join(name).join("dev_port"), dev_port).unwrap();
        }
        let root = HostRoot::open(dir.path()).unwrap();
        assert_eq!(netdev_of_pci_function(&root, "mlx4_0", 2).as_deref(), Some("enp1s0d1"));
        assert_eq!(netdev_of_pci_function(&root, "mlx4_0", 1).as_deref(), Some("enp1s0"));
        assert_eq!(netdev_of_pci_function(&root, "mlx4_0", 3), None);
        assert_eq!(netdev_of_pci_function(&root, "irdma0", 1), None);
    }

    #[test]
    fn active_needs_both_states() {
        let mut port =
            RdmaPort { state: Some("4: ACTIVE".into()), phys_state: Some("5: LinkUp".into()), ..Default::default() };
        assert!(port.is_active());
        port.phys_state = Some("3: Disabled".into());
        assert!(!port.is_active());
    }
}
