//! A docker-registry on 127.0.0.1 with filesystem storage in a temporary directory; optionally
//! behind a login (htpasswd, bcrypt), as a private registry is.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{free_port, stop_child, wait_until};

pub struct Registry {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    /// `user:password` when the registry wants a login.
    pub login: Option<String>,
}

impl Registry {
    pub fn start() -> Registry {
        Registry::start_with(None)
    }

    /// A registry that answers 401 to anyone without `user`/`password`.
    pub fn start_with_login(user: &str, password: &str) -> Registry {
        Registry::start_with(Some((user, password)))
    }

    fn start_with(login: Option<(&str, &str)>) -> Registry {
        let dir = tempfile::Builder::new().prefix("registry-").tempdir().expect("tempdir");
        let port = free_port();
        let mut config = format!(
            "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("data").display()
        );
        if let Some((user, password)) = login {
            let htpasswd = dir.path().join("htpasswd");
            let hash = bcrypt::hash(password, 5).expect("bcrypt");
            std::fs::write(&htpasswd, format!("{user}:{hash}\n")).expect("write htpasswd");
            config.push_str(&format!("auth:\n  htpasswd:\n    realm: test\n    path: {}\n", htpasswd.display()));
        }
        std::fs::write(dir.path().join("config.yml"), config).expect("write registry config");
        let login = login.map(|(user, password)| format!("{user}:{password}"));
        let mut registry = Registry { child: None, port, dir, login };
        registry.spawn();
        registry
    }

    /// An auth.json (podman's and docker's format) holding this registry's login.
    pub fn auth_json(&self) -> String {
        use base64::Engine as _;
        let login = self.login.as_deref().expect("a registry with a login");
        let auth = base64::engine::general_purpose::STANDARD.encode(login);
        serde_json::json!({ "auths": { self.host(): { "auth": auth } } }).to_string()
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
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}
