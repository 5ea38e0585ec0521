//! `detect` against fake host trees with real device nodes.

use serde_json::{json, Value};

use crate::support::cli::{json, run_on, stderr, stdout, strix_under};
use crate::support::host_tree::materialize;
use crate::support::netns::NetNs;

fn interface<'a>(report: &'a Value, name: &str) -> &'a Value {
    let interfaces = report["interfaces"].as_array().unwrap_or_else(|| panic!("no interfaces in {report:#}"));
    interfaces.iter().find(|i| i["name"] == name).unwrap_or_else(|| panic!("no {name} in {interfaces:#?}"))
}

#[test]
fn healthy_e810_node_reports_everything_scripts_rely_on() {
    let host = materialize("strix-e810-healthy");
    let output = run_on(host.path(), &["detect", "--json", "--container-engine", "docker"]);
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
        ["--env".into(), "NCCL_SOCKET_IFNAME==enp194s0f0".into()],
        ["--env".into(), "GLOO_SOCKET_IFNAME=enp194s0f0".into()],
        ["--env".into(), "NCCL_IB_HCA==rocep194s0f0:1".into()],
    ];
    for pair in expected_pairs {
        assert!(args.windows(2).any(|w| w == pair), "missing {pair:?} in {args:?}");
    }
    assert!(!args.iter().any(|a| a.contains("privileged") || a.contains("NCCL_IB_DISABLE")));

    assert_eq!(
        report["transport"],
        json!({"kind": "roce", "device": "rocep194s0f0", "port": 1, "netdev": "enp194s0f0", "gid_index": 3})
    );
    let roce = interface(&report, "enp194s0f0");
    assert_eq!(
        (&roce["operstate"], &roce["mtu"], &roce["ipv4"]),
        (&json!("up"), &json!(9000), &json!(["10.0.0.1/24"]))
    );
    assert_eq!(roce["driver"], Value::Null, "a copied tree never asks this machine's interfaces");
    assert!(roce["driver_unavailable"].as_str().unwrap().contains("not asked"));
    let idle = interface(&report, "enp194s0f1");
    assert_eq!((&idle["operstate"], &idle["mtu"], &idle["ipv4"]), (&json!("down"), &json!(1500), &json!([])));
    assert_eq!(report["firewalld"]["default_zone"], "FedoraWorkstation");
    assert_eq!(report["firewalld"]["network_manager"], json!({"enp194s0f0": "trusted"}));
    assert_eq!(report["os"]["kernel"], "6.18.5-200.fc43.x86_64");
    assert_eq!((&report["os"]["id"], &report["os"]["version_id"]), (&json!("fedora"), &json!("43")));
}

#[test]
fn thunderbolt_only_node_has_no_rdma_flags_and_uses_the_cable() {
    let host = materialize("strix-thunderbolt-only");
    let report = json(&run_on(host.path(), &["detect", "--json", "--container-engine", "docker"]));
    assert_eq!(report["rdma"]["devices"], serde_json::json!([]));
    assert_eq!(report["rdma"]["ports"], serde_json::json!([]));
    assert_eq!(report["memlock"]["hard"], 8388608);
    let args: Vec<String> = serde_json::from_value(report["container_args"].clone()).unwrap();
    assert!(
        !args.iter().any(|a| a.contains("infiniband") || a.contains("memlock") || a.contains("NCCL_IB_HCA")),
        "{args:?}"
    );
    assert!(args.windows(2).any(|w| w == ["--group-add", "105"]));
    for env in ["NCCL_SOCKET_IFNAME==thunderbolt0", "GLOO_SOCKET_IFNAME=thunderbolt0", "NCCL_IB_DISABLE=1"] {
        assert!(args.windows(2).any(|w| w == ["--env", env]), "missing {env} in {args:?}");
    }
    assert_eq!(report["transport"], json!({"kind": "thunderbolt_tcp", "netdev": "thunderbolt0"}));
    let thunderbolt = interface(&report, "thunderbolt0");
    assert_eq!(thunderbolt["mtu"], 65520);
    assert_eq!(thunderbolt["ipv4"], json!(["192.168.2.1/24"]));
    assert_eq!(report["firewalld"]["zone_files"], json!({"thunderbolt0": "trusted"}));
}

