//! Checks over host facts, each `pass`/`warn`/`fail` with what was found and what fixes it.

use std::os::unix::fs::MetadataExt;

use serde::{Deserialize, Serialize};

use crate::host::cmdline::REQUIRED_PARAMS;
use crate::host::{HostFacts, HostRoot};
use crate::installed::Installed;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Fail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// Short stable identifier, e.g. "gpu", "kernel:iommu", "rdma:rocep1s0f0/1".
    pub name: String,
    pub status: Status,
    pub message: String,
    /// The command or file that fixes it (None when passing).
    pub fix: Option<String>,
}

fn check(name: impl Into<String>, status: Status, message: impl Into<String>, fix: Option<String>) -> Check {
    Check { name: name.into(), status, message: message.into(), fix }
}

const LIMITS_FILE: &str = "/etc/security/limits.d/99-rdma-memlock.conf";
const GRUB_FIX: &str = "add it to GRUB_CMDLINE_LINUX in /etc/default/grub, then \
    `sudo grub2-mkconfig -o /boot/grub2/grub.cfg` (Fedora) or `sudo update-grub` (Debian/Ubuntu) and reboot";

/// Every check, in the order a person would fix them.
pub fn run_checks(root: &HostRoot, facts: &HostFacts, installed: &Installed) -> Vec<Check> {
    let mut checks = Vec::new();
    gpu_checks(facts, &mut checks);
    kernel_checks(facts, &mut checks);
    rdma_checks(facts, &mut checks);
    group_checks(root, facts, &mut checks);
    tool_checks(installed, &mut checks);
    for warning in &facts.warnings {
        checks.push(check(
            "host-files",
            Status::Warn,
            warning.clone(),
            Some("check the file named; it was ignored".into()),
        ));
    }
    checks
}

fn gpu_checks(facts: &HostFacts, checks: &mut Vec<Check>) {
    let gpu = &facts.gpu;
    let load_driver = Some("load the amdgpu driver (`sudo modprobe amdgpu`) on a Strix Halo node".to_string());
    if gpu.kfd.is_none() {
        checks.push(check(
            "gpu",
            Status::Fail,
            "/dev/kfd not found: no ROCm-capable GPU driver is loaded",
            load_driver.clone(),
        ));
    } else if !gpu.gfx_targets.iter().any(|t| t == "gfx1151") {
        let found = if gpu.gfx_targets.is_empty() { "none".to_string() } else { gpu.gfx_targets.join(", ") };
        checks.push(check(
            "gpu",
            Status::Fail,
            format!("no gfx1151 GPU in the KFD topology (found: {found}); the image's kernels are built for gfx1151"),
            Some("run on a Strix Halo (Ryzen AI Max+) node; for another GPU use an image built for its target".into()),
        ));
    } else {
        let memory = match gpu.gtt_bytes {
            Some(gtt) => format!(", GTT {}", gib(gtt)),
            None => String::new(),
        };
        checks.push(check("gpu", Status::Pass, format!("gfx1151 GPU at /dev/kfd{memory}"), None));
    }
    if gpu.dri.iter().any(|p| p.to_string_lossy().contains("renderD")) {
        checks.push(check("gpu:render-node", Status::Pass, "render node present under /dev/dri", None));
    } else {
        checks.push(check("gpu:render-node", Status::Fail, "no render node (renderD*) under /dev/dri", load_driver));
    }
}

fn kernel_checks(facts: &HostFacts, checks: &mut Vec<Check>) {
    for (name, wanted) in REQUIRED_PARAMS {
        let found = facts.kernel_params.get(name);
        let (status, message) = match (found, wanted) {
            (None, Some(value)) => (Status::Warn, format!("{name}={value} is not on the kernel command line")),
            (None, None) => (Status::Warn, format!("{name} is not set on the kernel command line")),
            (Some(value), Some(want)) if value != want => (
                Status::Warn,
                format!("{name}={value} on the kernel command line; the cluster guide wants {name}={want}"),
            ),
            (Some(value), _) => (Status::Pass, format!("{name}={value}")),
        };
        let fix = (status != Status::Pass).then(|| {
            let example = wanted.map_or_else(|| example_value(name), str::to_string);
            format!("{name}={example}: {GRUB_FIX}")
        });
        checks.push(check(format!("kernel:{name}"), status, message, fix));
    }
    // GTT beyond what TTM may allocate is unusable: pages_limit (4 KiB pages) must cover gttsize (MiB).
    let number = |name: &str| facts.kernel_params.get(name).and_then(|v| v.parse::<u64>().ok());
    if let (Some(gtt_mib), Some(pages)) = (number("amdgpu.gttsize"), number("ttm.pages_limit")) {
        if pages * 4096 < gtt_mib * 1024 * 1024 {
            checks.push(check(
                "kernel:gtt-vs-ttm",
                Status::Warn,
                format!(
                    "ttm.pages_limit={pages} caps GPU memory at {} but amdgpu.gttsize asks for {}",
                    gib(pages * 4096),
                    gib(gtt_mib * 1024 * 1024)
                ),
                Some(format!("set ttm.pages_limit={}: {GRUB_FIX}", gtt_mib * 256)),
            ));
        }
    }
}

