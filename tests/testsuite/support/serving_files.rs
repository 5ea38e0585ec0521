//! Where a node keeps what a launch started, as a test reads it from the node's disk: in its
//! serving directory (a cluster node's `TestNode::serving_dir`, under its machine id; a node
//! without one, [`home_serving_dir`]), each service's record and its processes' logs, named by
//! the service's name written file-safe (every byte outside `[A-Za-z0-9._-]` as `%XX`, as the
//! README says); the router's files beside it, in `../router/`.

use std::path::{Path, PathBuf};

/// The serving directory of a node without a machine id whose home is `home`.
pub fn home_serving_dir(home: &Path) -> PathBuf {
    home.join(".local/state/strix-toolbox/serving")
}

/// `name` as its files are named.
pub fn file_safe(name: &str) -> String {
    name.bytes()
        .map(|byte| {
            if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-') {
                char::from(byte).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect()
}

/// Service `name`'s record in the serving directory `serving`.
pub fn record_path(serving: &Path, name: &str) -> PathBuf {
    serving.join(format!("{}.json", file_safe(name)))
}

/// The log of `process` (`llama-server`, `rpc-server`, `vllm`) of service `name`.
pub fn log_path(serving: &Path, name: &str, process: &str) -> PathBuf {
    serving.join(format!("{}.{process}.log", file_safe(name)))
}

/// Service `name`'s record, parsed, if there is one.
pub fn record(serving: &Path, name: &str) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(record_path(serving, name)).ok()?).ok()
}

/// The records in `serving` (their file names).
pub fn records(serving: &Path) -> Vec<String> {
    let entries = std::fs::read_dir(serving).into_iter().flatten().flatten();
    entries
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .collect()
}

/// The router's pid and address (`router.json`) beside the serving directory `serving`, if one
/// was started there.
pub fn router_process(serving: &Path) -> Option<serde_json::Value> {
    let path = serving.parent()?.join("router/router.json");
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Process `pid` runs (and is no zombie).
pub fn runs(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| !rest.starts_with(['Z', 'X'])))
        .unwrap_or(false)
}
