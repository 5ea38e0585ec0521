//! Where the head keeps its registry: `$XDG_DATA_HOME/strix-toolbox/registry`, else
//! `~/.local/share/strix-toolbox/registry` ([`Paths::data_dir`]), 0700. It holds the cluster CA,
//! the certificates it signed for the head (`certs/`), the configurations of the registry's two
//! listeners, its storage, and a record of what it serves; it outlives every refresh, which is why
//! prune keeps it in bounds and `cluster status` shows its size.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::paths::{open_lock_file, Paths};

/// One image the head's registry serves, and for whom.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedImage {
    /// The repository's path in the registry (`kyuz0/vllm-therock-gfx1151`).
    pub path: String,
    /// Its manifest's digest (an index's, for a multi-platform image).
    pub digest: String,
    /// The toolbox it was copied for: prune keeps per toolbox, as each node keeps pins.
    pub toolbox: String,
    /// Its pin (date tag), once the nodes reported it.
    #[serde(default)]
    pub pin: Option<String>,
    /// When it was copied, as a pin-shaped time (`YYYYMMDD-HHMMSS`, UTC).
    pub copied: String,
}

impl ServedImage {
    /// What orders a toolbox's images, newest last: the pin, else when it was copied.
    pub fn age(&self) -> &str {
        self.pin.as_deref().unwrap_or(&self.copied)
    }
}

/// The current time as pins write it.
pub fn now_as_pin() -> String {
    chrono::Utc::now().format("%Y%m%d-%H%M%S").to_string()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryHome {
    pub dir: PathBuf,
}

/// Held while the registry's content changes (a copy, a prune): one at a time on the head.
pub struct HomeLock {
    _file: File,
}

impl RegistryHome {
    /// The head's registry home (it may not exist yet).
    pub fn locate(paths: &Paths) -> Result<RegistryHome> {
        Ok(RegistryHome { dir: paths.data_dir("the cluster registry")?.join("registry") })
    }

    pub fn exists(&self) -> bool {
        self.dir.is_dir()
    }

    /// Make it (private to its owner: it holds the CA's key).
    pub fn create(&self) -> Result<()> {
        for dir in [self.dir.clone(), self.storage(), self.certs()] {
            std::fs::create_dir_all(&dir).map_err(|e| self.unusable(&dir, e))?;
        }
        std::fs::set_permissions(&self.dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .map_err(|e| self.unusable(&self.dir, e))
    }

    /// The cluster CA's certificate, which every node installs.
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// The CA's private key (0600; never leaves the head).
    pub fn ca_key(&self) -> PathBuf {
        self.dir.join("ca.key")
    }

    /// The CA's name, to sign with it again.
    pub fn ca_name(&self) -> PathBuf {
        self.dir.join("ca.name")
    }

    /// The certificates the CA signed for the head.
    pub fn certs(&self) -> PathBuf {
        self.dir.join("certs")
    }

    /// The head's server certificate (its link address and 127.0.0.1), and its key (0600).
    pub fn server_cert(&self) -> PathBuf {
        self.certs().join("server.crt")
    }

    pub fn server_key(&self) -> PathBuf {
        self.certs().join("server.key")
    }

    /// The head's own client certificate, the only one the registry's writer accepts, and its key
    /// (0600).
    pub fn head_cert(&self) -> PathBuf {
        self.certs().join("head.crt")
    }

    pub fn head_key(&self) -> PathBuf {
        self.certs().join("head.key")
    }

    /// The configuration of the registry the nodes read from, on the link.
    pub fn config(&self) -> PathBuf {
        self.dir.join("config.yml")
    }

    /// The configuration of the head's writer, on 127.0.0.1.
    pub fn writer_config(&self) -> PathBuf {
        self.dir.join("writer.yml")
    }

    /// The registry's storage (`/var/lib/registry` in its container).
    pub fn storage(&self) -> PathBuf {
        self.dir.join("storage")
    }

    fn served_file(&self) -> PathBuf {
        self.dir.join("served.json")
    }

    /// What it serves (nothing when it served nothing yet).
    pub fn served(&self) -> Result<Vec<ServedImage>> {
        let path = self.served_file();
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| {
                Error::host(
                    path.display().to_string(),
                    format!("{} is not what strix-toolbox wrote ({e})", path.display()),
                    format!("remove it (the registry's images are copied again when needed): rm {}", path.display()),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(Error::read(path, e)),
        }
    }

    pub fn set_served(&self, served: &[ServedImage]) -> Result<()> {
        let text = serde_json::to_string_pretty(served)
            .map_err(|e| Error::Internal(format!("cannot encode what the registry serves: {e}")))?;
        self.write(&self.served_file(), text.as_bytes(), 0o644)
    }

    /// Write `contents` to `path` whole (a temporary file renamed over it), with `mode`.
    pub fn write(&self, path: &Path, contents: &[u8], mode: u32) -> Result<()> {
        let temp = path.with_extension(format!("tmp.{}", std::process::id()));
        let written = (|| {
            let mut file = OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(&temp)?;
            file.write_all(contents)?;
            file.sync_all()?;
            std::fs::rename(&temp, path)
        })();
        written.map_err(|e| self.unusable(path, e))
    }

    /// Wait for any other copy or prune on this head to finish, then hold the registry.
    pub async fn lock(&self) -> Result<HomeLock> {
        self.create()?;
        let path = self.dir.join("lock");
        let file = open_lock_file(&path).map_err(|e| self.unusable(&path, e))?;
        let locked = tokio::task::spawn_blocking(move || file.lock().map(|()| file))
            .await
            .map_err(|e| Error::Internal(format!("the registry lock's task failed: {e}")))?;
        Ok(HomeLock { _file: locked.map_err(|e| self.unusable(&path, e))? })
    }

    /// Bytes its storage takes on disk.
    pub fn disk_use(&self) -> u64 {
        walkdir::WalkDir::new(self.storage())
            .into_iter()
            .filter_map(|entry| entry.ok()?.metadata().ok())
            .filter(|metadata| !metadata.is_dir())
            .map(|metadata| metadata.blocks() * 512)
            .sum()
    }

    fn unusable(&self, path: &Path, error: std::io::Error) -> Error {
        Error::host(
            path.display().to_string(),
            format!("cannot use the cluster registry's directory {}: {error}", path.display()),
            format!(
                "check that {} is writable (or set XDG_DATA_HOME), or refresh with --spread off",
                self.dir.display()
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_images_round_trip_and_order_by_pin_else_copy_time() {
        let dir = tempfile::tempdir().unwrap();
        let home = RegistryHome { dir: dir.path().join("registry") };
        assert_eq!(home.served().unwrap(), []);
        home.create().unwrap();
        let image = ServedImage {
            path: "kyuz0/vllm".into(),
            digest: "sha256:aa".into(),
            toolbox: "vllm".into(),
            pin: None,
            copied: "20261123-120000".into(),
        };
        assert_eq!(image.age(), "20261123-120000");
        let pinned = ServedImage { pin: Some("20261101-100000".into()), ..image.clone() };
        assert_eq!(pinned.age(), "20261101-100000");
        home.set_served(&[image.clone(), pinned.clone()]).unwrap();
        assert_eq!(home.served().unwrap(), [image, pinned]);
        let mode = std::fs::metadata(&home.dir).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }
}
