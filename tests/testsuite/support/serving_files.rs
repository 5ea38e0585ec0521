//! Where a node keeps what a launch started, as a test reads it from the node's home: the
//! service's record and its processes' logs under `~/.local/state/strix-toolbox/serving/`, named
//! by the service's name written file-safe (every byte outside `[A-Za-z0-9._-]` as `%XX`, as
//! the README says); the router's files under `…/router/`.

use std::path::{Path, PathBuf};

/// The serving directory under `home`.
pub fn serving_dir(home: &Path) -> PathBuf {
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

/// Service `name`'s record on the node whose home is `home`.
pub fn record_path(home: &Path, name: &str) -> PathBuf {
    serving_dir(home).join(format!("{}.json", file_safe(name)))
}

/// The log of `process` (`llama-server`, `rpc-server`, `vllm`) of service `name`.
pub fn log_path(home: &Path, name: &str, process: &str) -> PathBuf {
    serving_dir(home).join(format!("{}.{process}.log", file_safe(name)))
}

/// Service `name`'s record, parsed, if the node has one.
pub fn record(home: &Path, name: &str) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(record_path(home, name)).ok()?).ok()
}

/// The running router's pid and address (`router.json`), if one was started there.
pub fn router_process(home: &Path) -> Option<serde_json::Value> {
    let path = home.join(".local/state/strix-toolbox/router/router.json");
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Process `pid` runs (and is no zombie).
pub fn runs(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| !rest.starts_with(['Z', 'X'])))
        .unwrap_or(false)
}
