//! Ctrl-C during a refresh's pull: the working toolbox stays exactly as it was, and nothing
//! temporary is left behind.

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

#[test]
fn ctrl_c_during_the_pull_leaves_the_toolbox_untouched() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let host = materialize("strix-thunderbolt-only");
    let host_arg = host.path().to_str().unwrap().to_string();
    let image = stand_in_image(&podman, &registry, "kyuz0/vllm:latest", "2026-11-01T10:00:00Z");
    let args = refresh_vllm(&host_arg, &image, &[]);
    assert!(run_strix(&podman.env(), &args).status.success());
    let before = podman.inspect("vllm");

    big_image(&podman, &registry);
    let child = Command::new(env!("CARGO_BIN_EXE_strix-toolbox"))
        .args(args)
        .envs(podman.env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();

    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("interrupted during pulling") && message.contains("nothing was changed"), "{message}");
    assert_eq!(podman.inspect("vllm"), before);
    assert_eq!(podman.container_names(), ["vllm"]);
}
