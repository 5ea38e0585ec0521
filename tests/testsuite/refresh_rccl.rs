//! `refresh --rccl FILE`: build the image here with a custom RCCL, then refresh from it.

use crate::support::cli::{json, refresh_vllm, run_strix, stderr};
use crate::support::host_tree::materialize;
use crate::support::image::stand_in_image;
use crate::support::podman::PodmanService;
use crate::support::rccl_fixtures::{gfx1100_library, gfx1151_library, sha256_hex};
use crate::support::registry::Registry;

#[test]
fn builds_the_rccl_overlay_then_creates_the_toolbox_from_it() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let image = stand_in_image(&podman, &registry, "kyuz0/vllm-therock-gfx1151:latest", "2026-11-01T10:00:00Z");
    let host = materialize("strix-thunderbolt-only");
    let artifacts = tempfile::tempdir().unwrap();
    let library = gfx1151_library(artifacts.path(), "librccl.so.1", "refresh-rccl");
    let sha256 = sha256_hex(&std::fs::read(&library).unwrap());

    let host_arg = host.path().to_str().unwrap();
    let library_arg = library.to_str().unwrap();
    let output = run_strix(&podman.env(), &refresh_vllm(host_arg, &image, &["--json", "--rccl", library_arg]));
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = json(&output);
    assert_eq!(summary["action"], "created");
    assert_eq!(summary["image"], "localhost/vllm-therock-gfx1151:latest-rccl");

    let labels = &podman.inspect("vllm")["Config"]["Labels"];
    assert_eq!(labels["io.github.strix-toolbox.image"], "localhost/vllm-therock-gfx1151:latest-rccl");
    let built = podman.podman_ok(&[
        "image",
        "inspect",
        "--format",
        "{{index .Labels \"io.github.strix-toolbox.rccl.sha256\"}}",
        "localhost/vllm-therock-gfx1151:latest-rccl",
    ]);
    assert_eq!(built, sha256);

    let output = run_strix(&podman.env(), &["enter", "vllm", "--", "sha256sum", "/opt/rocm/lib/librccl.so.1.0"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).starts_with(&sha256));
}

#[test]
fn an_artifact_without_gfx1151_is_refused_before_anything_changes() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let image = stand_in_image(&podman, &registry, "kyuz0/vllm-therock-gfx1151:latest", "2026-11-01T10:00:00Z");
    let host = materialize("strix-thunderbolt-only");
    let artifacts = tempfile::tempdir().unwrap();
    let library = gfx1100_library(artifacts.path(), "librccl.so.1");

    let host_arg = host.path().to_str().unwrap();
    let output = run_strix(&podman.env(), &refresh_vllm(host_arg, &image, &["--rccl", library.to_str().unwrap()]));
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("gfx1151"), "{}", stderr(&output));
    assert!(podman.container_names().is_empty());
}
