//! Fake host trees for `--host-root`: a fixture under tests/fixtures copied into a temporary
//! directory, with the device nodes its `devices.txt` lists made by mknod (git cannot hold them).
//!
//! `devices.txt` lines: `c MAJOR MINOR PATH MODE GID` (octal mode, numeric gid).

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;
use walkdir::WalkDir;

pub fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// A copy of fixture `name` with real device nodes; removed when dropped.
pub fn materialize(name: &str) -> TempDir {
    let source = fixture_dir(name);
    let dir = tempfile::Builder::new().prefix(&format!("host-{name}-")).tempdir().expect("tempdir");
    for entry in WalkDir::new(&source).min_depth(1) {
        let entry = entry.expect("walk fixture");
        let target = dir.path().join(entry.path().strip_prefix(&source).expect("under fixture"));
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
        } else {
            std::fs::copy(entry.path(), &target).expect("copy fixture file");
        }
    }
    let manifest = std::fs::read_to_string(source.join("devices.txt")).unwrap_or_default();
    for line in manifest.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [kind, major, minor, path, mode, gid] = fields[..] else {
            panic!("devices.txt: bad line {line:?}");
        };
        make_node(&dir.path().join(path), kind, major, minor, mode, gid);
    }
    dir
}

/// mknod + chmod + chgrp, as root.
pub fn make_node(path: &Path, kind: &str, major: &str, minor: &str, mode: &str, gid: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    let run = |program: &str, args: &[&str]| {
        let status = Command::new(program).args(args).status().expect(program);
        assert!(status.success(), "{program} {args:?} failed");
    };
    let node = path.to_str().expect("utf-8 path");
    run("mknod", &["-m", mode, node, kind, major, minor]);
    run("chgrp", &[gid, node]);
}

/// What amdgpu says of the tree's GPU memory (card0): `total` bytes of GTT, `used` of them in use.
/// A node serving the real vLLM on CPU takes its KV cache from this machine's RAM as the plan
/// sizes it from the GTT, so its tests give it a few GiB.
pub fn set_gtt(tree: &Path, total: u64, used: u64) {
    let device = tree.join("sys/class/drm/card0/device");
    std::fs::write(device.join("mem_info_gtt_total"), format!("{total}\n")).expect("the tree's GTT");
    std::fs::write(device.join("mem_info_gtt_used"), format!("{used}\n")).expect("the tree's GTT in use");
}
