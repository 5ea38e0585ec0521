//! What can be told about the container engine without talking to it: whether we run rootless
//! and the configured OCI runtime. `detect` uses this to stay millisecond-fast; `refresh` asks
//! the engine itself.

use std::path::{Path, PathBuf};

use super::{EngineInfo, EngineKind};

/// What the engine would say about itself, guessed without asking it: rootless when we are not
/// root; podman's runtime from containers.conf (else crun when installed, else runc); docker's runc.
pub fn guessed_info(kind: EngineKind) -> EngineInfo {
    let runtime = match kind {
        EngineKind::Docker => "runc".to_string(),
        EngineKind::Podman => podman_runtime(),
    };
    EngineInfo { kind, rootless: running_rootless(), runtime, version: String::new(), pid: None }
}

/// Whether this process runs rootless (the engine it talks to usually does too).
pub fn running_rootless() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() != 0 }
}

/// The OCI runtime podman will use: containers.conf's `runtime`, else crun when installed
/// (podman's own preference), else runc.
pub fn podman_runtime() -> String {
    configured_runtime().unwrap_or_else(|| if which::which("crun").is_ok() { "crun" } else { "runc" }.to_string())
}

/// `runtime = "..."` from the containers.conf podman would read, most specific first.
fn configured_runtime() -> Option<String> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(path) = std::env::var_os("CONTAINERS_CONF") {
        candidates.push(path.into());
    }
    let config_home = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".config")));
    if let Some(dir) = config_home {
        candidates.push(dir.join("containers/containers.conf"));
    }
    candidates.push("/etc/containers/containers.conf".into());
    candidates.push("/usr/share/containers/containers.conf".into());
    candidates.iter().find_map(|path| runtime_in(&std::fs::read_to_string(path).ok()?))
}

/// The `runtime` key of the `[engine]` table, read line by line (no TOML parser needed).
fn runtime_in(conf: &str) -> Option<String> {
    let mut in_engine = false;
    for line in conf.lines().map(str::trim) {
        if line.starts_with('[') {
            in_engine = line == "[engine]";
        } else if in_engine {
            if let Some(value) = line.strip_prefix("runtime").map(str::trim_start) {
                if let Some(value) = value.strip_prefix('=') {
                    return Some(value.trim().trim_matches('"').to_string());
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_runtime_from_engine_table() {
        let conf = "[containers]\nruntime = \"nope\"\n[engine]\n# comment\nruntime = \"runc\"\n";
        assert_eq!(runtime_in(conf).as_deref(), Some("runc"));
        assert_eq!(runtime_in("[engine]\nruntime_path = []\n"), None);
        assert_eq!(runtime_in("[engine]\n#runtime = \"crun\"\n"), None);
    }
}
