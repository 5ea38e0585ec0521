//! `doctor` against fake host trees: verdicts, fixes, exit codes.

use serde_json::Value;

use crate::support::cli::{json, run_on, stderr, stdout, strix_under};
use crate::support::host_tree::materialize;
use crate::support::netns::NetNs;

fn has_check(report: &Value, name: &str) -> bool {
    report["checks"].as_array().unwrap().iter().any(|c| c["name"] == name)
}

fn message(report: &Value, name: &str) -> String {
    check(report, name)["message"].as_str().unwrap_or_default().to_string()
}

fn fix(report: &Value, name: &str) -> String {
    check(report, name)["fix"].as_str().unwrap_or_default().to_string()
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {report}"))
}

#[test]
fn healthy_node_passes() {
    let host = materialize("strix-e810-healthy");
    let output = run_on(host.path(), &["doctor", "--json"]);
    let report = json(&output);
    assert_eq!(output.status.code(), Some(0), "{report:#}");
    assert_eq!(report["ok"], true);
    assert_eq!(report["fail"], 0);
    for name in [
        "gpu",
        "kernel:iommu",
        "rdma:rocep194s0f0/1",
        "rdma:rocep194s0f0/1:mtu",
        "memlock",
        "group:render",
        "group:rdma",
        "kernel:gtt-vs-ttm",
        "kernel:gtt-size",
        "os",
        "kernel",
        "transport",
        "firewall:enp194s0f0",
    ] {
        assert_eq!(check(&report, name)["status"], "pass", "{name}: {report:#}");
    }
    // The idle second port of a two-node link is a warning, not a failure, and its MTU is moot.
    assert_eq!(check(&report, "rdma:rocep194s0f1/1")["status"], "warn");
    assert!(!has_check(&report, "rdma:rocep194s0f1/1:mtu"));
    assert!(message(&report, "transport").starts_with("RoCE: RCCL uses rocep194s0f0 port 1 on enp194s0f0"));
    assert!(message(&report, "firewall:enp194s0f0").contains("trusted (its NetworkManager connection)"));
    // A copied tree's NIC is not asked: information, never a failure; nor is what HIP reports.
    assert_eq!(check(&report, "nic:enp194s0f0")["status"], "info");
    assert_eq!(check(&report, "gpu:memory")["status"], "info");
    assert_eq!(report["info"], 3, "one per port's netdev, and the GPU's memory: {report:#}");
}

#[test]
fn thunderbolt_only_node_warns_about_tcp() {
    let host = materialize("strix-thunderbolt-only");
    let output = run_on(host.path(), &["doctor", "--json"]);
    let report = json(&output);
    assert_eq!(output.status.code(), Some(0), "{report:#}");
    let rdma = check(&report, "rdma");
    assert_eq!(rdma["status"], "warn");
    assert!(rdma["fix"].as_str().unwrap().contains("irdma"));
    assert!(!has_check(&report, "memlock"), "memlock only matters with RDMA");
    assert!(!has_check(&report, "group:rdma"), "rdma membership only matters with RDMA");

    let transport = check(&report, "transport");
    assert_eq!(transport["status"], "info");
    assert!(message(&report, "transport").starts_with("Thunderbolt TCP over thunderbolt0"), "{transport}");
    for name in ["thunderbolt0", "thunderbolt0:mtu", "thunderbolt0:ipv4", "firewall:thunderbolt0"] {
        assert_eq!(check(&report, name)["status"], "pass", "{name}: {report:#}");
    }
    assert_eq!(message(&report, "thunderbolt0:ipv4"), "thunderbolt0 192.168.2.1/24");
}

#[test]
fn roce_down_and_thunderbolt_up_is_the_fallback_with_its_own_problems() {
    let host = materialize("strix-roce-down-thunderbolt");
    let output = run_on(host.path(), &["doctor", "--json"]);
    let report = json(&output);
    assert_eq!(output.status.code(), Some(0), "the cable still links the node: {report:#}");
    assert!(message(&report, "transport").starts_with("Thunderbolt TCP"));
    assert_eq!(check(&report, "rdma:rocep194s0f0/1")["status"], "warn");
    assert!(message(&report, "rdma:rocep194s0f0/1:mtu").contains("MTU 9000 (port down)"));
    // NetworkManager's zone for the cable wins over the zone file that lists it as trusted.
    let firewall = check(&report, "firewall:thunderbolt0");
    assert_eq!(firewall["status"], "warn");
    assert!(message(&report, "firewall:thunderbolt0").contains("zone public (its NetworkManager connection)"));
    assert_eq!(
        fix(&report, "firewall:thunderbolt0"),
        "`sudo firewall-cmd --permanent --zone=trusted --change-interface=thunderbolt0`, then `sudo firewall-cmd --reload`"
    );
    assert!(!has_check(&report, "firewall:enp194s0f0"), "only the link in use");
}

