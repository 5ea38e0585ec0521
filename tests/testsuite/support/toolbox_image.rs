//! A rootfs Toolbx accepts (useradd, passwd, sudo, capsh), made once by debootstrap and cached
//! under target/ as a tarball (~60 s the first time; every later test run reuses it).

use std::path::PathBuf;
use std::process::Command;

/// Path of the cached rootfs tarball, building it on first use (serialised by a file lock).
pub fn toolbox_rootfs_tar() -> PathBuf {
    let cache = super::test_cache::dir();
    let tarball = cache.join("toolbox-bookworm-rootfs.tar");
    let lock = std::fs::File::create(cache.join("toolbox-rootfs.lock")).expect("lock file");
    lock.lock().expect("lock the rootfs cache");
    if tarball.exists() {
        return tarball;
    }
    let staging = tempfile::Builder::new().prefix("toolbox-rootfs-").tempdir_in(&cache).expect("tempdir");
    let rootfs = staging.path().join("rootfs");
    let status = Command::new("debootstrap")
        .args(["--variant=minbase", "--include=sudo,passwd,libcap2-bin", "bookworm"])
        .arg(&rootfs)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run debootstrap (scripts/test-deps.sh installs it)");
    assert!(status.success(), "debootstrap failed");
    let partial = staging.path().join("rootfs.tar");
    let status = Command::new("tar").arg("-C").arg(&rootfs).args(["-cf"]).arg(&partial).arg(".").status().expect("tar");
    assert!(status.success(), "tar of the rootfs failed");
    std::fs::rename(&partial, &tarball).expect("move the tarball into the cache");
    tarball
}
