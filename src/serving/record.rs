//! What a launch started on a node, recorded on that node (`$XDG_STATE_HOME/strix-toolbox/serving/`,
//! else `~/.local/state/…`), so `stop`, `logs` and `status` find it later from any machine. The
//! directory is under the home the toolbox mounts at the same path, so vLLM inside the toolbox
//! writes its log beside the record and the node reads both directly.
//!
//! One record per service, named by the service (`serving/NAME.json`, the name file-safe: see
//! [`ServiceName`]), its logs and secrets beside it (`NAME.PROCESS.log`, `NAME.ray-token`), whatever
//! toolbox serves it. A record from before services had names is named by its toolbox and read as
//! the service its `served` field names.

use std::collections::BTreeMap;
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::identity::ModelIdentity;
use crate::paths::Paths;
use crate::secret::names_a_secret;
use crate::serving::engine::{Backend, EngineRef};
use crate::serving::engine_args::EngineArgs;
use crate::serving::service_name::ServiceName;

/// The most records a node's serving directory is read for (a node serves a few services).
const MAX_RECORDS: usize = 256;
/// The largest record read (a record is a few KiB).
const MAX_RECORD_BYTES: u64 = 1 << 20;

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
    /// The service's name: what its clients send as `model`, and what its engine serves it as.
    #[serde(default)]
    pub service: String,
    /// The toolbox that serves it on this node.
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
    /// Those nodes as the cluster names them, the service's head first (empty in a record from
    /// before services had nodes of their own: every node of the cluster).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on: Vec<String>,
    /// vLLM's tensor-parallel size (llama.cpp splits layers instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<usize>,
    /// vLLM's pipeline-parallel size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pp: Option<usize>,
    /// The cluster link's transport at the launch (what RCCL should use between the nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<crate::spec::Transport>,
    /// The port the engine's server listens on at the service's head (its own: the router sends
    /// it the requests that name the service).
    pub port: u16,
    /// This node's cluster-link address, and the service's head's (where its engine listens).
    pub link_ip: Ipv4Addr,
    pub head_ip: Ipv4Addr,
    /// Where clients reach it: the router's `http://HOST:PORT/v1` on the cluster's head (in a
    /// record from before the router, the engine's own).
    pub endpoint: String,
    /// What the router of the endpoint listens on (None: a record from before the router).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_listen: Option<SocketAddr>,
    /// The GPU memory the launch planned for this node, in bytes (the model-aware plan's figure;
    /// None when the launch had none): what another service onto the node is held against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// What the plan put on this node (its weights, its KV cache, the context): what status sets
    /// beside what the engine said after loading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned: Option<crate::serving::fit::Planned>,
    /// The endpoint wants an API key (its value is never recorded).
    #[serde(default)]
    pub api_key: bool,
    /// The toolbox image (registry digest, else id) it was launched from, as a pull names it.
    pub image: String,
    /// That image's id, as every node names it alike (None: a record from before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// When (RFC 3339): what tells one launch's record from the next.
    pub started: String,
    /// The processes this launch started here, detached, each with its log.
    #[serde(default)]
    pub processes: Vec<ServedProcess>,
    /// The operator's arguments for the engine's server (after `--`), as given: a canary's
    /// rollback serves again what served, as it served.
    #[serde(default, skip_serializing_if = "EngineArgs::is_empty")]
    pub extra: EngineArgs,
    /// The operator's `-e KEY=VALUE` settings, those whose names say no secret ([`recorded_env`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The GGUF file of the Hub repository `model` it was launched with (`--file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The Hub commit a Hub GGUF was pulled at (`identity` names its file by content): a relaunch
    /// pulls it at that commit again. None for anything else, and in records from before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gguf_commit: Option<String>,
    /// The operator asked for CUDA graph capture across nodes (`--cuda-graphs`; a launch across
    /// nodes leaves it off otherwise): a relaunch asks it again. False in a record from before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cuda_graphs: bool,
    /// GiB the operator left free on every node for another service (`--keep-free`): a relaunch
    /// leaves them free again. 0 in a record from before.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub keep_free_gib: u64,
    /// A stop has begun here (written before it stops anything): a watch that finds ranks gone
    /// in the middle of its operator's `cluster stop` leaves the service alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopping: bool,
}

