//! What a launch started on a node, recorded on that node (`$XDG_STATE_HOME/strix-toolbox/serving/`,
//! else `~/.local/state/…`), so `stop`, `logs` and `status` find it later from any machine. The
//! directory is under the home the toolbox mounts at the same path, so vLLM inside the toolbox
//! writes its log beside the record and the node reads both directly.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::identity::ModelIdentity;
use crate::paths::Paths;
use crate::secret::names_a_secret;
use crate::serving::engine::{Backend, EngineRef};

/// The node's part in the serving cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The node that serves the endpoint (vLLM's driver and Ray's head; llama-server).
    Head,
    /// Another node: a Ray worker, an `rpc-server`.
    Worker,
    /// One node alone.
    Single,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServingRecord {
    pub toolbox: String,
    pub model: String,
    /// Which weights serve: the Hub commit, or the GGUF by its content; none for a model given as
    /// a directory (nothing names its weights) and in records from before identities were recorded.
    #[serde(default)]
    pub identity: Option<ModelIdentity>,
    /// The name `/v1/models` lists it under.
    pub served: String,
    #[serde(default)]
    pub engine: EngineRef,
    #[serde(default)]
    pub backend: Backend,
    pub role: Role,
    /// Nodes in the serving cluster.
    pub nodes: usize,
    /// vLLM's tensor-parallel size (llama.cpp splits layers instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<usize>,
    /// vLLM's pipeline-parallel size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pp: Option<usize>,
    /// The cluster link's transport at the launch (what RCCL should use between the nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<crate::spec::Transport>,
    pub port: u16,
    /// This node's cluster-link address, and the head's.
    pub link_ip: Ipv4Addr,
    pub head_ip: Ipv4Addr,
    /// `http://HEAD:PORT/v1`.
    pub endpoint: String,
    /// The endpoint wants an API key (its value is never recorded).
    #[serde(default)]
    pub api_key: bool,
    /// The toolbox image (registry digest, else id) it was launched from.
    pub image: String,
    /// When (RFC 3339): what tells one launch's record from the next.
    pub started: String,
    /// The processes this launch started here, detached, each with its log.
    #[serde(default)]
    pub processes: Vec<ServedProcess>,
    /// The operator's arguments for the engine's server (after `--`), as given: a canary's
    /// rollback serves again what served, as it served.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra: Vec<String>,
    /// The operator's `-e KEY=VALUE` settings, those whose names say no secret ([`recorded_env`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The GGUF file of the Hub repository `model` it was launched with (`--file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// What of the operator's `-e` settings a record keeps: a value whose name says it is a secret
/// (`*_TOKEN`, `*_KEY`…) is never written down; the API key and the Hub token have their own ways.
pub fn recorded_env(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.iter().filter(|(name, _)| !names_a_secret(name)).map(|(name, value)| (name.clone(), value.clone())).collect()
}

/// One process a launch started on the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedProcess {
    /// `vllm`, `llama-server`, `rpc-server`: its log is `TOOLBOX.NAME.log` beside the record.
    pub name: String,
    /// Its pid inside the toolbox.
    pub pid: u32,
    pub log: String,
    /// Where it listens, when others must reach it there (an `rpc-server` on the link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listens: Option<SocketAddr>,
}

