//! The vLLM stand-in (stand_in_vllm.py) run directly on loopback with the machine's python3: one
//! node, no Ray, so only Python's standard library. For tests of what it answers itself (its
//! `/metrics`, its stall switch); the cluster tests run it inside their node image. Stopped when
//! dropped; its log is kept for failure messages.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use super::http;
use super::{free_port, stop_child, wait_until};

pub struct StandInVllm {
    child: Child,
    address: SocketAddr,
    log: PathBuf,
    _dir: TempDir,
}

impl StandInVllm {
    /// `vllm serve MODEL --served-model-name SERVED` with `env`, once `/health` answers.
    pub fn start(model: &str, served: &str, env: &[(&str, &str)]) -> StandInVllm {
        let dir = tempfile::Builder::new().prefix("stand-in-vllm-").tempdir().expect("tempdir");
        let log = dir.path().join("vllm.log");
        let file = std::fs::File::create(&log).expect("create the log");
        let port = free_port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testsuite/support/stand_in_vllm.py");
        let child = Command::new("python3")
            .arg(script)
            .args(["serve", model, "--host", "127.0.0.1", "--port", &port.to_string(), "--served-model-name", served])
            .envs(env.iter().copied())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("clone the log"))
            .stderr(file)
            .spawn()
            .expect("run python3 (scripts/test-deps.sh installs it)");
        let address = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
        let mut stand_in = StandInVllm { child, address, log, _dir: dir };
        wait_until("the vLLM stand-in's /health", Duration::from_secs(60), || {
            if let Ok(Some(status)) = stand_in.child.try_wait() {
                panic!("the stand-in exited ({status}):\n{}", stand_in.log());
            }
            http::request(None, "GET", &format!("{}/health", stand_in.url()), None, Duration::from_secs(2))
                .is_ok_and(|response| response.status == 200)
        });
        stand_in
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for StandInVllm {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}
