//! Stand-in images: a busybox-static rootfs with the OCI created label, pushed to the loopback
//! registry, so pulls, pins and "a new image upstream" are real.

use std::path::Path;
use std::process::Command;

use super::podman::PodmanService;
use super::registry::Registry;

/// Import `rootfs_tar` as `REGISTRY/name` with labels and push it; returns the reference.
pub fn push_rootfs_image(
    podman: &PodmanService,
    registry: &Registry,
    name: &str,
    rootfs_tar: &Path,
    labels: &[(&str, &str)],
) -> String {
    let reference = format!("{}/{name}", registry.host());
    // A rootless podman cannot read the machine's test cache (under root's home): it imports a
    // copy it may read.
    let readable = podman.user.as_ref().map(|_| {
        let dir = tempfile::Builder::new().prefix("rootfs-").tempdir_in("/tmp").expect("tempdir");
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        let copy = dir.path().join("rootfs.tar");
        std::fs::copy(rootfs_tar, &copy).expect("copy the rootfs for the rootless podman");
        std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o644)).expect("chmod");
        (dir, copy)
    });
    let rootfs_tar = readable.as_ref().map_or(rootfs_tar, |(_, copy)| copy.as_path());
    let label_changes: Vec<String> = labels.iter().map(|(k, v)| format!("LABEL {k}={v}")).collect();
    let mut args: Vec<&str> = vec!["import", "--quiet"];
    for change in &label_changes {
        args.extend(["--change", change]);
    }
    args.extend(["--change", "CMD [\"/bin/sh\"]", rootfs_tar.to_str().expect("utf-8 path"), &reference]);
    podman.podman_ok(&args);
    match registry.login.as_deref() {
        Some(login) => podman.podman_ok(&["push", "--quiet", "--creds", login, &reference]),
        None => podman.podman_ok(&["push", "--quiet", &reference]),
    };
    // Drop the local copy: refresh must really pull it.
    podman.podman_ok(&["rmi", "--force", &reference]);
    reference
}

/// A busybox image created at `created` (RFC 3339), pushed as `REGISTRY/name`.
/// A different `created` gives a different image (and digest).
pub fn stand_in_image(podman: &PodmanService, registry: &Registry, name: &str, created: &str) -> String {
    stand_in_image_with(podman, registry, name, created, &[])
}

/// The busybox applets a stand-in image has: enough for the RCCL overlay's RUN steps too, and
/// `grep`, which the ABI check uses where an image has it. Not `dd`: nothing needs it.
pub const STAND_IN_TOOLS: [&str; 19] = [
    "sh",
    "sleep",
    "cat",
    "id",
    "true",
    "false",
    "echo",
    "sha256sum",
    "ls",
    "env",
    "find",
    "cp",
    "ln",
    "cmp",
    "mkdir",
    "rm",
    "chmod",
    "readlink",
    "grep",
];

/// [`stand_in_image`] with more files in it: (path inside, contents).
pub fn stand_in_image_with(
    podman: &PodmanService,
    registry: &Registry,
    name: &str,
    created: &str,
    files: &[(&str, &[u8])],
) -> String {
    stand_in_image_with_tools(podman, registry, name, created, files, &STAND_IN_TOOLS)
}

/// [`stand_in_image_with`] whose only programs are the busybox applets `tools` (none: not even a
/// shell), as minimal images are.
pub fn stand_in_image_with_tools(
    podman: &PodmanService,
    registry: &Registry,
    name: &str,
    created: &str,
    files: &[(&str, &[u8])],
    tools: &[&str],
) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let rootfs = dir.path().join("rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).expect("mkdir");
    std::fs::create_dir_all(rootfs.join("etc")).expect("mkdir");
    std::fs::create_dir_all(rootfs.join("tmp")).expect("mkdir");
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).expect("copy busybox (busybox-static)");
    for tool in tools {
        std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(tool)).expect("symlink");
    }
    std::fs::write(rootfs.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").expect("passwd");
    std::fs::write(rootfs.join("etc/group"), "root:x:0:\n").expect("group");
    // Every real image has one; distrobox reads it right after creating a container.
    std::fs::write(rootfs.join("etc/os-release"), "ID=busybox\nNAME=\"stand-in\"\n").expect("os-release");
    std::fs::write(rootfs.join("etc/created"), created).expect("created");
    // busybox is static; the libraries the tests build need libc.so.6, which the ABI check looks
    // for by name where the loader would (the default /lib).
    std::fs::create_dir_all(rootfs.join("lib")).expect("mkdir");
    std::fs::write(rootfs.join("lib/libc.so.6"), b"").expect("libc placeholder");
    for (path, contents) in files {
        let target = rootfs.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
        std::fs::write(&target, contents).expect("image file");
    }
    let tarball = dir.path().join("rootfs.tar");
    let status = Command::new("tar").arg("-C").arg(&rootfs).arg("-cf").arg(&tarball).arg(".").status().expect("tar");
    assert!(status.success());
    push_rootfs_image(podman, registry, name, &tarball, &[("org.opencontainers.image.created", created)])
}
