//! Host facts: everything read from the node, through one [`HostRoot`]. Read-only.
//!
//! Missing files are simply absent facts (a node without RDMA has no /sys/class/infiniband);
//! malformed ones become `warnings`, which `doctor` shows. Only an unusable host root, or a
//! file that exists but cannot be read, is an error.

pub mod cmdline;
pub mod devices;
pub mod ethtool;
pub mod firewalld;
pub mod gpu;
pub mod gpu_hangs;
pub mod groups;
pub mod installed;
pub mod ipv4;
pub mod limits;
pub mod machine_id;
pub mod netdev;
pub mod os;
pub mod rdma;
mod root;
pub mod selinux;
pub mod telemetry;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[cfg(test)]
pub use ethtool::DriverInfo;
pub use firewalld::FirewalldFacts;
pub use gpu::GpuFacts;
pub use groups::GroupFacts;
pub use limits::Memlock;
pub use netdev::Netdev;
pub use os::OsFacts;
pub use rdma::{RdmaFacts, RdmaPort};
pub use root::HostRoot;
pub use selinux::SelinuxFacts;

use crate::error::Result;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    pub gpu: GpuFacts,
    pub rdma: RdmaFacts,
    pub groups: GroupFacts,
    /// None when /proc/self/limits could not be read or understood.
    pub memlock: Option<Memlock>,
    /// The required kernel parameters found on the command line.
    pub kernel_params: BTreeMap<String, String>,
    /// /etc/default/grub's `GRUB_CMDLINE_LINUX`, when it sets one: the line doctor's fix
    /// rewrites on Debian and Ubuntu.
    #[serde(default)]
    pub grub_cmdline_linux: Option<String>,
    /// The interfaces cluster traffic may use: the RDMA ports' netdevs, then thunderbolt0.
    #[serde(default)]
    pub interfaces: Vec<Netdev>,
    /// None when the node has no firewalld configuration.
    #[serde(default)]
    pub firewalld: Option<FirewalldFacts>,
    #[serde(default)]
    pub os: OsFacts,
    /// None when SELinux is off.
    #[serde(default)]
    pub selinux: Option<SelinuxFacts>,
    /// Files that exist but could not be understood.
    pub warnings: Vec<String>,
}

impl HostFacts {
    /// Read every fact about the node under `root`, for the invoking user.
    pub fn read(root: &HostRoot) -> Result<HostFacts> {
        Self::read_for_user(root, groups::invoking_user())
    }

    pub fn read_for_user(root: &HostRoot, user: Option<String>) -> Result<HostFacts> {
        let mut warnings = Vec::new();
        let gpu = gpu::read(root, &mut warnings);
        let rdma = rdma::read(root, &mut warnings);
        let groups = groups::read(root, user, &mut warnings)?;

        let memlock = match root.read("/proc/self/limits")? {
            Some(text) => {
                limits::parse_memlock(&text).map_err(|why| warnings.push(format!("/proc/self/limits: {why}"))).ok()
            }
            None => {
                warnings.push("/proc/self/limits: missing; memlock limit unknown".into());
                None
            }
        };
        let kernel_params = root.read("/proc/cmdline")?.map(|text| cmdline::parse_required(&text)).unwrap_or_default();
        let grub_cmdline_linux = root.read("/etc/default/grub")?.and_then(|text| cmdline::grub_cmdline_linux(&text));

        let addresses = ipv4::Ipv4Addresses::read(root, &mut warnings);
        let mut names: Vec<&str> = rdma.netdevs();
        if netdev::exists(root, netdev::THUNDERBOLT) && !names.contains(&netdev::THUNDERBOLT) {
            names.push(netdev::THUNDERBOLT);
        }
        let interfaces = names.into_iter().map(|name| netdev::read(root, name, &addresses, &mut warnings)).collect();
        let firewalld = firewalld::read(root, &mut warnings);
        let os = os::read(root);
        let selinux = selinux::read(root, &mut warnings);

        Ok(HostFacts {
            gpu,
            rdma,
            groups,
            memlock,
            kernel_params,
            grub_cmdline_linux,
            interfaces,
            firewalld,
            os,
            selinux,
            warnings,
        })
    }

    /// The interface called `name`, when it is one of [`HostFacts::interfaces`].
    pub fn interface(&self, name: &str) -> Option<&Netdev> {
        self.interfaces.iter().find(|netdev| netdev.name == name)
    }

    /// Refuse to make a GPU toolbox where there is no GPU to give it.
    pub fn require_gpu(&self, root: &HostRoot) -> Result<()> {
        let missing = if self.gpu.kfd.is_none() {
            "/dev/kfd"
        } else if self.gpu.dri.is_empty() {
            "/dev/dri"
        } else {
            return Ok(());
        };
        let node =
            if root.is_system() { "this node".to_string() } else { format!("host root {}", root.path("/").display()) };
        Err(crate::error::Error::host(
            missing,
            format!(
                "{node} has no {missing}: the amdgpu driver is not loaded or this is not a GPU node, so a toolbox \
                 could not use the GPU"
            ),
            "load amdgpu (`sudo modprobe amdgpu`); `strix-toolbox doctor` shows the rest",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_node_without_gpu() {
        let mut facts = HostFacts::default();
        let error = facts.require_gpu(&HostRoot::system()).unwrap_err();
        assert_eq!(error.kind(), crate::error::ErrorKind::Host);
        let error = error.to_string();
        assert!(error.starts_with("this node has no /dev/kfd") && error.contains("doctor"), "{error}");
        facts.gpu.kfd = Some("/dev/kfd".into());
        assert!(facts.require_gpu(&HostRoot::system()).unwrap_err().to_string().contains("/dev/dri"));
        facts.gpu.dri = vec!["/dev/dri/renderD128".into()];
        facts.require_gpu(&HostRoot::system()).unwrap();
    }
}
