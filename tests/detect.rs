//! `detect` against fake host trees with real device nodes.

mod support;

use support::cli::{json, run_on, stderr, stdout};
use support::host_tree::materialize;

#[test]
fn healthy_e810_node_reports_everything_scripts_rely_on() {
    let host = materialize("strix-e810-healthy");
    let output = run_on(host.path(), &["detect", "--json", "--engine", "docker"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json(&output);

    assert_eq!(report["gpu"]["kfd"], "/dev/kfd");
    assert_eq!(report["gpu"]["dri"], serde_json::json!(["/dev/dri/card0", "/dev/dri/renderD128"]));
    assert_eq!(report["gpu"]["gfx_targets"], serde_json::json!(["gfx1151"]));
    assert_eq!(report["gpu"]["gtt_bytes"], 126976u64 * 1024 * 1024);
    assert_eq!(report["gpu"]["vram_bytes"], 512u64 * 1024 * 1024);

    assert_eq!(
        report["rdma"]["devices"],
        serde_json::json!(["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0", "/dev/infiniband/uverbs1"])
    );
    let ports = report["rdma"]["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 2);
    let port = &ports[0];
    assert_eq!(port["device"], "rocep194s0f0");
    assert_eq!(port["port"], 1);
    assert_eq!(port["state"], "4: ACTIVE");
    assert_eq!(port["phys_state"], "5: LinkUp");
    assert_eq!(port["link_layer"], "Ethernet");
    assert_eq!(port["netdev"], "enp194s0f0");
    assert_eq!(port["mtu"], 9000);
    assert_eq!(port["roce_v2_gid_index"], 3);
    assert_eq!(ports[1]["roce_v2_gid_index"], serde_json::Value::Null, "no IPv4 on the idle port");

    assert_eq!(report["groups"], serde_json::json!({"video": 39, "render": 105, "rdma": 993}));
    assert_eq!(report["memlock"], serde_json::json!({"soft": null, "hard": null}));
    assert_eq!(report["kernel_params"]["iommu"], "pt");
    assert_eq!(report["kernel_params"]["amdgpu.gttsize"], "126976");

    let args: Vec<String> = serde_json::from_value(report["container_args"].clone()).unwrap();
    let root = host.path().display();
    let expected_pairs = [
        ["--device".to_string(), format!("{root}/dev/kfd:/dev/kfd")],
        ["--device".into(), format!("{root}/dev/dri:/dev/dri")],
        ["--device".into(), format!("{root}/dev/infiniband:/dev/infiniband")],
        ["--group-add".into(), "39".into()],
        ["--group-add".into(), "105".into()],
        ["--group-add".into(), "993".into()],
        ["--ulimit".into(), "memlock=-1:-1".into()],
        ["--security-opt".into(), "seccomp=unconfined".into()],
        ["--env".into(), "NCCL_IB_GID_INDEX=3".into()],
        ["--env".into(), "NCCL_SOCKET_IFNAME=enp194s0f0".into()],
        ["--env".into(), "GLOO_SOCKET_IFNAME=enp194s0f0".into()],
    ];
    for pair in expected_pairs {
        assert!(args.windows(2).any(|w| w == pair), "missing {pair:?} in {args:?}");
    }
    assert!(!args.iter().any(|a| a.contains("privileged")));
}

#[test]
fn thunderbolt_only_node_has_no_rdma_flags() {
    let host = materialize("strix-thunderbolt-only");
    let report = json(&run_on(host.path(), &["detect", "--json", "--engine", "docker"]));
    assert_eq!(report["rdma"]["devices"], serde_json::json!([]));
    assert_eq!(report["rdma"]["ports"], serde_json::json!([]));
    assert_eq!(report["memlock"]["hard"], 8388608);
    let args: Vec<String> = serde_json::from_value(report["container_args"].clone()).unwrap();
    assert!(!args.iter().any(|a| a.contains("infiniband") || a.contains("memlock") || a.contains("NCCL")), "{args:?}");
    assert!(args.windows(2).any(|w| w == ["--group-add", "105"]));
}

#[test]
fn misconfigured_node_reports_warnings_not_a_crash() {
    let host = materialize("strix-misconfigured");
    let output = run_on(host.path(), &["detect", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json(&output);
    let warnings = report["warnings"].to_string();
    assert!(warnings.contains("/etc/group line 5"), "{warnings}");
    assert!(warnings.contains("gfx_target_version is not a number"), "{warnings}");
    assert_eq!(report["gpu"]["gfx_targets"], serde_json::json!(["gfx1151"]));
    assert_eq!(report["rdma"]["ports"][0]["roce_v2_gid_index"], serde_json::Value::Null);
}

#[test]
fn human_summary_names_the_essentials() {
    let host = materialize("strix-e810-healthy");
    let output = run_on(host.path(), &["detect"]);
    assert!(output.status.success());
    let text = stdout(&output);
    for needle in ["gfx1151", "rocep194s0f0/1", "roce_v2_gid_index=3", "render: 105", "memlock"] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
}

#[test]
fn bad_host_root_is_a_clear_error() {
    let output = run_on(std::path::Path::new("/nonexistent/host"), &["detect"]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(message.contains("/nonexistent/host") && message.contains("--host-root"), "{message}");

    let file = tempfile::NamedTempFile::new().unwrap();
    let output = run_on(file.path(), &["detect"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("not a directory"), "{}", stderr(&output));
}

#[test]
fn unreadable_group_file_is_an_error_naming_it() {
    let host = materialize("strix-thunderbolt-only");
    let group = host.path().join("etc/group");
    std::fs::remove_file(&group).unwrap();
    std::fs::create_dir(&group).unwrap(); // a directory where a file should be: read fails
    let output = run_on(host.path(), &["detect"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("etc/group"), "{}", stderr(&output));
}

#[test]
fn empty_host_root_reports_nothing_found() {
    let empty = tempfile::tempdir().unwrap();
    let report = json(&run_on(empty.path(), &["detect", "--json"]));
    assert_eq!(report["gpu"]["kfd"], serde_json::Value::Null);
    assert_eq!(report["groups"], serde_json::json!({}));
    assert_eq!(report["memlock"], serde_json::Value::Null);
}
