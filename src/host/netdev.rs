//! The network interfaces cluster traffic may use: the netdevs behind RDMA ports and the
//! Thunderbolt/USB4 link (`thunderbolt0`), each with its state, MTU, IPv4 addresses and driver.

use serde::{Deserialize, Serialize};

use super::ethtool::{self, DriverInfo};
use super::ipv4::Ipv4Addresses;
use super::HostRoot;

/// The interface the Linux thunderbolt-net driver creates for a Thunderbolt 4 / USB4 cable.
pub const THUNDERBOLT: &str = "thunderbolt0";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Netdev {
    pub name: String,
    /// "up", "down", ... as /sys/class/net/NAME/operstate has it; None when the interface is absent.
    pub operstate: Option<String>,
    pub mtu: Option<u32>,
    /// Its addresses, e.g. "192.168.2.1/24"; None when the kernel's IPv4 tables were unreadable.
    pub ipv4: Option<Vec<String>>,
    /// What the driver answers to `ethtool -i`; None when it was not asked or did not answer.
    pub driver: Option<DriverInfo>,
    /// Why `driver` is None.
    pub driver_unavailable: Option<String>,
}

impl Netdev {
    pub fn is_up(&self) -> bool {
        self.operstate.as_deref() == Some("up")
    }
}

/// Read one interface; its driver is asked only where the node's interfaces are live.
pub fn read(root: &HostRoot, name: &str, addresses: &Ipv4Addresses, warnings: &mut Vec<String>) -> Netdev {
    let (driver, driver_unavailable) = if root.live_interfaces() {
        match ethtool::query(name) {
            Ok(info) => (Some(info), None),
            Err(why) => (None, Some(format!("ethtool ioctl on {name} failed: {why}"))),
        }
    } else {
        (None, Some("not asked under a copied host root".to_string()))
    };
    Netdev {
        name: name.to_string(),
        operstate: operstate(root, name),
        mtu: mtu(root, name, warnings),
        ipv4: addresses.of(name),
        driver,
        driver_unavailable,
    }
}

/// True when /sys/class/net has the interface.
pub fn exists(root: &HostRoot, name: &str) -> bool {
    root.metadata(format!("/sys/class/net/{name}")).is_some()
}

pub fn mtu(root: &HostRoot, name: &str, warnings: &mut Vec<String>) -> Option<u32> {
    let path = format!("/sys/class/net/{name}/mtu");
    let text = root.attribute(&path)?;
    text.parse().map_err(|_| warnings.push(format!("{path}: expected a number, found {text:?}"))).ok()
}

pub fn operstate(root: &HostRoot, name: &str) -> Option<String> {
    root.attribute(format!("/sys/class/net/{name}/operstate")).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copied_tree_never_asks_real_interfaces() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/class/net/lo")).unwrap();
        std::fs::write(dir.path().join("sys/class/net/lo/mtu"), "65536\n").unwrap();
        std::fs::write(dir.path().join("sys/class/net/lo/operstate"), "unknown\n").unwrap();
        let root = HostRoot::open(dir.path()).unwrap();
        let lo = read(&root, "lo", &Ipv4Addresses::default(), &mut Vec::new());
        assert_eq!((lo.mtu, lo.operstate.as_deref(), lo.is_up()), (Some(65536), Some("unknown"), false));
        assert_eq!(lo.driver, None);
        assert!(lo.driver_unavailable.unwrap().contains("not asked"));
        assert!(exists(&root, "lo") && !exists(&root, THUNDERBOLT));
    }

    #[test]
    fn a_bad_mtu_is_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/class/net/eth0")).unwrap();
        std::fs::write(dir.path().join("sys/class/net/eth0/mtu"), "jumbo\n").unwrap();
        let mut warnings = Vec::new();
        assert_eq!(mtu(&HostRoot::open(dir.path()).unwrap(), "eth0", &mut warnings), None);
        assert!(warnings[0].contains("/sys/class/net/eth0/mtu"), "{warnings:?}");
    }
}
