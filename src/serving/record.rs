//! What a launch started on a node, recorded on that node (`$XDG_STATE_HOME/strix-toolbox/serving/`,
//! else `~/.local/state/…`), so `stop`, `logs` and `status` find it later from any machine. The
//! directory is under the home the toolbox mounts at the same path, so vLLM inside the toolbox
//! writes its log beside the record and the node reads both directly.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::identity::ModelIdentity;
use crate::serving::engine::ServingEngine;

/// The node's part in the serving cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Ray's head and vLLM's driver (the endpoint).
    Head,
    /// A Ray worker.
    Worker,
    /// One node, no Ray: vLLM's default executor.
    Single,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServingRecord {
    pub toolbox: String,
    pub model: String,
    /// The name `/v1/models` lists it under (`--served-model-name`, else the model).
    pub served: String,
    pub role: Role,
    /// Nodes in the serving cluster and the tensor-parallel size.
    pub nodes: usize,
    pub tp: usize,
    pub port: u16,
    /// This node's cluster-link address, and the head's.
    pub link_ip: Ipv4Addr,
    pub head_ip: Ipv4Addr,
    /// `http://HEAD:PORT/v1`.
    pub endpoint: String,
    /// The toolbox image (registry digest, else id) it was launched from.
    pub image: String,
    /// When (RFC 3339).
    pub started: String,
    /// Ray runs in this node's toolbox.
    pub ray: bool,
    /// `vllm serve`'s pid inside the toolbox (head or single node).
    pub vllm_pid: Option<u32>,
    /// What serves (a record from before engines were recorded: vLLM).
    #[serde(default)]
    pub engine: ServingEngine,
    /// Which weights serve: the Hub commit, or the GGUF by its content; none for a model given as
    /// a path (nothing names its weights) and in records from before identities were recorded.
    #[serde(default)]
    pub identity: Option<ModelIdentity>,
}

impl ServingRecord {
    pub fn endpoint_of(head_ip: Ipv4Addr, port: u16) -> String {
        format!("http://{head_ip}:{port}/v1")
    }
}

/// Where one toolbox's serving state lives on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingFiles {
    dir: PathBuf,
    toolbox: String,
}

impl ServingFiles {
    /// For `toolbox`, under this process's XDG state directory.
    pub fn of(toolbox: &str) -> Result<ServingFiles> {
        let dir = state_dir().ok_or_else(|| {
            Error::host(
                "HOME",
                "neither XDG_STATE_HOME nor HOME is set, so there is nowhere to record what was launched",
                "set HOME",
            )
        })?;
        Ok(ServingFiles::in_dir(&dir.join("strix-toolbox/serving"), toolbox))
    }

    pub fn in_dir(dir: &Path, toolbox: &str) -> ServingFiles {
        ServingFiles { dir: dir.to_path_buf(), toolbox: toolbox.to_string() }
    }

    pub fn record(&self) -> PathBuf {
        self.dir.join(format!("{}.json", self.toolbox))
    }

    /// vLLM's output (it survives the launch command and the stop).
    pub fn vllm_log(&self) -> PathBuf {
        self.dir.join(format!("{}.vllm.log", self.toolbox))
    }

    /// The image the last launch ran: a different one clears vLLM's compile cache first.
    pub fn last_image(&self) -> PathBuf {
        self.dir.join(format!("{}.last-image", self.toolbox))
    }