#[test]
fn roce_port_down_with_thunderbolt_up_falls_back_but_keeps_rdma_devices() {
    let host = materialize("strix-roce-down-thunderbolt");
    let report = json(&run_on(host.path(), &["detect", "--json", "--container-engine", "docker"]));
    assert_eq!(report["transport"]["kind"], "thunderbolt_tcp");
    let args: Vec<String> = serde_json::from_value(report["container_args"].clone()).unwrap();
    for pair in
        [["--env", "NCCL_SOCKET_IFNAME==thunderbolt0"], ["--env", "NCCL_IB_DISABLE=1"], ["--ulimit", "memlock=-1:-1"]]
    {
        assert!(args.windows(2).any(|w| w == pair), "missing {pair:?} in {args:?}");
    }
    assert!(args.iter().any(|a| a.ends_with(":/dev/infiniband")), "{args:?}");
    assert!(!args.iter().any(|a| a.contains("NCCL_IB_HCA") || a.contains("NCCL_IB_GID_INDEX")), "{args:?}");
    // The down port's MTU and address are still read.
    let roce = interface(&report, "enp194s0f0");
    assert_eq!(
        (&roce["operstate"], &roce["mtu"], &roce["ipv4"]),
        (&json!("down"), &json!(9000), &json!(["10.0.0.2/24"]))
    );
    assert_eq!(report["firewalld"]["network_manager"], json!({"thunderbolt0": "public"}));
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
    // A down port with an empty GID table: its netdev is found through its PCI function.
    assert_eq!(report["rdma"]["ports"][0]["netdev"], "enp194s0f0");
    assert_eq!(report["rdma"]["ports"][0]["mtu"], 1500);
    assert_eq!(report["rdma"]["restricted_to_gids"], json!([993]));
    assert_eq!(interface(&report, "enp194s0f0")["ipv4"], Value::Null, "no /proc/net tables: unknown, not none");
    assert_eq!(report["transport"], json!({"kind": "ethernet_tcp"}));
    assert_eq!(report["os"]["id"], "debian");
}

#[test]
fn human_summary_names_the_essentials() {
    let host = materialize("strix-e810-healthy");
    let output = run_on(host.path(), &["detect"]);
    assert!(output.status.success());
    let text = stdout(&output);
    for needle in [
        "gfx1151",
        "rocep194s0f0/1",
        "roce_v2_gid_index=3",
        "render: 105",
        "memlock",
        "enp194s0f0: up mtu=9000 ipv4=10.0.0.1/24",
        "transport: RoCE",
        "enp194s0f0=trusted",
        "Fedora Linux 43 (Workstation Edition) / kernel 6.18.5-200.fc43.x86_64",
    ] {
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

/// With --json a failure is also an error object on stdout, naming its kind; the text stays on stderr.
#[test]
fn a_failure_under_json_is_an_error_object_naming_its_kind() {
    let output = run_on(std::path::Path::new("/nonexistent/host"), &["detect", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let error = &json(&output)["error"];
    assert_eq!(error["kind"], "host", "{error}");
    assert!(error["message"].as_str().unwrap().starts_with("host root /nonexistent/host cannot be used"), "{error}");
    assert_eq!(error["fix"], "pass an existing directory to --host-root (or unset STRIX_HOST_ROOT)");
    assert_eq!(error["nodes"], json!([]));
    assert!(stderr(&output).contains("Fix: pass an existing directory"), "{}", stderr(&output));
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

/// The real thing end to end: a veth named thunderbolt0 in a namespace of the test's own, read
/// through `/` there (sysfs, /proc/net) and asked through the ethtool ioctl.
#[test]
fn a_live_thunderbolt_link_is_read_from_the_kernel_and_becomes_the_transport() {
    let netns = NetNs::new();
    netns.veth("thunderbolt0", "tbpeer");
    netns.ip(&["link", "set", "thunderbolt0", "mtu", "65520"]);
    netns.ip(&["addr", "add", "192.168.2.1/24", "dev", "thunderbolt0"]);
    let output = strix_under(&netns.exec())
        .args(["--host-root", "/", "detect", "--json", "--container-engine", "docker"])
        .output()
        .expect("run strix-toolbox in the namespace");
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json(&output);
    let thunderbolt = interface(&report, "thunderbolt0");
    assert_eq!(thunderbolt["operstate"], "up");
    assert_eq!(thunderbolt["mtu"], 65520);
    assert_eq!(thunderbolt["ipv4"], json!(["192.168.2.1/24"]));
    assert_eq!(thunderbolt["driver"]["driver"], "veth", "{thunderbolt:#}");
    assert_eq!(report["transport"], json!({"kind": "thunderbolt_tcp", "netdev": "thunderbolt0"}));
    let args: Vec<String> = serde_json::from_value(report["container_args"].clone()).unwrap();
    assert!(args.windows(2).any(|w| w == ["--env", "NCCL_IB_DISABLE=1"]), "{args:?}");
}

/// A copied tree's netdev stands for a veth of the same name in the test's namespace only when
/// asked (STRIX_LIVE_INTERFACES=1); the driver then comes from the ethtool ioctl on it.
#[test]
fn asked_under_a_copied_tree_the_ethtool_ioctl_reads_a_real_veth() {
    let host = materialize("strix-e810-healthy");
    let netns = NetNs::new();
    netns.veth("enp194s0f0", "peer0");
    let output = strix_under(&netns.exec())
        .env("STRIX_LIVE_INTERFACES", "1")
        .arg("--host-root")
        .arg(host.path())
        .args(["detect", "--json"])
        .output()
        .expect("run strix-toolbox in the namespace");
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json(&output);
    let veth = interface(&report, "enp194s0f0");
    assert_eq!(veth["driver"]["driver"], "veth", "{veth:#}");
    assert_eq!(veth["driver"]["firmware"], Value::Null, "veth has no firmware");
    assert_eq!(veth["driver_unavailable"], Value::Null);
    let missing = interface(&report, "enp194s0f1");
    assert_eq!(missing["driver"], Value::Null);
    let why = missing["driver_unavailable"].as_str().unwrap();
    assert!(why.contains("enp194s0f1") && why.contains("No such device"), "{why}");
}