#[test]
fn misconfigured_node_fails_with_fixes() {
    let host = materialize("strix-misconfigured");
    let output = run_on(host.path(), &["doctor", "--json"]);
    let report = json(&output);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(report["ok"], false);

    let port = check(&report, "rdma:rocep194s0f0/1");
    assert_eq!(port["status"], "fail");
    let memlock = check(&report, "memlock");
    assert_eq!(memlock["status"], "fail");
    assert!(memlock["fix"].as_str().unwrap().contains("/etc/security/limits.d/"));
    let render = check(&report, "group:render");
    assert_eq!(render["status"], "fail");
    assert!(render["fix"].as_str().unwrap().contains("usermod -aG render alice"));
    // The RDMA nodes are 0660 root:rdma, so rdma membership matters here.
    assert_eq!(check(&report, "group:rdma")["status"], "fail");
    assert_eq!(check(&report, "kernel:iommu")["status"], "warn");
    assert!(check(&report, "kernel:iommu")["message"].as_str().unwrap().contains("iommu=on"));
    assert_eq!(check(&report, "kernel:pcie_aspm")["status"], "warn");
    // Debian: one fix for every parameter, the whole GRUB_CMDLINE_LINUX line, on the first one.
    assert_eq!(
        fix(&report, "kernel:iommu"),
        "in /etc/default/grub make it `GRUB_CMDLINE_LINUX=\"iommu=pt amdgpu.gttsize=126976 ttm.pages_limit=32505856 \
         pci=realloc pcie_aspm=off\"`, then `sudo update-grub` and reboot"
    );
    assert_eq!(check(&report, "kernel:pci")["fix"], Value::Null, "given once: {report:#}");
    assert_eq!(check(&report, "kernel:pcie_aspm")["fix"], Value::Null, "given once: {report:#}");
    assert_eq!(check(&report, "kernel:gtt-vs-ttm")["status"], "warn");
    assert!(fix(&report, "kernel:gtt-vs-ttm").starts_with("set ttm.pages_limit=32505856"));
    let gtt = check(&report, "kernel:gtt-size");
    assert_eq!(gtt["status"], "warn");
    assert!(message(&report, "kernel:gtt-size").contains("4.00 GiB of GTT"), "{gtt}");

    // The port is down, and its MTU and address problems show anyway.
    let mtu = check(&report, "rdma:rocep194s0f0/1:mtu");
    assert_eq!(mtu["status"], "warn");
    assert!(message(&report, "rdma:rocep194s0f0/1:mtu").contains("enp194s0f0 MTU is 1500 (port down)"), "{mtu}");
    assert_eq!(check(&report, "rdma:rocep194s0f0/1:gid")["status"], "fail");

    let firewall = check(&report, "firewall:enp194s0f0");
    assert_eq!(firewall["status"], "warn");
    assert!(message(&report, "firewall:enp194s0f0").contains("zone public (the default zone)"));
    assert_eq!(
        fix(&report, "firewall:enp194s0f0"),
        "`sudo firewall-cmd --permanent --zone=trusted --add-interface=enp194s0f0`, then `sudo firewall-cmd --reload`"
    );
    assert!(message(&report, "transport").starts_with("plain Ethernet TCP"));
    for name in ["os", "kernel"] {
        assert_eq!(check(&report, name)["status"], "info", "{name}: information, never a failure");
    }
    assert!(message(&report, "os").contains("Debian GNU/Linux 12"));
    assert!(report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "host-files" && c["message"].as_str().unwrap().contains("/etc/group line 5")));
}