    pub fn read(&self) -> Result<Option<ServingRecord>> {
        let path = self.record();
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
                Error::host(
                    path.display().to_string(),
                    format!("{} is not a serving record ({e})", path.display()),
                    format!("remove it (`rm {}`) once `strix-toolbox stop` stopped what runs", path.display()),
                )
            }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(Error::read(path, error)),
        }
    }

    /// Write the record (creating the directory), replacing any previous one atomically.
    pub fn write(&self, record: &ServingRecord) -> Result<()> {
        let text = serde_json::to_string_pretty(record)
            .map_err(|e| Error::Internal(format!("cannot encode the serving record: {e}")))?;
        self.write_file(&self.record(), text.as_bytes())
    }

    pub fn remove(&self) -> Result<()> {
        match std::fs::remove_file(self.record()) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(self.write_error(&self.record(), error)),
        }
    }

    /// Start a fresh log for this launch (the previous one goes to `….vllm.log.1`).
    pub fn rotate_log(&self) -> Result<()> {
        let log = self.vllm_log();
        std::fs::create_dir_all(&self.dir).map_err(|e| self.write_error(&self.dir, e))?;
        if log.exists() {
            std::fs::rename(&log, log.with_extension("log.1")).map_err(|e| self.write_error(&log, e))?;
        }
        Ok(())
    }

    pub fn write_file(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        std::fs::create_dir_all(&self.dir).map_err(|e| self.write_error(&self.dir, e))?;
        let mut temp = tempfile::NamedTempFile::new_in(&self.dir).map_err(|e| self.write_error(&self.dir, e))?;
        std::io::Write::write_all(&mut temp, bytes).map_err(|e| self.write_error(path, e))?;
        temp.persist(path).map_err(|e| self.write_error(path, e.error))?;
        Ok(())
    }

    fn write_error(&self, path: &Path, error: std::io::Error) -> Error {
        Error::host(
            path.display().to_string(),
            format!("cannot write {}: {error}", path.display()),
            "check that the home directory is writable and not full",
        )
    }
}

/// `$XDG_STATE_HOME`, else `~/.local/state`.
pub(crate) fn state_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".local/state")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> ServingRecord {
        ServingRecord {
            toolbox: "vllm".into(),
            model: "org/model".into(),
            served: "org/model".into(),
            role: Role::Head,
            nodes: 2,
            tp: 2,
            port: 8000,
            link_ip: Ipv4Addr::new(192, 168, 2, 1),
            head_ip: Ipv4Addr::new(192, 168, 2, 1),
            endpoint: ServingRecord::endpoint_of(Ipv4Addr::new(192, 168, 2, 1), 8000),
            image: "sha256:ab".into(),
            started: "2026-11-23T12:00:00Z".into(),
            ray: true,
            vllm_pid: Some(42),
            engine: ServingEngine::Vllm,
            identity: Some(ModelIdentity::Hub { repo: "org/model".into(), commit: "c12a728b".into() }),
        }
    }

    #[test]
    fn a_record_is_written_read_back_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let files = ServingFiles::in_dir(&dir.path().join("serving"), "vllm");
        assert_eq!(files.read().unwrap(), None);
        files.write(&record()).unwrap();
        assert_eq!(files.read().unwrap(), Some(record()));
        assert_eq!(record().endpoint, "http://192.168.2.1:8000/v1");
        files.remove().unwrap();
        files.remove().unwrap();
        assert_eq!(files.read().unwrap(), None);
    }

    #[test]
    fn a_record_from_before_engines_and_identities_reads_as_vllm_unidentified() {
        let mut old = serde_json::to_value(record()).unwrap();
        let object = old.as_object_mut().unwrap();
        object.remove("engine");
        object.remove("identity");
        let read: ServingRecord = serde_json::from_value(old).unwrap();
        assert_eq!((read.engine, read.identity), (ServingEngine::Vllm, None));
    }

    #[test]
    fn a_mangled_record_is_an_error_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let files = ServingFiles::in_dir(dir.path(), "vllm");
        std::fs::write(files.record(), "{not json").unwrap();
        let error = files.read().unwrap_err().to_string();
        assert!(error.contains("not a serving record") && error.contains("strix-toolbox stop"), "{error}");
    }

    #[test]
    fn each_launch_starts_a_fresh_log_and_keeps_the_last_one() {
        let dir = tempfile::tempdir().unwrap();
        let files = ServingFiles::in_dir(dir.path(), "vllm");
        files.rotate_log().unwrap();
        std::fs::write(files.vllm_log(), "first\n").unwrap();
        files.rotate_log().unwrap();
        assert!(!files.vllm_log().exists());
        assert_eq!(std::fs::read_to_string(dir.path().join("vllm.vllm.log.1")).unwrap(), "first\n");
    }
}