impl ServingRecord {
    /// A record of what a launch is about to start: no process yet.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        toolbox: &str,
        model: &str,
        served: &str,
        engine: EngineRef,
        backend: Backend,
        role: Role,
        nodes: usize,
        port: u16,
        link_ip: Ipv4Addr,
        head_ip: Ipv4Addr,
        endpoint: &str,
    ) -> ServingRecord {
        ServingRecord {
            toolbox: toolbox.to_string(),
            model: model.to_string(),
            identity: None,
            served: served.to_string(),
            engine,
            backend,
            role,
            nodes,
            tp: None,
            pp: None,
            transport: None,
            port,
            link_ip,
            head_ip,
            endpoint: endpoint.to_string(),
            api_key: false,
            image: String::new(),
            started: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            processes: Vec::new(),
            extra: Vec::new(),
            env: BTreeMap::new(),
            file: None,
        }
    }

    pub fn endpoint_of(address: Ipv4Addr, port: u16) -> String {
        format!("http://{address}:{port}/v1")
    }

    /// The process named `name`, if this launch started one here.
    pub fn process(&self, name: &str) -> Option<&ServedProcess> {
        self.processes.iter().find(|p| p.name == name)
    }

    /// A record as it is stored, or as an older strix-toolbox stored it (`vllm_pid` and `ray`
    /// before processes were recorded), in today's terms.
    fn parse(text: &str, files: &ServingFiles) -> serde_json::Result<ServingRecord> {
        let mut value: serde_json::Value = serde_json::from_str(text)?;
        let legacy = value.as_object_mut().map(|o| (o.remove("vllm_pid"), o.remove("ray")));
        let mut record: ServingRecord = serde_json::from_value(value)?;
        if let Some((pid, ray)) = legacy {
            if let Some(pid) = pid.and_then(|p| p.as_u64()).and_then(|p| u32::try_from(p).ok()) {
                let log = files.log("vllm").display().to_string();
                record.processes.push(ServedProcess { name: "vllm".into(), pid, log, listens: None });
            }
            if ray.and_then(|r| r.as_bool()) == Some(true) {
                record.backend = Backend::Ray;
            }
        }
        Ok(record)
    }
}

/// The file of Ray's token for a launch (`ServingFiles::secret_file`).
pub const RAY_TOKEN: &str = "ray-token";

/// Where one toolbox's serving state lives on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingFiles {
    dir: PathBuf,
    toolbox: String,
}

impl ServingFiles {
    /// For `toolbox`, under this node's own state directory (apart from other nodes' when they
    /// share the home). A launch from before state was kept per node left its record in the
    /// shared one: it is read there until its stop removes it.
    pub fn of(paths: &Paths, toolbox: &str) -> Result<ServingFiles> {
        let keeps = "what was launched";
        let own = ServingFiles::in_dir(&paths.node_state_dir(keeps)?.join("serving"), toolbox);
        let before = ServingFiles::in_dir(&paths.state_dir(keeps)?.join("serving"), toolbox);
        Ok(if !own.record().exists() && before.record().exists() { before } else { own })
    }

    pub fn in_dir(dir: &Path, toolbox: &str) -> ServingFiles {
        ServingFiles { dir: dir.to_path_buf(), toolbox: toolbox.to_string() }
    }

    pub fn record(&self) -> PathBuf {
        self.dir.join(format!("{}.json", self.toolbox))
    }

    /// The output of the process named `name` (it survives the launch command and the stop).
    pub fn log(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{}.{name}.log", self.toolbox))
    }

