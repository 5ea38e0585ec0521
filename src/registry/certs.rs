//! Per-registry CA directories, `certs.d/HOST:PORT/`: where podman (containers/image) and docker
//! look for the CAs a registry's certificate is checked against, read on every pull (no restart).
//! The copy trusts what they hold for the upstream registry; the spread installs the cluster
//! registry's CA there on every node.

use std::path::{Path, PathBuf};

use crate::container_engine::endpoint::process_env;

/// Where root's engines look: podman's, then docker's.
pub const SYSTEM_CERTS_D: [&str; 2] = ["/etc/containers/certs.d", "/etc/docker/certs.d"];

/// Rootless podman's (and any podman's, first): `$HOME/.config/containers/certs.d`.
pub fn user_certs_d(home: &Path) -> PathBuf {
    home.join(".config/containers/certs.d")
}

/// The directory containers/image takes for `registry`: the first of the user's, podman's and
/// docker's that exists (it reads only that one).
pub fn ca_dir_for(registry: &str) -> Option<PathBuf> {
    let user = process_env("HOME").map(|home| user_certs_d(Path::new(&home)));
    user.into_iter()
        .chain(SYSTEM_CERTS_D.iter().map(PathBuf::from))
        .map(|dir| dir.join(registry))
        .find(|dir| dir.is_dir())
}

/// The CA certificates (PEM) that directory holds: every `*.crt`, in name order.
pub fn cas_for(registry: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let Some(dir) = ca_dir_for(registry) else { return Vec::new() };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|path| path.extension().is_some_and(|ext| ext == "crt"));
    files.sort();
    files.into_iter().filter_map(|path| std::fs::read(&path).ok().map(|pem| (path, pem))).collect()
}
