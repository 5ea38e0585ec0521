//! The toolbox image of the launch tests: Debian bookworm with Python, Ray from PyPI at the version
//! the real image pins (read from containerfiles/vllm-therock-gfx1151.Containerfile, so it is
//! named in one place), and a stand-in `vllm` (stand_in_vllm.py, named as such: no model, no GPU)
//! that asks of the cluster what vLLM's Ray executor asks. The rootfs is made once by debootstrap
//! and cached under target/test-cache (~2 min the first time). Ray's wheels are downloaded on this
//! machine by a venv's pip and installed inside offline: a pip inside the chroot would not trust
//! this machine's TLS interception.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::podman::PodmanService;
use super::registry::Registry;

const CONTAINERFILE: &str = "containerfiles/vllm-therock-gfx1151.Containerfile";
const VLLM_STAND_IN: &str = include_str!("stand_in_vllm.py");

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

/// The cached rootfs tarball, built on first use (serialised by a file lock).
pub fn ray_node_rootfs_tar() -> PathBuf {
    let cache = repo_root().join("target/test-cache");
    std::fs::create_dir_all(&cache).expect("create target/test-cache");
    let version = ray_version();
    let stand_in = sha256_hex(VLLM_STAND_IN.as_bytes());
    let tarball = cache.join(format!("ray-node-{version}-{}.tar", &stand_in[..12]));
    let lock = std::fs::File::create(cache.join("ray-node.lock")).expect("lock file");
    lock.lock().expect("lock the ray-node cache");
    if tarball.exists() {
        return tarball;
    }
    let staging = tempfile::Builder::new().prefix("ray-node-").tempdir_in(&cache).expect("tempdir");
    let rootfs = staging.path().join("rootfs");
    run(Command::new("debootstrap")
        .args(["--variant=minbase", "--include=python3,python3-venv,procps,iproute2,ca-certificates", "bookworm"])
        .arg(&rootfs));
    run(Command::new("chroot").arg(&rootfs).args(["/usr/bin/python3", "-m", "venv", "/opt/venv"]));
    let wheels = rootfs.join("tmp/wheels");
    let pip_venv = staging.path().join("pip");
    run(Command::new("/usr/bin/python3").args(["-m", "venv"]).arg(&pip_venv));
    run(Command::new(pip_venv.join("bin/pip"))
        .args(["download", "--quiet", "--disable-pip-version-check", "--only-binary", ":all:"])
        .args(["--python-version", "3.11", "--implementation", "cp"])
        .args(["--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64"])
        .args(["--platform", "manylinux_2_28_x86_64", "--dest"])
        .arg(&wheels)
        .arg(format!("ray=={version}")));
    run(Command::new("chroot").arg(&rootfs).args([
        "/opt/venv/bin/pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-index",
        "--find-links",
        "/tmp/wheels",
        &format!("ray=={version}"),
    ]));
    std::fs::remove_dir_all(&wheels).expect("remove the wheels");
    let vllm = rootfs.join("opt/venv/bin/vllm");
    std::fs::write(&vllm, VLLM_STAND_IN).expect("write the stand-in vllm");
    std::fs::set_permissions(&vllm, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod vllm");
    let partial = staging.path().join("rootfs.tar");
    run(Command::new("tar").arg("-C").arg(&rootfs).arg("-cf").arg(&partial).arg("."));
    std::fs::rename(&partial, &tarball).expect("move the tarball into the cache");
    tarball
}

/// The image, created at `created` (RFC 3339), imported through `podman` and pushed as
/// `REGISTRY/name`; returns the reference.
pub fn ray_node_image(podman: &PodmanService, registry: &Registry, name: &str, created: &str) -> String {
    let tarball = ray_node_rootfs_tar();
    let reference = format!("{}/{name}", registry.host());
    let label = format!("LABEL org.opencontainers.image.created={created}");
    let path = "ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    podman.podman_ok(&[
        "import",
        "--quiet",
        "--change",
        &label,
        "--change",
        path,
        "--change",
        "CMD [\"/bin/bash\"]",
        tarball.to_str().expect("utf-8 path"),
        &reference,
    ]);
    podman.podman_ok(&["push", "--quiet", &reference]);
    podman.podman_ok(&["rmi", "--force", &reference]);
    reference
}

fn run(command: &mut Command) {
    let output = command.stdin(Stdio::null()).output().expect("run a build step of the ray-node image");
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
