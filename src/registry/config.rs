//! Which registries the node's containers configuration marks insecure (plain HTTP, or TLS without
//! verification), as podman reads registries.conf(5): `CONTAINERS_REGISTRIES_CONF` alone when it
//! is set, else the user's file or the system's, with the system's drop-ins. Both the v2 form
//! (`[[registry]] location = … insecure = true`) and v1's `[registries.insecure] registries = […]`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::container_engine::endpoint::process_env;

const SYSTEM_FILE: &str = "/etc/containers/registries.conf";
const SYSTEM_DROP_INS: &str = "/etc/containers/registries.conf.d";

/// True when registries.conf lets `registry` (`host[:port]`) be reached without verified TLS.
pub fn is_insecure(registry: &str) -> bool {
    conf_files(&process_env).iter().filter_map(|path| RegistriesConf::read(path)).any(|conf| conf.insecure(registry))
}

/// The files podman would read, in its order.
fn conf_files(env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    if let Some(file) = env("CONTAINERS_REGISTRIES_CONF").filter(|f| !f.is_empty()) {
        return vec![PathBuf::from(file)];
    }
    let user = env("HOME").map(|home| Path::new(&home).join(".config/containers/registries.conf"));
    let mut files = vec![user.filter(|file| file.exists()).unwrap_or_else(|| PathBuf::from(SYSTEM_FILE))];
    let mut drop_ins: Vec<PathBuf> = std::fs::read_dir(SYSTEM_DROP_INS)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    drop_ins.retain(|path| path.extension().is_some_and(|ext| ext == "conf"));
    drop_ins.sort();
    files.extend(drop_ins);
    files
}

#[derive(Debug, Default, Deserialize)]
struct RegistriesConf {
    #[serde(default)]
    registry: Vec<RegistryTable>,
    #[serde(default)]
    registries: Option<V1Tables>,
}

#[derive(Debug, Default, Deserialize)]
struct RegistryTable {
    #[serde(default)]
    location: String,
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    insecure: bool,
}

#[derive(Debug, Default, Deserialize)]
struct V1Tables {
    #[serde(default)]
    insecure: Option<V1List>,
}

#[derive(Debug, Default, Deserialize)]
struct V1List {
    #[serde(default)]
    registries: Vec<String>,
}

impl RegistriesConf {
    /// None when the file is missing or not TOML podman would take (podman refuses it too).
    fn read(path: &Path) -> Option<RegistriesConf> {
        toml::from_str(&std::fs::read_to_string(path).ok()?).ok()
    }

    fn insecure(&self, registry: &str) -> bool {
        let v2 = self.registry.iter().filter(|table| table.insecure).any(|table| {
            let name = if table.prefix.is_empty() { &table.location } else { &table.prefix };
            names(name, registry)
        });
        let v1 = self.registries.as_ref().and_then(|r| r.insecure.as_ref()).map(|list| &list.registries);
        v2 || v1.is_some_and(|list| list.iter().any(|name| names(name, registry)))
    }
}

/// True when a location or prefix (`host[:port][/path]`, or `*.domain`) covers `registry`.
fn names(pattern: &str, registry: &str) -> bool {
    let host = pattern.split('/').next().unwrap_or(pattern);
    match host.strip_prefix("*.") {
        Some(domain) => registry.split(':').next().is_some_and(|name| name.ends_with(&format!(".{domain}"))),
        None => host == registry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(text: &str) -> RegistriesConf {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn v2_tables_by_location_or_prefix() {
        let conf = conf(
            "unqualified-search-registries = [\"docker.io\"]\n[[registry]]\nlocation = \"127.0.0.1:5000\"\ninsecure = \
             true\n[[registry]]\nprefix = \"*.lan\"\nlocation = \"mirror.lan\"\ninsecure = true\n[[registry]]\n\
             location = \"quay.io\"\n",
        );
        assert!(conf.insecure("127.0.0.1:5000"));
        assert!(conf.insecure("registry.lan:5000") && conf.insecure("registry.lan"));
        assert!(!conf.insecure("127.0.0.1:5001") && !conf.insecure("quay.io") && !conf.insecure("docker.io"));
    }

    #[test]
    fn v1_lists_and_the_file_order() {
        assert!(conf("[registries.insecure]\nregistries = [\"lab:5000\"]\n").insecure("lab:5000"));
        let env = |name: &str| (name == "CONTAINERS_REGISTRIES_CONF").then(|| "/tmp/r.conf".to_string());
        assert_eq!(conf_files(&env), [PathBuf::from("/tmp/r.conf")]);
        let none = |_: &str| None;
        assert_eq!(conf_files(&none)[0], PathBuf::from(SYSTEM_FILE));
    }
}
