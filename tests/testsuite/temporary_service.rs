//! With podman installed but no socket answering, a command starts `podman system service`
//! for its own duration and stops it afterwards.

use std::path::Path;

use crate::support::cli::{json, refresh_vllm, run_strix, stderr};
use crate::support::host_tree::materialize;
use crate::support::image::stand_in_image;
use crate::support::podman::PodmanService;
use crate::support::registry::Registry;

/// The temporary services whose socket directory is under `tmp` (the binary's TMPDIR): only this
/// test's, whatever other tests run meanwhile.
fn services_running(tmp: &Path) -> Vec<String> {
    let pattern = format!("{}/strix-toolbox-podman-", tmp.display());
    let output = std::process::Command::new("pgrep").args(["-af", &pattern]).output().unwrap();
    String::from_utf8_lossy(&output.stdout).lines().map(str::to_string).collect()
}

#[test]
fn starts_and_stops_its_own_podman_service() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let image = stand_in_image(&podman, &registry, "kyuz0/vllm:latest", "2026-11-01T10:00:00Z");
    let host = materialize("strix-thunderbolt-only");
    let host_arg = host.path().to_str().unwrap();

    // Same storage and configuration, but no CONTAINER_HOST and an empty runtime dir: no socket.
    let runtime_dir = tempfile::tempdir().unwrap();
    let mut env: Vec<(String, String)> =
        podman.env().into_iter().filter(|(k, _)| k != "CONTAINER_HOST" && k != "XDG_RUNTIME_DIR").collect();
    env.push(("XDG_RUNTIME_DIR".into(), runtime_dir.path().display().to_string()));
    let tmp = tempfile::tempdir().unwrap();
    env.push(("TMPDIR".into(), tmp.path().display().to_string()));
    assert!(!std::path::Path::new("/run/podman/podman.sock").exists(), "a system podman socket would be used instead");

    let output = run_strix(&env, &refresh_vllm(host_arg, &image, &["--container-engine", "podman", "--json"]));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json(&output)["action"], "created");
    // The container is in the shared storage, seen through the testbed's own service.
    assert_eq!(podman.container_names(), ["vllm"]);
    assert!(services_running(tmp.path()).is_empty(), "left running: {:?}", services_running(tmp.path()));
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|entry| entry.unwrap().file_name()).collect();
    assert!(left.is_empty(), "the service's socket directory stays behind: {left:?}");
}
