//! A toolbox image with what the model pull needs of the vLLM image: Debian bookworm's python3
//! and huggingface_hub 0.36 (the version vLLM 0.13's transformers allows) in /opt/venv, first on
//! PATH. The rootfs is made once by debootstrap, the wheels are downloaded on this machine by a
//! venv's pip and installed inside offline (a pip inside the chroot cannot reach PyPI here), and
//! the tarball is cached under target/test-cache.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::image::push_rootfs_image;
use super::podman::PodmanService;
use super::registry::Registry;

/// The client the vLLM image has (research/model.md: transformers < 5 wants huggingface_hub < 1).
pub const HUB_CLIENT: &str = "huggingface_hub==0.36.2";

/// The image `REGISTRY/name`, pushed from the cached rootfs.
pub fn hub_toolbox_image(podman: &PodmanService, registry: &Registry, name: &str) -> String {
    let tarball = hub_rootfs_tar();
    let labels = [("org.opencontainers.image.created", "2026-11-01T10:00:00Z")];
    push_rootfs_image(podman, registry, name, &tarball, &labels)
}

/// The cached rootfs tarball, built on first use (serialised by a file lock).
pub fn hub_rootfs_tar() -> PathBuf {
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-cache");
    std::fs::create_dir_all(&cache).expect("create target/test-cache");
    let tarball = cache.join("hub-toolbox-bookworm-rootfs.tar");
    let lock = std::fs::File::create(cache.join("hub-toolbox-rootfs.lock")).expect("lock file");
    lock.lock().expect("lock the rootfs cache");
    if tarball.exists() {
        return tarball;
    }
    let staging = tempfile::Builder::new().prefix("hub-rootfs-").tempdir_in(&cache).expect("tempdir");
    let rootfs = staging.path().join("rootfs");
    run(
        Command::new("debootstrap")
            .args(["--variant=minbase", "--include=python3,python3-venv", "bookworm"])
            .arg(&rootfs),
        "debootstrap (scripts/test-deps.sh installs it)",
    );
    let wheels = rootfs.join("tmp/wheels");
    download_wheels(staging.path(), &wheels);
    run(Command::new("chroot").arg(&rootfs).args(["python3", "-m", "venv", "/opt/venv"]), "python3 -m venv");
    run(
        Command::new("chroot")
            .arg(&rootfs)
            .args(["/opt/venv/bin/pip", "install", "--quiet", "--no-index", "--find-links", "/tmp/wheels", HUB_CLIENT])
            .env_remove("PIP_FIND_LINKS")
            .env_remove("PIP_INDEX_URL"),
        "pip install in the rootfs",
    );
    // What the image does not need: a smaller image for every node to pull.
    for unneeded in
        ["tmp/wheels", "usr/share/doc", "usr/share/man", "usr/share/locale", "var/cache/apt", "var/lib/apt/lists"]
    {
        let _ = std::fs::remove_dir_all(rootfs.join(unneeded));
    }
    std::fs::create_dir_all(rootfs.join("tmp")).expect("mkdir tmp");
    // The venv's python3 first on the default PATH, as the vLLM image's is (a link would not do:
    // Python finds its venv from the path it was started by).
    let wrapper = rootfs.join("usr/local/bin/python3");
    std::fs::write(&wrapper, "#!/bin/sh\nexec /opt/venv/bin/python3 \"$@\"\n").expect("write the python3 wrapper");
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let partial = staging.path().join("rootfs.tar");
    run(Command::new("tar").arg("-C").arg(&rootfs).arg("-cf").arg(&partial).arg("."), "tar of the rootfs");
    std::fs::rename(&partial, &tarball).expect("move the tarball into the cache");
    tarball
}

/// The client's wheels for CPython 3.11 on x86_64, by a venv's pip on this machine.
fn download_wheels(work: &Path, into: &Path) {
    let venv = work.join("pip-venv");
    run(Command::new("python3").args(["-m", "venv"]).arg(&venv), "python3 -m venv on this machine");
    run(
        Command::new(venv.join("bin/pip"))
            .args(["download", "--quiet", "--only-binary", ":all:", "--python-version", "3.11"])
            .args(["--platform", "manylinux2014_x86_64", "--implementation", "cp", "--dest"])
            .arg(into)
            .arg(HUB_CLIENT),
        "pip download of huggingface_hub",
    );
}

fn run(command: &mut Command, what: &str) {
    let output = command.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
