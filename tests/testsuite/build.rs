//! `build --rccl` end to end: a real podman API service, a loopback registry, a busybox base
//! that already carries a stale librccl under /opt/venv (as the PyTorch wheels do). Checks the
//! library inside the built image against the recorded sha256 label, the push, and that a
//! rebuild with another artifact replaces only the RCCL layers. Prints build/rebuild seconds.

#[allow(unused_imports)]
use std::path::Path;
use std::process::Output;
use std::time::Instant;

use crate::support::cli::run_strix;
use crate::support::image::push_rootfs_image;
use crate::support::podman::PodmanService;
use crate::support::rccl_fixtures::*;
use crate::support::registry::Registry;
use serde_json::Value;
use tempfile::TempDir;

const VENV_RCCL: &str = "/opt/venv/lib/python3.12/site-packages/torch/lib/librccl.so.1";
const RCCL_SHA256: &str = "io.github.strix-toolbox.rccl.sha256";

/// A busybox base with a stale librccl in /opt/venv and none in /opt/rocm, pushed to `registry`.
fn base_with_stale_venv_rccl(podman: &PodmanService, registry: &Registry) -> String {
    let dir = TempDir::new().expect("tempdir");
    let rootfs = dir.path().join("rootfs");
    let venv_lib = rootfs.join(VENV_RCCL.trim_start_matches('/'));
    for sub in ["bin", "etc", "tmp"] {
        std::fs::create_dir_all(rootfs.join(sub)).expect("mkdir");
    }
    std::fs::create_dir_all(venv_lib.parent().expect("parent")).expect("mkdir venv");
    std::fs::write(&venv_lib, b"stale librccl from the torch wheel").expect("stale rccl");
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).expect("copy busybox (busybox-static)");
    // The overlay's RUN steps, and what the ABI check runs inside (sleep, find, grep, cat).
    for tool in
        ["sh", "sha256sum", "readlink", "cat", "ls", "find", "cp", "ln", "cmp", "mkdir", "rm", "chmod", "sleep", "grep"]
    {
        std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(tool)).expect("symlink");
    }
    // The test libraries need libc.so.6; busybox is static. The ABI check looks for it by name.
    std::fs::create_dir_all(rootfs.join("lib")).expect("mkdir lib");
    std::fs::write(rootfs.join("lib/libc.so.6"), b"").expect("libc placeholder");
    std::fs::write(rootfs.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").expect("passwd");
    let tarball = dir.path().join("rootfs.tar");
    let status = std::process::Command::new("tar")
        .arg("-C")
        .arg(&rootfs)
        .arg("-cf")
        .arg(&tarball)
        .arg(".")
        .status()
        .expect("tar");
    assert!(status.success());
    push_rootfs_image(
        podman,
        registry,
        "kyuz0/vllm-therock-gfx1151:base",
        &tarball,
        &[("org.opencontainers.image.created", "2026-11-01T10:00:00Z")],
    )
}

