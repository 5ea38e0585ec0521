//! `doctor` against fake host trees: verdicts, fixes, exit codes.

mod support;

use serde_json::Value;
use support::cli::{json, run_on, stdout};
use support::host_tree::materialize;

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
    ] {
        assert_eq!(check(&report, name)["status"], "pass", "{name}: {report:#}");
    }
    // The idle second port of a two-node link is a warning, not a failure.
    assert_eq!(check(&report, "rdma:rocep194s0f1/1")["status"], "warn");
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
    assert!(
        report["checks"].as_array().unwrap().iter().all(|c| c["name"] != "memlock"),
        "memlock only matters with RDMA"
    );
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
    assert_eq!(check(&report, "kernel:gtt-vs-ttm")["status"], "warn");
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
    assert!(text.trim_end().lines().last().unwrap().contains("failed"), "{text}");
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