    /// Every log of this toolbox's launches here, by process name (what `logs` shows after a stop).
    pub fn logs(&self) -> Vec<(String, PathBuf)> {
        let prefix = format!("{}.", self.toolbox);
        let mut logs: Vec<(String, PathBuf)> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let file = entry.file_name().into_string().ok()?;
                let name = file.strip_prefix(&prefix)?.strip_suffix(".log")?.to_string();
                Some((name, entry.path()))
            })
            .collect();
        logs.sort();
        logs
    }

    /// A secret kept for this toolbox's launch (`ray-token`): 0600, beside the record.
    pub fn secret_file(&self, what: &str) -> PathBuf {
        self.dir.join(format!("{}.{what}", self.toolbox))
    }

    /// The image the last launch ran: a different one clears vLLM's compile cache first.
    pub fn last_image(&self) -> PathBuf {
        self.dir.join(format!("{}.last-image", self.toolbox))
    }

    pub fn read(&self) -> Result<Option<ServingRecord>> {
        let path = self.record();
        match std::fs::read_to_string(&path) {
            Ok(text) => ServingRecord::parse(&text, self).map(Some).map_err(|e| {
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

    /// The record and the launch's secrets go; the logs stay.
    pub fn remove(&self) -> Result<()> {
        for path in [self.record(), self.secret_file(RAY_TOKEN)] {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(self.write_error(&path, error)),
            }
        }
        Ok(())
    }

    /// Start a fresh log for the process `name` (the previous one goes to `….NAME.log.1`).
    pub fn rotate_log(&self, name: &str) -> Result<()> {
        let log = self.log(name);
        std::fs::create_dir_all(&self.dir).map_err(|e| self.write_error(&self.dir, e))?;
        if log.exists() {
            std::fs::rename(&log, log.with_extension("log.1")).map_err(|e| self.write_error(&log, e))?;
        }
        Ok(())
    }

    /// Write `path` in this directory atomically; 0600 (a temporary file's mode) until changed.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> ServingRecord {
        let mut record = ServingRecord::new(
            "vllm",
            "org/model",
            "org/model",
            crate::serving::vllm::VLLM,
            Backend::Ray,
            Role::Head,
            2,
            8000,
            Ipv4Addr::new(192, 168, 2, 1),
            Ipv4Addr::new(192, 168, 2, 1),
            &ServingRecord::endpoint_of(Ipv4Addr::new(192, 168, 2, 1), 8000),
        );
        record.tp = Some(2);
        record.started = "2026-11-23T12:00:00Z".into();
        record.extra = vec!["--max-model-len".into(), "4096".into()];
        record.env = recorded_env(
            &[("VLLM_LOGGING_LEVEL", "DEBUG"), ("WANDB_API_KEY", "s3cret")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
        );
        record.processes.push(ServedProcess {
            name: "vllm".into(),
            pid: 42,
            log: "/s/vllm.vllm.log".into(),
            listens: None,
        });
        record
    }

    #[test]
    fn a_record_is_written_read_back_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let files = ServingFiles::in_dir(&dir.path().join("serving"), "vllm");
        assert_eq!(files.read().unwrap(), None);
        files.write(&record()).unwrap();
        assert_eq!(files.read().unwrap(), Some(record()));
        let text = std::fs::read_to_string(files.record()).unwrap();
        assert!(
            text.contains("VLLM_LOGGING_LEVEL") && !text.contains("s3cret"),
            "a secret's value is never written: {text}"
        );
        assert_eq!(record().endpoint, "http://192.168.2.1:8000/v1");
        files.remove().unwrap();
        files.remove().unwrap();
        assert_eq!(files.read().unwrap(), None);
    }

    #[test]
    fn a_record_of_an_older_strix_toolbox_reads_as_its_processes() {
        let dir = tempfile::tempdir().unwrap();
        let files = ServingFiles::in_dir(dir.path(), "vllm");
        let old = r#"{"toolbox": "vllm", "model": "org/model", "served": "org/model", "role": "head", "nodes": 2,
            "tp": 2, "port": 8000, "link_ip": "192.168.2.1", "head_ip": "192.168.2.1",
            "endpoint": "http://192.168.2.1:8000/v1", "image": "sha256:ab", "started": "2026-11-23T12:00:00Z",
            "ray": true, "vllm_pid": 42}"#;
        std::fs::write(files.record(), old).unwrap();
        let read = files.read().unwrap().unwrap();
        assert_eq!((read.engine, read.backend, read.tp), (crate::serving::vllm::VLLM, Backend::Ray, Some(2)));
        assert_eq!(read.identity, None, "unidentified");
        assert_eq!(read.process("vllm").map(|p| p.pid), Some(42));
        assert_eq!(read.process("vllm").unwrap().log, files.log("vllm").display().to_string());
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
        let files = ServingFiles::in_dir(dir.path(), "llama");
        files.rotate_log("rpc-server").unwrap();
        std::fs::write(files.log("rpc-server"), "first\n").unwrap();
        files.rotate_log("rpc-server").unwrap();
        assert!(!files.log("rpc-server").exists());
        assert_eq!(std::fs::read_to_string(dir.path().join("llama.rpc-server.log.1")).unwrap(), "first\n");
        std::fs::write(files.log("llama-server"), "").unwrap();
        std::fs::write(files.log("rpc-server"), "").unwrap();
        std::fs::write(dir.path().join("vllm.vllm.log"), "").unwrap();
        let names: Vec<String> = files.logs().into_iter().map(|(name, _)| name).collect();
        assert_eq!(names, ["llama-server", "rpc-server"], "this toolbox's logs only, the rotated one aside");
    }
}
