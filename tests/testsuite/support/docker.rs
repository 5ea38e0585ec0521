//! A private dockerd (TESTBED.md: no iptables, no bridge, vfs storage, its own socket and
//! directories, the loopback registry marked insecure), in its own process group so its
//! containerd goes down with it. A test cluster's docker node runs it inside the node's network
//! namespace.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::netns::{self, NetNs};
use super::wait_until;

pub struct DockerDaemon {
    child: Child,
    pub socket: PathBuf,
    dir: tempfile::TempDir,
}

impl DockerDaemon {
    pub fn start(registry_port: u16) -> DockerDaemon {
        DockerDaemon::start_as(registry_port, None)
    }

    /// A node's dockerd: inside `netns`, so its containers and pulls are the node's.
    pub fn start_in(registry_port: u16, netns: &NetNs) -> DockerDaemon {
        DockerDaemon::start_as(registry_port, Some(netns))
    }

    fn start_as(registry_port: u16, netns: Option<&NetNs>) -> DockerDaemon {
        // Short paths: containerd's sockets live under the exec root (unix path limit ~108 bytes).
        let dir = tempfile::Builder::new().prefix("dk-").tempdir_in("/tmp").expect("tempdir");
        let root = dir.path();
        let socket = root.join("docker.sock");
        let mut dockerd = match netns {
            Some(netns) => netns::enter(netns.name(), "dockerd"),
            None => Command::new("dockerd"),
        };
        let child = dockerd
            .args(["--iptables=false", "--ip6tables=false", "--bridge=none", "--storage-driver=vfs"])
            .arg(format!("--host=unix://{}", socket.display()))
            .arg(format!("--data-root={}", root.join("data").display()))
            .arg(format!("--exec-root={}", root.join("exec").display()))
            .arg(format!("--pidfile={}", root.join("docker.pid").display()))
            .arg(format!("--insecure-registry=127.0.0.1:{registry_port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(root.join("dockerd.log")).expect("dockerd log"))
            .process_group(0)
            .spawn()
            .expect("start dockerd (scripts/test-deps.sh installs docker.io)");
        let probe = socket.clone();
        let log = root.join("dockerd.log");
        let started = Instant::now();
        wait_until("dockerd", Duration::from_secs(60), || {
            let up = std::os::unix::net::UnixStream::connect(&probe).is_ok();
            if !up && started.elapsed() > Duration::from_secs(55) {
                eprintln!("dockerd log:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
            }
            up
        });
        std::fs::create_dir_all(root.join("xdg")).expect("mkdir xdg");
        DockerDaemon { child, socket, dir }
    }

    /// The docker CLI for this daemon.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        Command::new("docker")
            .arg("--host")
            .arg(format!("unix://{}", self.socket.display()))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("docker CLI")
    }

    /// What the strix-toolbox binary needs to use this daemon (locks stay in the testbed too).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("DOCKER_HOST".to_string(), format!("unix://{}", self.socket.display())),
            ("XDG_RUNTIME_DIR".to_string(), self.dir.path().join("xdg").display().to_string()),
        ]
    }
}

impl Drop for DockerDaemon {
    fn drop(&mut self) {
        let group = -(self.child.id() as i32);
        // SAFETY: kill(2) on the process group we created for dockerd.
        unsafe { libc::kill(group, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline && !matches!(self.child.try_wait(), Ok(Some(_))) {
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: as above; whatever is left of the group (containerd, shims) goes now.
        unsafe { libc::kill(group, libc::SIGKILL) };
        let _ = self.child.wait();
        // Shims re-parent out of the group; every process of this daemon names its directory.
        let _ = Command::new("pkill").arg("-9").arg("-f").arg(self.dir.path()).status();
        // dockerd leaves mounts (the default netns) under its directories; lift them so the
        // directory can be removed.
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let prefix = self.dir.path().display().to_string();
        for target in mounts.lines().filter_map(|l| l.split_whitespace().nth(1)).filter(|t| t.starts_with(&prefix)) {
            let _ = Command::new("umount").arg("-l").arg(target).stderr(Stdio::null()).status();
        }
        let _ = Command::new("chmod").args(["-R", "u+w"]).arg(self.dir.path()).stderr(Stdio::null()).status();
    }
}
