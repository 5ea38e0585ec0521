//! The cluster CA, installed where a node's engines look for a registry's CAs: root's podman and
//! docker (`/etc/containers/certs.d/HOST:PORT/ca.crt`, `/etc/docker/certs.d/HOST:PORT/ca.crt`), a
//! rootless podman's `~/.config/containers/certs.d/HOST:PORT/ca.crt`. Engines read these on every
//! pull: no `insecure-registries`, no daemon restart. Only `ca.crt` goes there (a key without its
//! certificate is an error to containers/image).

use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::registry::certs::{user_certs_d, SYSTEM_CERTS_D};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadTrust {
    /// The head's registry, `IP:PORT`.
    pub registry: String,
    /// The cluster CA's certificate.
    pub ca_pem: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadTrusted {
    /// Every `ca.crt` that holds the cluster CA now.
    pub files: Vec<PathBuf>,
    /// Some were written (false: all held it already).
    pub changed: bool,
}

pub async fn spread_trust(request: &SpreadTrust) -> Result<SpreadTrusted> {
    // An address, never a path: it names a directory.
    let registry: SocketAddrV4 = request
        .registry
        .parse()
        .map_err(|_| Error::Usage(format!("{:?} is not the IP:PORT of a cluster registry", request.registry)))?;
    if !request.ca_pem.starts_with("-----BEGIN CERTIFICATE-----") {
        return Err(Error::Usage("the cluster registry's CA is not a PEM certificate".into()));
    }
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let mut trusted = SpreadTrusted { files: Vec::new(), changed: false };
    for certs_d in certs_d_dirs(is_root(), home.as_deref()) {
        let file = certs_d.join(registry.to_string()).join("ca.crt");
        trusted.changed |= install(&file, &request.ca_pem)?;
        trusted.files.push(file);
    }
    Ok(trusted)
}

/// Where this node's engines look. Root: podman's and docker's system directories, and the
/// user's podman directory when there is one (containers/image reads only the first that exists).
/// Anyone else: their rootless podman's.
fn certs_d_dirs(root: bool, home: Option<&Path>) -> Vec<PathBuf> {
    let user = home.map(user_certs_d);
    if !root {
        return user.into_iter().collect();
    }
    let mut dirs: Vec<PathBuf> = SYSTEM_CERTS_D.iter().map(PathBuf::from).collect();
    dirs.extend(user.filter(|dir| dir.is_dir()));
    dirs
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Write `pem` to `file` unless it holds it already; true when written.
fn install(file: &Path, pem: &str) -> Result<bool> {
    if std::fs::read_to_string(file).is_ok_and(|held| held == pem) {
        return Ok(false);
    }
    let failed = |e: std::io::Error| {
        Error::host(
            file.display().to_string(),
            format!("cannot install the cluster registry's CA as {}: {e}", file.display()),
            "run the cluster's commands as root (or use rootless podman) on this node",
        )
    };
    let dir = file.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir).map_err(failed)?;
    // A name of its own: another refresh (or, on a test bed, another node) may write it too.
    let temp = file.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&temp, pem).map_err(failed)?;
    std::fs::rename(&temp, file).map_err(failed)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_gets_both_engines_and_a_user_their_podman() {
        let home = tempfile::tempdir().unwrap();
        assert_eq!(
            certs_d_dirs(true, Some(home.path())),
            [PathBuf::from("/etc/containers/certs.d"), PathBuf::from("/etc/docker/certs.d")]
        );
        std::fs::create_dir_all(home.path().join(".config/containers/certs.d")).unwrap();
        assert_eq!(certs_d_dirs(true, Some(home.path())).len(), 3, "a user dir podman would read first");
        assert_eq!(certs_d_dirs(false, Some(home.path())), [home.path().join(".config/containers/certs.d")]);
        assert!(certs_d_dirs(false, None).is_empty());
    }

    #[test]
    fn installs_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("certs.d/192.168.100.1:5443/ca.crt");
        assert!(install(&file, "-----BEGIN CERTIFICATE-----\nA\n").unwrap());
        assert!(!install(&file, "-----BEGIN CERTIFICATE-----\nA\n").unwrap());
        assert!(install(&file, "-----BEGIN CERTIFICATE-----\nB\n").unwrap());
        assert_eq!(std::fs::read_dir(file.parent().unwrap()).unwrap().count(), 1, "only ca.crt");
    }

    #[tokio::test]
    async fn refuses_what_is_not_an_address_or_a_certificate() {
        let bad = SpreadTrust { registry: "../../etc".into(), ca_pem: "-----BEGIN CERTIFICATE-----".into() };
        assert!(spread_trust(&bad).await.unwrap_err().to_string().contains("not the IP:PORT"));
        let bad = SpreadTrust { registry: "192.168.100.1:5443".into(), ca_pem: "key".into() };
        assert!(spread_trust(&bad).await.unwrap_err().to_string().contains("not a PEM"));
    }
}