fn is_zero(gib: &u64) -> bool {
    *gib == 0
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
        service: &str,
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
            service: service.to_string(),
            toolbox: toolbox.to_string(),
            model: model.to_string(),
            identity: None,
            served: served.to_string(),
            engine,
            backend,
            role,
            nodes,
            on: Vec::new(),
            tp: None,
            pp: None,
            transport: None,
            port,
            link_ip,
            head_ip,
            endpoint: endpoint.to_string(),
            router_listen: None,
            memory_bytes: None,
            planned: None,
            api_key: false,
            image: String::new(),
            image_id: None,
            started: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            processes: Vec::new(),
            extra: EngineArgs::default(),
            env: BTreeMap::new(),
            file: None,
            gguf_commit: None,
            cuda_graphs: false,
            keep_free_gib: 0,
            stopping: false,
        }
    }

    pub fn endpoint_of(address: Ipv4Addr, port: u16) -> String {
        format!("http://{address}:{port}/v1")
    }

    /// The process named `name`, if this launch started one here.
    pub fn process(&self, name: &str) -> Option<&ServedProcess> {
        self.processes.iter().find(|p| p.name == name)
    }

    /// Where its engine answers: the service's head, at the engine's own port.
    pub fn upstream(&self) -> SocketAddr {
        SocketAddr::from((self.head_ip, self.port))
    }

    /// The ports this launch holds on this node: the engine's (on its head) and every listener's.
    pub fn ports(&self) -> Vec<u16> {
        let engine = (self.role != Role::Worker).then_some(self.port);
        engine.into_iter().chain(self.processes.iter().filter_map(|p| p.listens.map(|a| a.port()))).collect()
    }

    /// A record as it is stored, or as an older strix-toolbox stored it (`vllm_pid` and `ray`
    /// before processes were recorded; no `service` before services had names), in today's terms.
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
        if record.service.is_empty() {
            record.service = record.served.clone();
        }
        Ok(record)
    }
}

/// The file of Ray's token for a launch (`ServingFiles::secret_file`).
pub const RAY_TOKEN: &str = "ray-token";

/// Where one service's serving state lives on this node: its record, logs and secrets, all named
/// `STEM.…` (the service's file-safe name; a record from before services, its toolbox's name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingFiles {
    dir: PathBuf,
    stem: String,
}

impl ServingFiles {
    /// For `service`, under this node's own state directory (apart from other nodes' when they
    /// share the home). A launch from before state was kept per node left its record in the
    /// shared one: it is read there until its stop removes it.
    pub fn of(paths: &Paths, service: &ServiceName) -> Result<ServingFiles> {
        Ok(ServingDir::of(paths)?.files(service))
    }

    /// The files named `stem.…` in `dir`.
    pub fn in_dir(dir: &Path, stem: &str) -> ServingFiles {
        ServingFiles { dir: dir.to_path_buf(), stem: stem.to_string() }
    }

    /// What its files' names begin with.
    pub fn stem(&self) -> &str {
        &self.stem
    }

    pub fn record(&self) -> PathBuf {
        self.dir.join(format!("{}.json", self.stem))
    }

    /// The output of the process named `name` (it survives the launch command and the stop).
    pub fn log(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{}.{name}.log", self.stem))
    }

    /// Every log of this service's launches here, by process name (what `logs` shows after a
    /// stop). A process's name has no dot, so `A.B.vllm.log` is service `A.B`'s, never `A`'s.
    pub fn logs(&self) -> Vec<(String, PathBuf)> {
        let mut logs: Vec<(String, PathBuf)> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .take(MAX_DIR_ENTRIES)
            .filter_map(|entry| {
                let file = entry.file_name().into_string().ok()?;
                let (stem, name) = file.strip_suffix(".log")?.rsplit_once('.')?;
                (stem == self.stem).then(|| (name.to_string(), entry.path()))
            })
            .collect();
        logs.sort();
        logs
    }