/// What the guide uses on a 128 GB node.
fn example_value(name: &str) -> String {
    match name {
        "amdgpu.gttsize" => "126976".into(),
        "ttm.pages_limit" => "32505856".into(),
        _ => "VALUE".into(),
    }
}

fn rdma_checks(facts: &HostFacts, checks: &mut Vec<Check>) {
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
            // An idle second port is normal (one cable to the peer); only no usable port fails.
            let status = if rdma.nccl_port().is_some() { Status::Warn } else { Status::Fail };
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
            continue;
        }
        match port.mtu {
            Some(mtu) if mtu >= 9000 => {
                checks.push(check(format!("{name}:mtu"), Status::Pass, format!("{netdev} MTU {mtu}"), None))
            }
            mtu => checks.push(check(
                format!("{name}:mtu"),
                Status::Warn,
                format!(
                    "{netdev} MTU is {}; RoCE wants jumbo frames (9000) end to end",
                    mtu.map_or("unknown".into(), |m| m.to_string())
                ),
                Some(format!(
                    "`sudo ip link set dev {netdev} mtu 9000`, persisted with \
                    `sudo nmcli connection modify {netdev} 802-3-ethernet.mtu 9000` (and the switch port)"
                )),
            )),
        }
        if port.link_layer.as_deref() == Some("Ethernet") && port.roce_v2_gid_index.is_none() {
            checks.push(check(format!("{name}:gid"), Status::Fail,
                format!("no RoCE v2 GID with an IPv4 address on {netdev}: NCCL_IB_GID_INDEX cannot be set"),
                Some(format!("give {netdev} an IPv4 address (`sudo nmcli connection modify {netdev} ipv4.addresses 10.0.0.N/24 ipv4.method manual`)"))));
        }
    }
    match &facts.memlock {
        Some(memlock) if memlock.hard_is_unlimited() => {
            checks.push(check("memlock", Status::Pass, "memlock hard limit is unlimited", None));
        }
        Some(memlock) => checks.push(check("memlock", Status::Fail,
            format!("memlock hard limit is {} bytes: RDMA pins memory, and a rootless engine cannot raise it, so the toolbox would fail at start",
                memlock.hard.unwrap_or(0)),
            Some(format!("create {LIMITS_FILE} with `* soft memlock unlimited` and `* hard memlock unlimited`, then log in again")))),
        None => checks.push(check("memlock", Status::Warn, "memlock limit unknown (/proc/self/limits unreadable)", None)),
    }
}

fn group_checks(root: &HostRoot, facts: &HostFacts, checks: &mut Vec<Check>) {
    let groups = &facts.groups;
    let Some(user) = &groups.user else {
        checks.push(check("groups", Status::Warn, "cannot tell who the user is (USER unset)", Some("set USER".into())));
        return;
    };
    let mut needed = vec!["render", "video"];
    // rdma matters only where the RDMA nodes are restricted to that group.
    if rdma_nodes_group_restricted(root, facts) {
        needed.push("rdma");
    }
    for name in needed {
        let check_name = format!("group:{name}");
        match (groups.gids.get(name), groups.member.get(name)) {
            (None, _) => {
                checks.push(check(check_name, Status::Warn, format!("group {name} does not exist in /etc/group"), None))
            }
            (Some(_), Some(true)) => checks.push(check(check_name, Status::Pass, format!("{user} is in {name}"), None)),
            (Some(gid), _) => checks.push(check(
                check_name,
                Status::Fail,
                format!("{user} is not in {name} (gid {gid}): the device nodes it guards stay closed in the toolbox"),
                Some(format!("`sudo usermod -aG {name} {user}`, then log in again")),
            )),
        }
    }
}

/// True when /dev/infiniband nodes are owned by the rdma group and closed to others.
fn rdma_nodes_group_restricted(root: &HostRoot, facts: &HostFacts) -> bool {
    let Some(rdma_gid) = facts.groups.gids.get("rdma") else { return false };
    facts
        .rdma
        .devices
        .iter()
        .any(|node| root.metadata(node).is_some_and(|m| m.gid() == *rdma_gid && m.mode() & 0o006 != 0o006))
}

fn tool_checks(installed: &Installed, checks: &mut Vec<Check>) {
    match (&installed.podman, &installed.docker) {
        (Some(path), _) | (None, Some(path)) => {
            checks.push(check("engine", Status::Pass, format!("container engine {}", path.display()), None))
        }
        (None, None) => checks.push(check(
            "engine",
            Status::Fail,
            "neither podman nor docker is installed",
            Some("`sudo dnf install podman` (Fedora) or `sudo apt-get install podman`".into()),
        )),
    }
    match (&installed.toolbox, &installed.distrobox) {
        (Some(path), _) | (None, Some(path)) => {
            checks.push(check("manager", Status::Pass, format!("toolbox manager {}", path.display()), None))
        }
        (None, None) => checks.push(check("manager", Status::Warn,
            "neither toolbox nor distrobox is installed: refresh will create a native container (enter it with `strix-toolbox enter`)",
            Some("`sudo dnf install toolbox` for `toolbox enter` integration".into()))),
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}
