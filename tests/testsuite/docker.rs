//! refresh, enter and build end to end on a real dockerd, pulling from and pushing to a loopback registry.

use std::process::Command;

use crate::support::cli::{json, refresh_vllm, run_strix, stderr};
use crate::support::docker::DockerDaemon;
use crate::support::host_tree::materialize;
use crate::support::image::stand_in_image;
use crate::support::podman::PodmanService;
use crate::support::rccl_fixtures;
use crate::support::registry::Registry;

fn docker_inspect(daemon: &DockerDaemon, name: &str) -> serde_json::Value {
    let output = Command::new("docker")
        .arg("--host")
        .arg(format!("unix://{}", daemon.socket.display()))
        .args(["container", "inspect", name])
        .output()
        .expect("docker CLI");
    assert!(output.status.success(), "docker inspect: {}", String::from_utf8_lossy(&output.stderr));
    let mut value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    value[0].take()
}

fn refresh(daemon: &DockerDaemon, host: &std::path::Path, image: &str) -> serde_json::Value {
    let host = host.to_str().unwrap();
    let output = run_strix(&daemon.env(), &refresh_vllm(host, image, &["--container-engine", "docker", "--json"]));
    assert!(output.status.success(), "{}", stderr(&output));
    json(&output)
}

#[test]
fn creates_the_right_container_on_docker_then_is_a_no_op() {
    let registry = Registry::start();
    // podman makes and pushes the stand-in image; docker pulls it like any registry image.
    let image = {
        let podman = PodmanService::start(&registry);
        stand_in_image(&podman, &registry, "kyuz0/vllm:latest", "2026-11-01T10:00:00Z")
    };
    let daemon = DockerDaemon::start(registry.port);
    let host = materialize("strix-e810-healthy");

    let summary = refresh(&daemon, host.path(), &image);
    assert_eq!(summary["action"], "created", "{summary:#}");
    assert_eq!(summary["engine"], "docker");
    assert_eq!(summary["pin"], "20261101-100000");

    let inspect = docker_inspect(&daemon, "vllm");
    let root = host.path().display().to_string();
    let devices: Vec<String> = inspect["HostConfig"]["Devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| format!("{}:{}", d["PathOnHost"].as_str().unwrap(), d["PathInContainer"].as_str().unwrap()))
        .collect();
    for device in ["/dev/kfd:/dev/kfd", "/dev/dri:/dev/dri", "/dev/infiniband:/dev/infiniband"] {
        assert!(devices.contains(&format!("{root}{device}")), "{device} missing from {devices:?}");
    }
    assert_eq!(inspect["HostConfig"]["GroupAdd"], serde_json::json!(["39", "105", "993"]));
    assert_eq!(inspect["HostConfig"]["Ulimits"], serde_json::json!([{"Name": "memlock", "Soft": -1, "Hard": -1}]));
    // (docker adds label=disable itself alongside host IPC.)
    assert!(inspect["HostConfig"]["SecurityOpt"].as_array().unwrap().contains(&"seccomp=unconfined".into()));
    assert_eq!(inspect["HostConfig"]["Privileged"], false);
    assert_eq!(inspect["HostConfig"]["NetworkMode"], "host");
    assert_eq!(inspect["HostConfig"]["IpcMode"], "host");
    let labels = &inspect["Config"]["Labels"];
    assert_eq!(labels["io.github.strix-toolbox.managed"], "true");
    assert_eq!(labels["io.github.strix-toolbox.pin"], "20261101-100000");
    let env = inspect["Config"]["Env"].to_string();
    assert!(env.contains("NCCL_IB_GID_INDEX=3") && env.contains("GLOO_SOCKET_IFNAME=enp194s0f0"), "{env}");

    let id = inspect["Id"].clone();
    assert_eq!(refresh(&daemon, host.path(), &image)["action"], "unchanged");
    assert_eq!(docker_inspect(&daemon, "vllm")["Id"], id);
}

#[test]
fn enter_passes_output_and_exit_codes_on_docker() {
    let registry = Registry::start();
    let image = {
        let podman = PodmanService::start(&registry);
        stand_in_image(&podman, &registry, "kyuz0/vllm:latest", "2026-11-01T10:00:00Z")
    };
    let daemon = DockerDaemon::start(registry.port);
    let host = materialize("strix-thunderbolt-only");
    refresh(&daemon, host.path(), &image);

    let output = run_strix(
        &daemon.env(),
        &["--container-engine", "docker", "enter", "vllm", "--", "sh", "-c", "echo hello; exit 4"],
    );
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "hello\n");
}

#[test]
fn build_bakes_the_rccl_into_an_image_on_docker() {
    let registry = Registry::start();
    let base = {
        let podman = PodmanService::start(&registry);
        stand_in_image(&podman, &registry, "kyuz0/vllm-therock-gfx1151:latest", "2026-11-01T10:00:00Z")
    };
    let daemon = DockerDaemon::start(registry.port);
    let artifacts = tempfile::tempdir().unwrap();
    let library = rccl_fixtures::gfx1151_library(artifacts.path(), "librccl.so.1", "docker-build");
    let sha256 = rccl_fixtures::sha256_hex(&std::fs::read(&library).unwrap());
    let tag = format!("{}/kyuz0/vllm-therock-gfx1151:dev", registry.host());

    let args = [
        "--container-engine",
        "docker",
        "--json",
        "build",
        "--rccl",
        library.to_str().unwrap(),
        "--base",
        &base,
        "--tag",
        &tag,
        "--push",
    ];
    let output = run_strix(&daemon.env(), &args);
    assert!(output.status.success(), "{}", stderr(&output));
    let outcome = json(&output);
    assert_eq!(outcome["rccl_sha256"], sha256);
    assert_eq!(outcome["pushed"], serde_json::json!([tag]));

    let docker = |args: &[&str]| {
        let output = Command::new("docker")
            .arg("--host")
            .arg(format!("unix://{}", daemon.socket.display()))
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "docker {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    let label = docker(&[
        "image",
        "inspect",
        "--format",
        "{{index .Config.Labels \"io.github.strix-toolbox.rccl.sha256\"}}",
        &tag,
    ]);
    assert_eq!(label, sha256);
    let inside = docker(&["run", "--rm", "--network", "none", &tag, "sha256sum", "/opt/rocm/lib/librccl.so.1.0"]);
    assert!(inside.starts_with(&sha256), "{inside}");
}
