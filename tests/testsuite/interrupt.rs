//! Ctrl-C or SIGTERM during a refresh's pull: the working toolbox stays exactly as it was, nothing
//! temporary is left behind, and the exit code says which signal came (130, 143).

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::cli::{refresh_vllm, run_strix, stderr};
use crate::support::host_tree::materialize;
use crate::support::image::{push_rootfs_image, stand_in_image};
use crate::support::podman::PodmanService;
use crate::support::registry::Registry;

/// A busybox image with an incompressible 256 MiB layer, so its pull takes a while.
fn big_image(podman: &PodmanService, registry: &Registry) -> String {
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", rootfs.join("bin/sleep")).unwrap();
    let mut blob = std::fs::File::create(rootfs.join("weights.bin")).unwrap();
    let mut random = std::fs::File::open("/dev/urandom").unwrap();
    std::io::copy(&mut (&mut random).take(256 << 20), &mut blob).unwrap();
    blob.flush().unwrap();
    let tarball = dir.path().join("rootfs.tar");
    assert!(Command::new("tar").arg("-C").arg(&rootfs).arg("-cf").arg(&tarball).arg(".").status().unwrap().success());
    push_rootfs_image(
        podman,
        registry,
        "kyuz0/vllm:latest",
        &tarball,
        &[("org.opencontainers.image.created", "2026-11-09T00:00:00Z")],
    )
}

/// What an interrupted refresh left: its output, and the toolbox before and after.
struct Interrupted {
    output: std::process::Output,
    before: serde_json::Value,
    after: serde_json::Value,
    containers: Vec<String>,
}

/// Refresh a working toolbox `vllm` to an image whose pull takes a while, and send `signal` half
/// a second into the pull. `extra` goes at the end of the refresh's arguments.
fn interrupt_the_pull(signal: libc::c_int, extra: &[&str]) -> Interrupted {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let host = materialize("strix-thunderbolt-only");
    let host_arg = host.path().to_str().unwrap().to_string();
    let image = stand_in_image(&podman, &registry, "kyuz0/vllm:latest", "2026-11-01T10:00:00Z");
    assert!(run_strix(&podman.env(), &refresh_vllm(&host_arg, &image, &[])).status.success());
    let before = podman.inspect("vllm");

    big_image(&podman, &registry);
    let child = Command::new(env!("CARGO_BIN_EXE_strix-toolbox"))
        .args(refresh_vllm(&host_arg, &image, extra))
        .envs(podman.env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let output = child.wait_with_output().unwrap();
    Interrupted { output, before, after: podman.inspect("vllm"), containers: podman.container_names() }
}

#[test]
fn ctrl_c_during_the_pull_leaves_the_toolbox_untouched_and_exits_130() {
    let run = interrupt_the_pull(libc::SIGINT, &[]);
    let message = stderr(&run.output);
    assert_eq!(run.output.status.code(), Some(130), "{message}");
    assert!(message.contains("interrupted during pulling") && message.contains("nothing was changed"), "{message}");
    assert_eq!(run.after, run.before);
    assert_eq!(run.containers, ["vllm"]);
}

#[test]
fn sigterm_during_the_pull_leaves_the_toolbox_untouched_and_exits_143() {
    let run = interrupt_the_pull(libc::SIGTERM, &["--json"]);
    let message = stderr(&run.output);
    assert_eq!(run.output.status.code(), Some(143), "{message}");
    assert!(message.contains("interrupted by SIGTERM during pulling"), "{message}");
    let object: serde_json::Value = serde_json::from_slice(&run.output.stdout).expect("an error object on stdout");
    assert_eq!(object["error"]["kind"], "interrupted", "{object}");
    assert!(object["error"]["message"].as_str().unwrap().ends_with("nothing was changed"), "{object}");
    assert_eq!(run.after, run.before);
    assert_eq!(run.containers, ["vllm"]);
}
