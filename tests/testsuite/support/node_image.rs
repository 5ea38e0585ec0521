//! The toolbox image of the serving and model tests, with what they need of the real vLLM image:
//! Debian bookworm's Python in /opt/venv (first on PATH), Ray at the version the real image pins
//! (read from containerfiles/vllm-therock-gfx1151.Containerfile, so it is named in one place),
//! huggingface_hub at the version vLLM's transformers allows, and a stand-in `vllm`
//! (stand_in_vllm.py, named as such: no model, no GPU) that asks of the cluster what vLLM's Ray
//! executor asks.
//!
//! The rootfs is made once by debootstrap and cached under the machine's test cache (~2 min the first
//! time). The wheels are downloaded on this machine by a venv's pip and installed inside offline:
//! a pip inside the chroot would not trust this machine's TLS interception.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::podman::PodmanService;
use super::registry::Registry;

const CONTAINERFILE: &str = "containerfiles/vllm-therock-gfx1151.Containerfile";
/// The client the vLLM image has (research: transformers < 5 wants huggingface_hub < 1).
pub const HUB_CLIENT: &str = "huggingface_hub==0.36.2";
const VLLM_STAND_IN: &str = include_str!("stand_in_vllm.py");
/// The image's creation date (its pin).
const CREATED: &str = "2026-11-01T10:00:00Z";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `ARG RAY_VERSION=…` of the image's Containerfile: the Ray the real toolbox carries.
pub fn ray_version() -> String {
    let text = std::fs::read_to_string(repo_root().join(CONTAINERFILE)).expect("read the image's Containerfile");
    text.lines()
        .find_map(|line| line.trim().strip_prefix("ARG RAY_VERSION="))
        .map(|version| version.trim().to_string())
        .expect("the Containerfile pins RAY_VERSION")
}

/// The image, imported through `podman` and pushed as `REGISTRY/name`; returns the reference.
pub fn node_image(podman: &PodmanService, registry: &Registry, name: &str) -> String {
    import_node_image(podman, registry, name, &[])
}

/// The same rootfs as an image of an older vLLM, whose `serve` has no `--nnodes` (the stand-in
/// reads STANDIN_VLLM_WITHOUT_NNODES from the image's environment): a launch across nodes falls
/// back to Ray's executor on it.
pub fn node_image_without_nnodes(podman: &PodmanService, registry: &Registry, name: &str) -> String {
    import_node_image(podman, registry, name, &["ENV STANDIN_VLLM_WITHOUT_NNODES=1"])
}

fn import_node_image(podman: &PodmanService, registry: &Registry, name: &str, changes: &[&str]) -> String {
    let tarball = node_rootfs_tar();
    let reference = format!("{}/{name}", registry.host());
    let label = format!("LABEL org.opencontainers.image.created={CREATED}");
    let path = "ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    let tarball = tarball.to_str().expect("utf-8 path");
    let mut argv = vec!["import", "--quiet", "--change", &label, "--change", path, "--change", "CMD [\"/bin/bash\"]"];
    for change in changes {
        argv.extend(["--change", change]);
    }
    argv.extend([tarball, &reference]);
    podman.podman_ok(&argv);
    podman.podman_ok(&["push", "--quiet", &reference]);
    podman.podman_ok(&["rmi", "--force", &reference]);
    reference
}

/// The cached rootfs tarball, built on first use (serialised by a file lock).
pub fn node_rootfs_tar() -> PathBuf {
    let cache = super::test_cache::dir();
    let ray = format!("ray=={}", ray_version());
    let recipe = sha256_hex(format!("{ray} {HUB_CLIENT} {VLLM_STAND_IN}").as_bytes());
    let tarball = cache.join(format!("node-image-{}.tar", &recipe[..12]));
    let lock = std::fs::File::create(cache.join("node-image.lock")).expect("lock file");
    lock.lock().expect("lock the node image cache");
    if tarball.exists() {
        return tarball;
    }
    let staging = tempfile::Builder::new().prefix("node-image-").tempdir_in(&cache).expect("tempdir");
    let rootfs = staging.path().join("rootfs");
    run(Command::new("debootstrap")
        .args(["--variant=minbase", "--include=python3,python3-venv,procps,iproute2,ca-certificates", "bookworm"])
        .arg(&rootfs));
    run(Command::new("chroot").arg(&rootfs).args(["/usr/bin/python3", "-m", "venv", "/opt/venv"]));
    let wheels = rootfs.join("tmp/wheels");
    download_wheels(staging.path(), &wheels, &[&ray, HUB_CLIENT]);
    run(Command::new("chroot")
        .arg(&rootfs)
        .args(["/opt/venv/bin/pip", "install", "--quiet", "--disable-pip-version-check", "--no-index"])
        .args(["--find-links", "/tmp/wheels", &ray, HUB_CLIENT])
        .env_remove("PIP_FIND_LINKS")
        .env_remove("PIP_INDEX_URL"));
    // What the image does not need: a smaller image for every node to pull.
    for unneeded in
        ["tmp/wheels", "usr/share/doc", "usr/share/man", "usr/share/locale", "var/cache/apt", "var/lib/apt/lists"]
    {
        let _ = std::fs::remove_dir_all(rootfs.join(unneeded));
    }
    std::fs::create_dir_all(rootfs.join("tmp")).expect("mkdir tmp");
    // The venv's python3 also first on a shell's default PATH, as the vLLM image's is (a link
    // would not do: Python finds its venv from the path it was started by).
    let wrapper = rootfs.join("usr/local/bin/python3");
    std::fs::write(&wrapper, "#!/bin/sh\nexec /opt/venv/bin/python3 \"$@\"\n").expect("write the python3 wrapper");
    executable(&wrapper);
    let vllm = rootfs.join("opt/venv/bin/vllm");
    std::fs::write(&vllm, VLLM_STAND_IN).expect("write the stand-in vllm");
    executable(&vllm);
    let partial = staging.path().join("rootfs.tar");
    run(Command::new("tar").arg("-C").arg(&rootfs).arg("-cf").arg(&partial).arg("."));
    std::fs::rename(&partial, &tarball).expect("move the tarball into the cache");
    tarball
}

/// `packages`' wheels for CPython 3.11 on x86_64, by a venv's pip on this machine.
fn download_wheels(work: &Path, into: &Path, packages: &[&str]) {
    let venv = work.join("pip-venv");
    run(Command::new("/usr/bin/python3").args(["-m", "venv"]).arg(&venv));
    run(Command::new(venv.join("bin/pip"))
        .args(["download", "--quiet", "--disable-pip-version-check", "--only-binary", ":all:"])
        .args(["--python-version", "3.11", "--implementation", "cp"])
        .args(["--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64"])
        .args(["--platform", "manylinux_2_28_x86_64", "--dest"])
        .arg(into)
        .args(packages));
}

fn executable(path: &Path) {
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod 755");
}

fn run(command: &mut Command) {
    let output = command.stdin(Stdio::null()).output().expect("run a build step of the node image");
    assert!(
        output.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(bytes))
}
