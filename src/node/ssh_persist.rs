//! Where a node's persistent ssh master lives between cluster commands (`--ssh-persist`): one
//! private directory per (destination, ssh config file) under the runtime directory's `ssh/`,
//! named by a hash (two nodes never share one, and the control socket's path stays far below
//! `sun_path`'s 108 bytes whatever the destination). It holds the control socket, the master's
//! log, a lock that lets one command at a time decide whether to reuse or start the master, and
//! what the node said of itself over the master when it was opened ([`NodeIdentity`]): a reused
//! master carries calls only while the node still says the same.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::identity::NodeIdentity;
use crate::error::{Error, Result};
use crate::paths::{open_lock_file, private_dir};

/// Hex digits of the hash that names a master's directory: 96 bits, no collision in practice.
const NAME_DIGITS: usize = 24;
/// How often a command waiting for another's lock looks again.
const LOCK_POLL: Duration = Duration::from_millis(20);

/// The directory of one node's persistent master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterHome {
    dir: PathBuf,
}

impl MasterHome {
    /// The master for `destination` reached with `config_file` (`ssh -F`; None: ~/.ssh/config).
    pub fn of(runtime_dir: &Path, destination: &str, config_file: Option<&Path>) -> MasterHome {
        MasterHome { dir: masters_dir(runtime_dir).join(name_of(destination, config_file)) }
    }

    /// Its directory, made private (0700, ours) with its parents when missing.
    pub fn prepare(&self) -> Result<()> {
        if let Some(parent) = self.dir.parent() {
            private_dir(parent)?;
        }
        private_dir(&self.dir)
    }

    /// The control socket (it exists while the master runs).
    pub fn control_path(&self) -> PathBuf {
        self.dir.join("master")
    }

    /// The master's own log (`ssh -E`): why its login failed.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("master.log")
    }

    fn identity_path(&self) -> PathBuf {
        self.dir.join("identity.json")
    }

    /// Whether anything of this master is left (its directory).
    pub fn exists(&self) -> bool {
        self.dir.exists()
    }

    /// Hold the master's lock (released when the file is dropped), waiting at most `limit` for
    /// another command that is starting or replacing it.
    pub async fn lock(&self, limit: Duration) -> Result<File> {
        let path = self.dir.join("lock");
        let file = open_lock_file(&path).map_err(|e| {
            Error::host(
                path.display().to_string(),
                format!("cannot open the ssh master's lock {}: {e}", path.display()),
                "remove it (it is remade), or set XDG_RUNTIME_DIR to a private directory of yours",
            )
        })?;
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(file),
                Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < limit => {
                    tokio::time::sleep(LOCK_POLL).await;
                }
                Err(error) => {
                    return Err(Error::host(
                        path.display().to_string(),
                        format!("cannot lock the ssh master's directory {} ({error})", self.dir.display()),
                        "another strix-toolbox is connecting to this node; wait for it, or run `strix-toolbox cluster \
                         disconnect`",
                    ))
                }
            }
        }
    }

    /// What the node said over this master when it was opened.
    pub fn recorded_identity(&self) -> Option<NodeIdentity> {
        serde_json::from_slice(&std::fs::read(self.identity_path()).ok()?).ok()
    }

    /// Keep what the node said over a master just opened (None: it said nothing, so a later
    /// command never reuses this master).
    pub fn record_identity(&self, identity: Option<&NodeIdentity>) {
        match identity.and_then(|identity| serde_json::to_vec(identity).ok()) {
            // A failed write only costs the next command a new master.
            Some(bytes) => drop(std::fs::write(self.identity_path(), bytes)),
            None => self.forget_identity(),
        }
    }

    /// Before a new master: nothing of the old one may be taken for it.
    pub fn forget_identity(&self) {
        let _ = std::fs::remove_file(self.identity_path());
    }

    /// A socket left by a master that is gone (or no longer answers): `ssh -M` refuses to
    /// listen where a file exists, and would then run without multiplexing.
    pub fn remove_socket(&self) {
        let _ = std::fs::remove_file(self.control_path());
    }

    /// Everything of this master, once it is closed.
    pub fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `RUNTIME/ssh`: every persistent master's directory.
pub fn masters_dir(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join("ssh")
}

/// The directory's name: a hash of the destination and the config file that resolves it (the
/// same alias in two config files may be two machines).
fn name_of(destination: &str, config_file: Option<&Path>) -> String {
    let config = config_file.map(|file| std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf()));
    let mut hash = Sha256::new();
    hash.update(destination.as_bytes());
    hash.update([0]);
    if let Some(config) = config {
        hash.update(config.as_os_str().as_encoded_bytes());
    }
    let hex = format!("{:x}", hash.finalize());
    hex[..NAME_DIGITS].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_destination_and_config_file_has_its_own_short_socket() {
        let runtime = Path::new("/run/user/1000/strix-toolbox");
        let a = MasterHome::of(runtime, "strix1", None);
        assert_eq!(a, MasterHome::of(runtime, "strix1", None), "the same node finds the same master");
        assert_ne!(a, MasterHome::of(runtime, "strix2", None));
        assert_ne!(a, MasterHome::of(runtime, "strix1", Some(Path::new("/home/me/.ssh/cluster"))));
        let long = "a".repeat(300);
        let socket = MasterHome::of(runtime, &format!("root@{long}"), Some(Path::new(&long))).control_path();
        assert!(socket.starts_with("/run/user/1000/strix-toolbox/ssh/"), "{}", socket.display());
        // ssh binds a temporary name (the path plus 17 characters) before renaming it.
        assert!(socket.as_os_str().len() + 17 < 108, "{}", socket.display());
    }

    #[tokio::test]
    async fn the_directory_is_private_and_the_identity_round_trips() {
        let runtime = tempfile::tempdir().unwrap();
        let home = MasterHome::of(runtime.path(), "strix1", None);
        home.prepare().unwrap();
        use std::os::unix::fs::PermissionsExt;
        for dir in [masters_dir(runtime.path()), home.dir.clone()] {
            assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700, "{}", dir.display());
        }
        assert_eq!(home.recorded_identity(), None);
        let identity = NodeIdentity { boot_id: Some("b1".into()), host_keys: vec!["SHA256:x".into()] };
        home.record_identity(Some(&identity));
        assert_eq!(home.recorded_identity(), Some(identity));
        home.record_identity(None);
        assert_eq!(home.recorded_identity(), None);
        home.remove();
        assert!(!home.exists());
    }

    #[tokio::test]
    async fn a_second_lock_waits_for_the_first_within_its_limit() {
        let runtime = tempfile::tempdir().unwrap();
        let home = MasterHome::of(runtime.path(), "strix1", None);
        home.prepare().unwrap();
        let held = home.lock(Duration::from_secs(1)).await.unwrap();
        let error = home.lock(Duration::from_millis(100)).await.expect_err("held");
        assert!(error.to_string().contains("cluster disconnect"), "{error}");
        drop(held);
        home.lock(Duration::from_millis(100)).await.expect("released");
    }
}
