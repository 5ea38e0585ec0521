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

    /// A registry whose storage starts as `storage` (a registry's filesystem storage, like the
    /// vLLM CPU image's): its blobs hard-linked (a blob is written once, by its digest, and never
    /// again), its repositories' small files copied (a push rewrites a tag's link in place).
    pub fn start_holding(storage: &std::path::Path) -> Registry {
        Registry::start_from(None, Some(storage))
    }

    fn start_with(login: Option<(&str, &str)>) -> Registry {
        Registry::start_from(login, None)
    }

    fn start_from(login: Option<(&str, &str)>, storage: Option<&std::path::Path>) -> Registry {
        let dir = tempfile::Builder::new().prefix("registry-").tempdir().expect("tempdir");
        if let Some(storage) = storage {
            let (from, to) = (storage.join("docker/registry/v2"), dir.path().join("data/docker/registry/v2"));
            std::fs::create_dir_all(&to).expect("mkdir the registry's storage");
            for (part, how) in [("blobs", "-al"), ("repositories", "-a")] {
                let status = Command::new("cp").arg(how).arg(from.join(part)).arg(&to).status().expect("run cp");
                assert!(status.success(), "copy {} into the test's registry", from.join(part).display());
            }
        }
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
        let log = std::fs::File::options().create(true).append(true).open(self.log_path()).expect("registry log");
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(self.dir.path().join("config.yml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start docker-registry (scripts/test-deps.sh installs it)");
        self.child = Some(child);
        let port = self.port;
        wait_until("registry", Duration::from_secs(10), || TcpStream::connect(("127.0.0.1", port)).is_ok());
    }

    fn log_path(&self) -> std::path::PathBuf {
        self.dir.path().join("registry.log")
    }

    /// The requests the registry answered so far, one `METHOD URI` a line, oldest first (from its
    /// access log: what a client asked of it, whoever the client was).
    pub fn requests(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        // logrus fields: `name=value`, the value in quotes when it holds a space or a quote.
        let field = |line: &str, name: &str| {
            let value = &line[line.find(&format!(" {name}="))? + name.len() + 2..];
            match value.strip_prefix('"') {
                Some(quoted) => quoted.split('"').next(),
                None => value.split_whitespace().next(),
            }
            .map(str::to_string)
        };
        log.lines()
            .filter(|line| line.contains("response completed"))
            .filter_map(|line| {
                Some(format!("{} {}", field(line, "http.request.method")?, field(line, "http.request.uri")?))
            })
            .collect()
    }

    /// `127.0.0.1:PORT`
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Where the registry keeps the blob `digest` (`sha256:…`): a test can spoil it, and the
    /// registry serves what is there unchecked.
    pub fn blob_file(&self, digest: &str) -> std::path::PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.dir.path().join("data/docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data")
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
