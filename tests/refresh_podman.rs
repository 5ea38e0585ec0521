//! `refresh` end to end on a real podman API service with a loopback registry and a fake host
//! tree whose device nodes are real (mknod).

mod common;
mod support;

use common::{run_strix, stand_in_image, PodmanService, Registry};
use support::cli::{json, stderr};
use support::host_tree::materialize;

const CREATED: &str = "2026-11-01T10:00:00Z";

fn refresh(podman: &PodmanService, host: &std::path::Path, image: &str, extra: &[&str]) -> std::process::Output {
    let host = host.to_str().unwrap();
    let mut args = vec!["--host-root", host, "--json", "refresh", "--image", image, "--name", "vllm", "--manager", "native"];
    args.extend(extra);
    run_strix(&podman.env(), &args)
}

#[test]
fn creates_the_right_container_then_a_second_refresh_is_a_no_op() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let image = stand_in_image(&podman, &registry, "kyuz0/vllm:latest", CREATED);
    let host = materialize("strix-e810-healthy");

    let output = refresh(&podman, host.path(), &image, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = json(&output);
    assert_eq!(summary["action"], "created");
    assert_eq!(summary["pin"], "20261101-100000");

    let inspect = podman.inspect("vllm");
    let root = host.path().display().to_string();
    let devices: Vec<String> = inspect["HostConfig"]["Devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["PathInContainer"].as_str().unwrap().to_string())
        .collect();
    for device in ["/dev/kfd", "/dev/dri/renderD128", "/dev/dri/card0", "/dev/infiniband/uverbs0", "/dev/infiniband/rdma_cm"] {
        assert!(devices.iter().any(|d| d == device), "{device} missing from {devices:?}");
    }
    assert_eq!(inspect["HostConfig"]["GroupAdd"], serde_json::json!(["39", "105", "993"]));
    let ulimits = inspect["HostConfig"]["Ulimits"].to_string();
    assert!(ulimits.contains("RLIMIT_MEMLOCK") && ulimits.contains("-1") || ulimits.contains("memlock"), "{ulimits}");
    let security = inspect["HostConfig"]["SecurityOpt"].to_string();
    assert!(security.contains("seccomp=unconfined"), "{security}");
    assert_eq!(inspect["HostConfig"]["Privileged"], false);
    assert_eq!(inspect["HostConfig"]["NetworkMode"], "host");
    // (podman 4.3 reports IpcMode "shareable" even for host IPC; the enter test checks the real namespace.)
    let labels = &inspect["Config"]["Labels"];
    assert_eq!(labels["io.github.strix-toolbox.managed"], "true");
    assert_eq!(labels["io.github.strix-toolbox.pin"], "20261101-100000");
    assert_eq!(labels["io.github.strix-toolbox.image"], image);
    let env = inspect["Config"]["Env"].to_string();
    assert!(env.contains("NCCL_IB_GID_INDEX=3") && env.contains("NCCL_SOCKET_IFNAME=enp194s0f0"), "{env}");
    let create_command = inspect["Config"]["CreateCommand"].to_string();
    assert!(create_command.contains(&format!("{root}/dev/kfd:/dev/kfd")), "{create_command}");
    // The image is pinned under its date so a later refresh cannot take it away.
    let repository = image.rsplit_once(':').unwrap().0;
    podman.podman_ok(&["image", "exists", &format!("{repository}:20261101-100000")]);

    let id = inspect["Id"].clone();
    let output = refresh(&podman, host.path(), &image, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = json(&output);
    assert_eq!(summary["action"], "unchanged", "{summary:#}");
    assert_eq!(summary["steps"], serde_json::json!([]));
    assert_eq!(podman.inspect("vllm")["Id"], id);
    assert_eq!(podman.container_names(), ["vllm"]);
}