#[test]
fn text_output_ends_with_a_tally() {
    let host = materialize("strix-misconfigured");
    let output = run_on(host.path(), &["doctor"]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(text.contains("FAIL") && text.contains("fix:"), "{text}");
    assert!(text.contains("info  os "), "{text}");
    let tally = text.trim_end().lines().last().unwrap();
    assert!(tally.contains("5 failed") && tally.ends_with("4 info"), "{text}");
}

#[test]
fn node_without_gpu_fails_the_gpu_check() {
    let empty = tempfile::tempdir().unwrap();
    let output = run_on(empty.path(), &["doctor", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let report = json(&output);
    assert_eq!(check(&report, "gpu")["status"], "fail");
    assert!(check(&report, "gpu")["fix"].as_str().unwrap().contains("amdgpu"));
}

/// What HIP may report (the VRAM carve-out) beside the GTT, and what the model-aware plan counts:
/// the GTT less what is in use less the reserve. A carve-out larger than the GTT is a warning: the
/// plan's figure is then not what the GPU gets.
#[test]
fn doctor_says_what_hip_reports_and_what_the_plan_counts() {
    let host = materialize("strix-e810-healthy");
    let report = json(&run_on(host.path(), &["doctor", "--json"]));
    assert_eq!(check(&report, "gpu:memory")["status"], "info", "{report:#}");
    assert_eq!(
        message(&report, "gpu:memory"),
        "HIP may report 512.00 MiB (the VRAM carve-out, mem_info_vram_total: ROCm/hip#3892) where the GPU maps 124.00 GiB \
         of GTT; the plan counts the GTT: 124.00 GiB less 1.00 GiB in use less a 4.00 GiB reserve = 119.00 GiB for a \
         model"
    );

    // The BIOS gave the iGPU 96 GiB, and the GTT was left at its default.
    let device = host.path().join("sys/class/drm/card0/device");
    std::fs::write(device.join("mem_info_vram_total"), (96u64 << 30).to_string()).unwrap();
    std::fs::write(device.join("mem_info_gtt_total"), (15u64 << 30).to_string()).unwrap();
    std::fs::write(device.join("mem_info_gtt_used"), "0").unwrap();
    let report = json(&run_on(host.path(), &["doctor", "--json"]));
    assert_eq!(check(&report, "gpu:memory")["status"], "warn", "{report:#}");
    let said = message(&report, "gpu:memory");
    assert!(said.starts_with("the VRAM carve-out (96.00 GiB) is larger than the GTT (15.00 GiB)"), "{said}");
    assert!(said.contains("15.00 GiB less 0 B in use less a 4.00 GiB reserve = 11.00 GiB"), "{said}");
    assert!(fix(&report, "gpu:memory").contains("512 MB"), "{report:#}");
}

/// The NIC firmware check on a real ethtool answer: a veth named after the tree's RoCE netdev, in
/// a namespace of the test's own. Neither a driver other than ice nor a missing interface fails.
#[test]
fn firmware_of_live_interfaces_is_information_unless_an_old_e810() {
    let host = materialize("strix-e810-healthy");
    let netns = NetNs::new();
    netns.veth("enp194s0f0", "peer0");
    let output = strix_under(&netns.exec())
        .env("STRIX_LIVE_INTERFACES", "1")
        .arg("--host-root")
        .arg(host.path())
        .args(["doctor", "--json"])
        .output()
        .expect("run strix-toolbox in the namespace");
    let report = json(&output);
    assert_eq!(output.status.code(), Some(0), "{report:#}\n{}", stderr(&output));
    let veth = check(&report, "nic:enp194s0f0");
    assert_eq!(veth["status"], "info");
    assert!(message(&report, "nic:enp194s0f0").contains("driver veth, firmware not reported"), "{veth}");
    let missing = check(&report, "nic:enp194s0f1");
    assert_eq!(missing["status"], "info");
    assert!(message(&report, "nic:enp194s0f1").contains("No such device"), "{missing}");
}

/// SELinux read from selinuxfs in the tree: enforcing with container_use_devices on (the healthy
/// node), enforcing with it off, permissive, and off (no selinuxfs: the Debian node).
#[test]
fn selinux_enforcing_permissive_and_off() {
    let verdict = |fixture: &str| {
        let host = materialize(fixture);
        let report = json(&run_on(host.path(), &["doctor", "--json"]));
        (
            check(&report, "selinux")["status"].as_str().unwrap().to_string(),
            message(&report, "selinux"),
            fix(&report, "selinux"),
        )
    };
    let (status, message, _) = verdict("strix-e810-healthy");
    assert_eq!(status, "pass", "{message}");
    assert!(message.contains("enforcing and container_use_devices is on"), "{message}");

    let (status, message, fix) = verdict("strix-selinux-enforcing");
    assert_eq!(status, "fail", "{message}");
    assert!(message.contains("cannot open /dev/kfd and /dev/dri"), "{message}");
    assert_eq!(fix, "`sudo setsebool -P container_use_devices 1`");

    let (status, message, fix) = verdict("strix-selinux-permissive");
    assert_eq!(status, "warn", "{message}");
    assert!(message.contains("permissive"), "{message}");
    assert_eq!(fix, "`sudo setsebool -P container_use_devices 1`");

    let (status, message, _) = verdict("strix-misconfigured");
    assert_eq!(status, "pass", "{message}");
    assert!(message.starts_with("SELinux is off"), "{message}");
}
