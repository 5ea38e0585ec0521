//! The unprivileged account the rootless tests run as (scripts/test-deps.sh creates it, with
//! subordinate uid/gid ranges): rootless podman is how most people run their toolboxes.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tempfile::TempDir;

use super::cli::strix_command_at;

pub const ROOTLESS_USER: &str = "strix-rootless";

#[derive(Clone, Debug)]
pub struct TestUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
}

impl TestUser {
    /// The rootless test account, from /etc/passwd.
    pub fn rootless() -> TestUser {
        let passwd = std::fs::read_to_string("/etc/passwd").expect("read /etc/passwd");
        let entry = passwd
            .lines()
            .map(|line| line.split(':').collect::<Vec<_>>())
            .find(|fields| fields.len() >= 7 && fields[0] == ROOTLESS_USER)
            .unwrap_or_else(|| panic!("no user {ROOTLESS_USER}: scripts/test-deps.sh creates it"));
        TestUser {
            name: entry[0].to_string(),
            uid: entry[2].parse().expect("uid"),
            gid: entry[3].parse().expect("gid"),
            home: PathBuf::from(entry[5]),
        }
    }

    /// Make `command` run as this user, with the login environment a session would give it.
    pub fn run_as<'a>(&self, command: &'a mut Command) -> &'a mut Command {
        // (std drops root's supplementary groups when it switches uid.)
        command.uid(self.uid).gid(self.gid);
        command.env("HOME", &self.home).env("USER", &self.name).env("LOGNAME", &self.name)
    }

    /// Hand `path` (recursively) to this user.
    pub fn give(&self, path: &Path) {
        let status = Command::new("chown")
            .arg("-R")
            .arg(format!("{}:{}", self.uid, self.gid))
            .arg(path)
            .status()
            .expect("chown");
        assert!(status.success(), "chown {path:?}");
    }
}

/// The strix-toolbox binary, copied where `user` can run it, wherever the checkout lives.
pub struct BinaryFor {
    _dir: TempDir,
    pub program: PathBuf,
    pub user: TestUser,
}

impl BinaryFor {
    pub fn new(user: &TestUser) -> BinaryFor {
        let dir = tempfile::Builder::new().prefix("strix-bin-").tempdir_in("/tmp").expect("tempdir");
        let program = dir.path().join("strix-toolbox");
        std::fs::copy(env!("CARGO_BIN_EXE_strix-toolbox"), &program).expect("copy the binary");
        user.give(dir.path());
        BinaryFor { _dir: dir, program, user: user.clone() }
    }

    /// Run it as the user with a testbed's environment, no input.
    pub fn run(&self, env: &[(String, String)], args: &[&str]) -> Output {
        let mut command = strix_command_at(&self.program, env, args);
        self.user.run_as(&mut command).stdin(Stdio::null()).output().expect("run strix-toolbox as the test user")
    }
}

/// Let everyone into `dir` (a fake host tree is a private tempdir).
pub fn open_to_all(dir: &Path) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Rootless podman keeps its user namespace alive with a pause process (catatonit) that outlives
/// every podman command and names no testbed path in its arguments (so `pkill -f` misses it); it
/// does carry the testbed's XDG_RUNTIME_DIR, under `dir`. Stop every process whose environment
/// mentions `dir`.
pub fn stop_processes_in(dir: &Path) {
    let needle = dir.as_os_str().as_encoded_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else { return };
    for entry in entries.filter_map(|e| e.ok()) {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if pid > 1 && environ.windows(needle.len()).any(|w| w == needle) {
            // SAFETY: kill(2) on a process of this testbed.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}