    /// A secret kept for this service's launch (`ray-token`): 0600, beside the record.
    pub fn secret_file(&self, what: &str) -> PathBuf {
        self.dir.join(format!("{}.{what}", self.stem))
    }

    pub fn read(&self) -> Result<Option<ServingRecord>> {
        let path = self.record();
        match read_bounded(&path) {
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
        crate::paths::write_atomically(&self.dir, path, bytes)
    }

    fn write_error(&self, path: &Path, error: std::io::Error) -> Error {
        crate::paths::write_error(path, error)
    }
}

/// The most entries of the serving directory looked at (records, logs, secrets of a few services).
pub(crate) const MAX_DIR_ENTRIES: usize = 4096;

/// What was launched: `serving/` under this node's own state directory, and under the state
/// directory the nodes of one home share (where a launch from before state was kept per node
/// left its record) when that is another.
fn serving_dirs(paths: &Paths) -> Result<(PathBuf, Option<PathBuf>)> {
    let keeps = "what was launched";
    let own = paths.node_state_dir(keeps)?.join("serving");
    let before = paths.state_dir(keeps)?.join("serving");
    Ok((own.clone(), (before != own).then_some(before)))
}

/// A record's text, at most [`MAX_RECORD_BYTES`] of it (a longer file is no record).
fn read_bounded(path: &Path) -> std::io::Result<String> {
    let mut text = String::new();
    std::fs::File::open(path)?.take(MAX_RECORD_BYTES).read_to_string(&mut text)?;
    Ok(text)
}

/// The names in `dir` that end in `suffix`, without it, sorted (none when `dir` is missing).
fn names_in(dir: &Path, suffix: &str) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(Error::read(dir.to_path_buf(), error)),
    };
    let mut names: Vec<String> = entries
        .flatten()
        .take(MAX_DIR_ENTRIES)
        .filter_map(|entry| entry.file_name().into_string().ok()?.strip_suffix(suffix).map(str::to_string))
        .collect();
    names.sort();
    Ok(names)
}

/// One service's record on this node, with its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub files: ServingFiles,
    pub record: ServingRecord,
}

/// Every service recorded on this node: its serving directory (and the one from before state
/// was kept per node, where a record may still be).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingDir {
    own: PathBuf,
    before: Option<PathBuf>,
}

impl ServingDir {
    pub fn of(paths: &Paths) -> Result<ServingDir> {
        let (own, before) = serving_dirs(paths)?;
        Ok(ServingDir { own, before })
    }

    #[cfg(test)]
    pub fn in_dir(dir: &Path) -> ServingDir {
        ServingDir { own: dir.to_path_buf(), before: None }
    }

    /// Where `service`'s files are (its record need not exist: its logs outlive it): this node's
    /// own directory, unless only the one from before holds its record.
    pub fn files(&self, service: &ServiceName) -> ServingFiles {
        let own = ServingFiles::in_dir(&self.own, &service.file_safe());
        let before = self.before.as_ref().map(|dir| ServingFiles::in_dir(dir, &service.file_safe()));
        match before {
            Some(before) if !own.record().exists() && before.record().exists() => before,
            _ => own,
        }
    }

    /// Both directories, this node's own first.
    fn dirs(&self) -> impl Iterator<Item = &PathBuf> {
        std::iter::once(&self.own).chain(self.before.iter())
    }

    /// Every record here (`*.json`), by name; none when nothing was ever launched. A stem this
    /// node's own directory has is not read again from the one from before.
    pub fn list(&self) -> Result<Vec<Recorded>> {
        let mut found: Vec<Recorded> = Vec::new();
        for dir in self.dirs() {
            for stem in names_in(dir, ".json")?.into_iter().take(MAX_RECORDS) {
                if found.iter().any(|seen| seen.files.stem() == stem) {
                    continue;
                }
                let files = ServingFiles::in_dir(dir, &stem);
                if let Some(record) = files.read()? {
                    found.push(Recorded { files, record });
                }
            }
        }
        found.sort_by(|a, b| a.record.service.cmp(&b.record.service));
        Ok(found)
    }

