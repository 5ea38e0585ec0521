//! A podman API service started for the duration of one command, when podman is installed but
//! no socket answers (as on a node where the podman.socket unit is not enabled).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::endpoint::answers;
use super::EngineKind;
use crate::error::{Error, Result};

/// Stops the service (and removes its socket directory) when dropped.
pub struct TemporaryService {
    child: Child,
    pub socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl TemporaryService {
    pub fn start(podman: &Path) -> Result<TemporaryService> {
        let dir = tempfile::Builder::new().prefix("strix-toolbox-podman-").tempdir().map_err(|e| {
            let tmp = std::env::temp_dir();
            Error::host(
                tmp.display().to_string(),
                format!("cannot create a directory for the podman socket in {}: {e}", tmp.display()),
                "set TMPDIR to a writable directory",
            )
        })?;
        let socket = dir.path().join("podman.sock");
        let child = Command::new(podman)
            .args(["system", "service", "--time=0"])
            .arg(format!("unix://{}", socket.display()))
            // podman system service exits at once when stdin is not /dev/null.
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                EngineKind::Podman.unavailable(
                    format!("cannot start `{} system service`: {e}", podman.display()),
                    "check that podman runs (`podman info`), or enable its socket \
                     (`systemctl --user enable --now podman.socket`)",
                )
            })?;
        let mut service = TemporaryService { child, socket, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(15);
        while !answers(&service.socket) {
            if let Ok(Some(status)) = service.child.try_wait() {
                return Err(EngineKind::Podman.unavailable(
                    format!("`podman system service` exited ({status}) before answering"),
                    "run `podman info` to see why, or enable the socket (`systemctl --user enable --now podman.socket`)",
                ));
            }
            if Instant::now() > deadline {
                return Err(EngineKind::Podman.unavailable(
                    "`podman system service` did not answer within 15 s",
                    "enable the socket (`systemctl --user enable --now podman.socket`)",
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(service)
    }
}

impl Drop for TemporaryService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
