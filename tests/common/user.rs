//! The unprivileged account the rootless tests run as (scripts/test-deps.sh creates it, with
//! subordinate uid/gid ranges): rootless podman is how most people run their toolboxes.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

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