    /// The stems of every log here (`STEM.PROCESS.log`), each once, sorted.
    pub fn logged_stems(&self) -> Vec<String> {
        let mut stems: Vec<String> = self
            .dirs()
            .flat_map(|dir| names_in(dir, ".log").unwrap_or_default())
            .filter_map(|name| Some(name.rsplit_once('.')?.0.to_string()))
            .collect();
        stems.sort();
        stems.dedup();
        stems
    }

    /// `service`'s record: under its own name, else a record from before services that names it.
    pub fn find(&self, service: &ServiceName) -> Result<Option<Recorded>> {
        let files = self.files(service);
        if let Some(record) = files.read()? {
            return Ok(Some(Recorded { files, record }));
        }
        Ok(self.list()?.into_iter().find(|found| found.record.service == service.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> ServingRecord {
        let mut record = ServingRecord::new(
            "org/model",
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
        record.extra = EngineArgs::new(vec!["--max-model-len".into(), "4096".into()]);
        record.cuda_graphs = true;
        record.gguf_commit = Some("c".repeat(40));
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
        assert_eq!(read.service, "org/model", "the service its endpoint served");
        assert!(!read.cuda_graphs, "launched before --cuda-graphs was kept: as the default launch");
        assert_eq!(read.gguf_commit, None, "launched before a Hub GGUF's commit was kept");
    }

    #[test]
    fn every_service_is_listed_and_found_by_name_old_records_by_what_they_served() {
        let dir = tempfile::tempdir().unwrap();
        let serving = ServingDir::in_dir(&dir.path().join("serving"));
        assert!(serving.list().unwrap().is_empty(), "nothing launched: no directory");
        let name = ServiceName::parse("org/model").unwrap();
        let files = serving.files(&name);
        files.write(&record()).unwrap();
        assert_eq!(files.record(), dir.path().join("serving/org%2Fmodel.json"));
        let mut coder = record();
        coder.service = "coder".into();
        coder.processes[0].listens = Some("192.168.2.1:29502".parse().unwrap());
        serving.files(&ServiceName::parse("coder").unwrap()).write(&coder).unwrap();
        // A record from before services: named by its toolbox.
        let old = r#"{"toolbox": "llama", "model": "/m/t.gguf", "served": "tiny", "role": "single", "nodes": 1,
            "port": 8000, "link_ip": "127.0.0.1", "head_ip": "127.0.0.1", "endpoint": "http://127.0.0.1:8000/v1",
            "image": "sha256:ab", "started": "2026-11-23T12:00:00Z"}"#;
        std::fs::write(dir.path().join("serving/llama.json"), old).unwrap();
        std::fs::write(dir.path().join("serving/llama.llama-server.log"), "loaded\n").unwrap();
        let listed: Vec<String> = serving.list().unwrap().into_iter().map(|found| found.record.service).collect();
        assert_eq!(listed, ["coder", "org/model", "tiny"]);
        let tiny = serving.find(&ServiceName::parse("tiny").unwrap()).unwrap().unwrap();
        assert_eq!(tiny.files.logs().len(), 1, "its logs are its toolbox's: {:?}", tiny.files.logs());
        assert_eq!(serving.find(&ServiceName::parse("none").unwrap()).unwrap(), None);
        let found = serving.find(&ServiceName::parse("coder").unwrap()).unwrap().unwrap();
        assert_eq!(
            (found.record.ports(), found.record.upstream().to_string()),
            (vec![8000, 29502], "192.168.2.1:8000".into())
        );
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
        std::fs::write(dir.path().join("llama.b.rpc-server.log"), "").unwrap();
        let names: Vec<String> = files.logs().into_iter().map(|(name, _)| name).collect();
        assert_eq!(
            names,
            ["llama-server", "rpc-server"],
            "this service's logs only (not service llama.b's), the rotated one aside"
        );
    }
}
