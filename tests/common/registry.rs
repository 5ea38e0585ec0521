//! A docker-registry on 127.0.0.1 with filesystem storage in a temporary directory.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{free_port, stop_child, wait_until};

pub struct Registry {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl Registry {
    pub fn start() -> Registry {
        let dir = tempfile::Builder::new().prefix("registry-").tempdir().expect("tempdir");
        let port = free_port();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("data").display()
            ),
        )
        .expect("write registry config");
        let mut registry = Registry { child: None, port, dir };
        registry.spawn();
        registry
    }

    fn spawn(&mut self) {
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(self.dir.path().join("config.yml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start docker-registry (scripts/test-deps.sh installs it)");
        self.child = Some(child);
        let port = self.port;
        wait_until("registry", Duration::from_secs(10), || TcpStream::connect(("127.0.0.1", port)).is_ok());
    }

    /// `127.0.0.1:PORT`
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Take the registry down (a "dead registry" for failure tests).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop_child(&mut child);
        }
    }

    /// Bring it back with the same storage and port.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}