fn text(output: &Output) -> (String, String) {
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

fn image_inspect(podman: &PodmanService, reference: &str) -> Value {
    let text = podman.podman_ok(&["image", "inspect", reference]);
    let mut value: Value = serde_json::from_str(&text).expect("image inspect JSON");
    value[0].take()
}

fn layers(image: &Value) -> Vec<String> {
    image["RootFS"]["Layers"]
        .as_array()
        .expect("RootFS.Layers")
        .iter()
        .map(|layer| layer.as_str().expect("layer digest").to_string())
        .collect()
}

/// sha256 of each path inside `image`, in order (symlinks followed), via `podman run --rm`.
fn digests_in_image(podman: &PodmanService, image: &str, paths: &[&str]) -> Vec<String> {
    let mut args = vec!["run", "--rm", image, "sha256sum"];
    args.extend(paths);
    podman.podman_ok(&args).lines().map(|line| line.split_whitespace().next().expect("digest").to_string()).collect()
}

fn build(podman: &PodmanService, artifact: &Path, base: &str, tags: &[&str], extra: &[&str]) -> (Output, f64) {
    let mut args =
        vec!["--container-engine", "podman", "build", "--rccl", artifact.to_str().expect("utf-8"), "--base", base];
    args.extend(["--tag", tags[0]]);
    for tag in &tags[1..] {
        args.extend(["--also-tag", *tag]);
    }
    args.extend(extra);
    let started = Instant::now();
    let output = run_strix(&podman.env(), &args);
    (output, started.elapsed().as_secs_f64())
}

#[test]
fn build_overlays_the_rccl_pushes_and_rebuilds_only_the_rccl_layers() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let base = base_with_stale_venv_rccl(&podman, &registry);
    let dir = TempDir::new().expect("tempdir");
    let first_library = gfx1151_library(dir.path(), "librccl.so.1", "first build");
    let first_sha = sha256_of_file(&first_library);
    let repository = format!("{}/kyuz0/vllm-therock-gfx1151", registry.host());
    let tag = format!("{repository}:local");
    let first_tag = format!("{repository}:local-first");

    // First build: plain .so, JSON summary, two tags, pushed.
    let (output, first_seconds) = build(
        &podman,
        &first_library,
        &base,
        &[&tag, &first_tag],
        &[
            "--json",
            "--push",
            "--source",
            "https://github.com/kyuz0/strix-toolbox",
            "--revision",
            "0123456789abcdef",
            "--rccl-source",
            "https://github.com/kyuz0/strix-toolbox/actions/runs/1",
        ],
    );
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "stdout: {stdout}\nstderr: {stderr}");
    let summary: Value = serde_json::from_str(&stdout).expect("JSON summary");
    assert_eq!(summary["rccl_sha256"], first_sha);
    assert_eq!(summary["gfx_targets"], serde_json::json!(["gfx1151"]));
    assert_eq!(summary["tags"], serde_json::json!([tag, first_tag]));
    assert_eq!(summary["pushed"], serde_json::json!([tag, first_tag]));
    let first_id = summary["image_id"].as_str().expect("image_id").to_string();
    assert!(first_id.starts_with("sha256:") && first_id.len() == 71, "{first_id}");

    // Labels record what went in.
    let first_image = image_inspect(&podman, &tag);
    assert_eq!(format!("sha256:{}", first_image["Id"].as_str().expect("Id")), first_id);
    let labels = &first_image["Labels"];
    assert_eq!(labels[RCCL_SHA256], first_sha);
    assert_eq!(labels["io.github.strix-toolbox.rccl.gfx-targets"], "gfx1151");
    assert_eq!(labels["io.github.strix-toolbox.rccl.source"], "https://github.com/kyuz0/strix-toolbox/actions/runs/1");
    assert_eq!(labels["org.opencontainers.image.source"], "https://github.com/kyuz0/strix-toolbox");
    assert_eq!(labels["org.opencontainers.image.revision"], "0123456789abcdef");
    let created = labels["org.opencontainers.image.created"].as_str().expect("created label");
    let created_at = chrono::DateTime::parse_from_rfc3339(created).expect("created is RFC 3339");
    assert!((chrono::Utc::now() - created_at.to_utc()).num_seconds().abs() < 600, "{created}");

    // The library in the image is the artifact, under every name, and the venv copy is replaced.
    let names = ["/opt/rocm/lib/librccl.so.1.0", "/opt/rocm/lib/librccl.so.1", "/opt/rocm/lib/librccl.so", VENV_RCCL];
    assert_eq!(digests_in_image(&podman, &tag, &names), vec![first_sha.clone(); 4]);
    assert_eq!(podman.podman_ok(&["run", "--rm", &tag, "readlink", "/opt/rocm/lib/librccl.so.1"]), "librccl.so.1.0");
    assert_eq!(podman.podman_ok(&["run", "--rm", &tag, "readlink", "/opt/rocm/lib/librccl.so"]), "librccl.so.1");

    // Pushed: drop the local name, pull it back from the registry, same image.
    podman.podman_ok(&["rmi", &first_tag]);
    podman.podman_ok(&["pull", "--quiet", &first_tag]);
    assert_eq!(image_inspect(&podman, &first_tag)["Id"], first_image["Id"]);

    // Rebuild with another artifact, shipped as the workflow's zip of the .gz: only the RCCL
    // layers change, the base layers are reused.
    let second_library = gfx1151_library(dir.path(), "librccl-second.so.1", "second build");
    let second_sha = sha256_of_file(&second_library);
    assert_ne!(second_sha, first_sha);
    let second_bytes = std::fs::read(&second_library).expect("read");
    let artifact = zip_file(dir.path(), "librccl-gfx1151.zip", &[("librccl.so.1.gz", &gzip_bytes(&second_bytes))]);
    let (output, rebuild_seconds) = build(&podman, &artifact, &base, &[&tag], &[]);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "stdout: {stdout}\nstderr: {stderr}");
    let second_image = image_inspect(&podman, &tag);
    let second_id = format!("sha256:{}", second_image["Id"].as_str().expect("Id"));
    assert!(stdout.starts_with(&second_id), "text output starts with the image id: {stdout}");
    assert!(stdout.contains(&format!("tagged  {tag}")), "{stdout}");
    assert!(stdout.contains(&second_sha), "{stdout}");
    assert!(stderr.contains("COPY librccl.so.1 /opt/rocm/lib/librccl.so.1.0"), "build log streamed: {stderr}");
    assert_ne!(second_id, first_id);
    assert_eq!(second_image["Labels"][RCCL_SHA256], second_sha);
    assert_eq!(second_image["Labels"]["io.github.strix-toolbox.rccl.source"], "librccl-gfx1151.zip");
    assert_eq!(digests_in_image(&podman, &tag, &names), vec![second_sha.clone(); 4]);

    let (first_layers, second_layers) = (layers(&first_image), layers(&second_image));
    let base_layers = layers(&image_inspect(&podman, &base));
    assert_eq!(first_layers.len(), base_layers.len() + 2, "COPY + RUN on top of the base");
    assert_eq!(second_layers.len(), first_layers.len());
    assert_eq!(second_layers[..base_layers.len()], base_layers[..], "base layers reused");
    assert_eq!(first_layers[..base_layers.len()], base_layers[..]);
    for (old, new) in first_layers[base_layers.len()..].iter().zip(&second_layers[base_layers.len()..]) {
        assert_ne!(old, new, "RCCL layers replaced");
    }
    // The first image is still there under its own tag, untouched.
    assert_eq!(digests_in_image(&podman, &first_tag, &["/opt/rocm/lib/librccl.so.1.0"]), [first_sha]);

    // Not asserted: a rebuild with the same artifact is not cached through the libpod API on
    // podman 4.3 (its build context lands in a new directory each time), so it costs the same.
    eprintln!(
        "build e2e timings: first build (+ push of 2 tags) {first_seconds:.2} s, rebuild with another \
         artifact {rebuild_seconds:.2} s (whole `strix-toolbox build` commands)"
    );
}
