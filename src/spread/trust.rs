//! The cluster's trust on a node: the CA and the node's client certificate, installed where its
//! engines look for a registry's (`certs.d/HOST:PORT/`): root's podman and docker
//! (`/etc/containers/certs.d`, `/etc/docker/certs.d`), a rootless podman's
//! `~/.config/containers/certs.d`. Each directory holds `ca.crt` (the CA the registry's certificate
//! is checked against) and the pair `client.cert` + `client.key` (presented to the registry: it
//! refuses a client without one). Podman (containers/image) and docker both read exactly these
//! names on every pull: no `insecure-registries`, no daemon restart.
//!
//! The node's key is made on the node and never leaves it (0600): [`spread_trust`] installs the CA,
//! keeps or makes the key, and returns a signing request when the node has no valid certificate
//! for it; the head signs it ([`spread_sign`], where the CA's key is); a second [`spread_trust`]
//! carrying the certificate installs it.

use std::fs::OpenOptions;
use std::io::Write;
use std::net::SocketAddrV4;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::link::ca;
use crate::link::home::RegistryHome;
use crate::link::tls::TlsIdentity;
use crate::paths::{open_lock_file, Paths};
use crate::registry::certs::{user_certs_d, SYSTEM_CERTS_D};
use crate::secret::Secret;
use crate::settings::Settings;

const CA: &str = "ca.crt";
const CLIENT_CERT: &str = "client.cert";
const CLIENT_KEY: &str = "client.key";
const LOCK: &str = "strix-toolbox.lock";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadTrust {
    /// The head's registry, `IP:PORT`.
    pub registry: String,
    /// The cluster CA's certificate.
    pub ca_pem: String,
    /// The node's client certificate, signed by the head from the node's request.
    #[serde(default)]
    pub certificate: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadTrusted {
    /// Every `certs.d/HOST:PORT` directory that holds the cluster's trust now.
    pub files: Vec<PathBuf>,
    /// Something was written (false: all held it already).
    pub changed: bool,
    /// The node has no valid client certificate: its request (PEM) for the head to sign.
    #[serde(default)]
    pub signing_request: Option<String>,
}

/// What the head signs: each node's request, by the node's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadSign {
    pub requests: Vec<SigningRequest>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningRequest {
    /// The node's name in the cluster (the certificate's name).
    pub node: String,
    pub csr_pem: String,
}

/// The certificates, in the requests' order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadSigned {
    pub certificates: Vec<String>,
}

pub async fn spread_trust(settings: &Settings, request: &SpreadTrust) -> Result<SpreadTrusted> {
    let registry = registry_address(&request.registry)?;
    if !request.ca_pem.starts_with("-----BEGIN CERTIFICATE-----") {
        return Err(Error::Usage("the cluster registry's CA is not a PEM certificate".into()));
    }
    trust_in(&registry_dirs(settings.paths.home(), registry), request)
}

/// [`spread_trust`] in `dirs` (each a `certs.d/HOST:PORT`), one at a time: two refreshes at once
/// (or, on a test bed, two nodes sharing one /etc) must not each make a key for the other's
/// certificate.
fn trust_in(dirs: &[PathBuf], request: &SpreadTrust) -> Result<SpreadTrusted> {
    let mut trusted = SpreadTrusted { files: dirs.to_vec(), changed: false, signing_request: None };
    let _held = match dirs.first() {
        Some(dir) => Some(lock(dir)?),
        None => None,
    };
    for dir in dirs {
        trusted.changed |= install(&dir.join(CA), &request.ca_pem, 0o644)?;
    }
    // The key this node has, else a new one; the same in every directory.
    let key = match dirs.iter().find_map(|dir| std::fs::read_to_string(dir.join(CLIENT_KEY)).ok()) {
        Some(key) => Secret::new(key),
        None => ca::new_key()?,
    };
    for dir in dirs {
        trusted.changed |= install(&dir.join(CLIENT_KEY), key.expose(), 0o600)?;
    }
    let valid =
        |cert_pem: &String| TlsIdentity { cert_pem: cert_pem.clone(), key: key.clone() }.is_client_of(&request.ca_pem);
    let held = dirs.iter().find_map(|dir| std::fs::read_to_string(dir.join(CLIENT_CERT)).ok());
    let certificate = match (&request.certificate, held) {
        (Some(given), _) if valid(given) => given.clone(),
        (Some(_), _) => {
            return Err(Error::Internal(
                "the head's certificate for this node is not one the cluster CA signed for its key".into(),
            ))
        }
        (None, Some(held)) if valid(&held) => held,
        (None, _) => {
            trusted.signing_request = Some(ca::signing_request(&key)?);
            return Ok(trusted);
        }
    };
    for dir in dirs {
        trusted.changed |= install(&dir.join(CLIENT_CERT), &certificate, 0o644)?;
    }
    Ok(trusted)
}

/// The head signs each node's request with the cluster CA.
pub async fn spread_sign(settings: &Settings, request: &SpreadSign) -> Result<SpreadSigned> {
    let home = RegistryHome::locate(&settings.paths)?;
    let ca = ca::load_or_make(&home)?;
    let certificates =
        request.requests.iter().map(|each| ca::sign_client(&ca, &each.node, &each.csr_pem)).collect::<Result<_>>()?;
    Ok(SpreadSigned { certificates })
}

/// This node's identity for the cluster registry at `registry`, as its engines would present it
/// (None when it has none).
pub fn client_identity(paths: &Paths, registry: &str) -> Option<TlsIdentity> {
    identity_in(&registry_dirs(paths.home(), registry_address(registry).ok()?))
}

fn identity_in(dirs: &[PathBuf]) -> Option<TlsIdentity> {
    dirs.iter().find_map(|dir| {
        let cert_pem = std::fs::read_to_string(dir.join(CLIENT_CERT)).ok()?;
        let key = std::fs::read_to_string(dir.join(CLIENT_KEY)).ok()?;
        Some(TlsIdentity { cert_pem, key: Secret::new(key) })
    })
}

/// `certs.d/HOST:PORT` in every directory this node's engines look in.
fn registry_dirs(home: Option<&Path>, registry: SocketAddrV4) -> Vec<PathBuf> {
    certs_d_dirs(is_root(), home).into_iter().map(|dir| dir.join(registry.to_string())).collect()
}

/// An address, never a path: it names a directory.
fn registry_address(registry: &str) -> Result<SocketAddrV4> {
    registry.parse().map_err(|_| Error::Usage(format!("{registry:?} is not the IP:PORT of a cluster registry")))
}

/// Hold `dir`'s lock file (engines read only `*.crt`, `*.cert` and `*.key` there).
fn lock(dir: &Path) -> Result<std::fs::File> {
    let path = dir.join(LOCK);
    let failed = |e: std::io::Error| {
        Error::host(
            path.display().to_string(),
            format!("cannot lock {}: {e}", path.display()),
            "run the cluster's commands as root (or use rootless podman) on this node",
        )
    };
    std::fs::create_dir_all(dir).map_err(failed)?;
    let file = open_lock_file(&path).map_err(failed)?;
    file.lock().map_err(failed)?;
    Ok(file)
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

/// Write `contents` to `file` with `mode` unless it holds them with that mode already; true when
/// written. Written whole under a name of its own (another refresh, or on a test bed another
/// node, may write it too), created with its mode: a key is never readable by others, not even
/// for a moment.
fn install(file: &Path, contents: &str, mode: u32) -> Result<bool> {
    let held = std::fs::read_to_string(file).is_ok_and(|held| held == contents);
    let mode_held = std::fs::symlink_metadata(file).is_ok_and(|m| m.permissions().mode() & 0o777 == mode);
    if held && mode_held {
        return Ok(false);
    }
    let failed = |e: std::io::Error| {
        Error::host(
            file.display().to_string(),
            format!("cannot install the cluster registry's trust as {}: {e}", file.display()),
            "run the cluster's commands as root (or use rootless podman) on this node",
        )
    };
    let dir = file.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir).map_err(failed)?;
    let temp = file.with_extension(format!("tmp.{}", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let mut out = OpenOptions::new().write(true).create_new(true).mode(mode).open(&temp).map_err(failed)?;
    out.write_all(contents.as_bytes()).map_err(failed)?;
    // The umask may have taken bits off; never added any.
    out.set_permissions(std::fs::Permissions::from_mode(mode)).map_err(failed)?;
    drop(out);
    std::fs::rename(&temp, file).map_err(failed)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

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
    fn installs_once_with_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("certs.d/192.168.100.1:5443/client.key");
        assert!(install(&file, "-----BEGIN PRIVATE KEY-----\nA\n", 0o600).unwrap());
        assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
        assert!(!install(&file, "-----BEGIN PRIVATE KEY-----\nA\n", 0o600).unwrap());
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(install(&file, "-----BEGIN PRIVATE KEY-----\nA\n", 0o600).unwrap(), "a key others read is fixed");
        assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
        assert!(install(&file, "-----BEGIN PRIVATE KEY-----\nB\n", 0o600).unwrap());
        assert_eq!(std::fs::read_dir(file.parent().unwrap()).unwrap().count(), 1, "only the key");
    }

    /// A node with two engines' directories, its head's CA in `head`.
    #[test]
    fn a_node_asks_once_then_keeps_its_key_and_certificate() {
        let (node, head) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let dirs = [node.path().join("containers/192.168.100.1:5443"), node.path().join("docker/192.168.100.1:5443")];
        let home = RegistryHome { dir: head.path().join("registry") };
        home.create().unwrap();
        let ca = ca::load_or_make(&home).unwrap();
        let trust =
            SpreadTrust { registry: "192.168.100.1:5443".into(), ca_pem: ca.cert_pem.clone(), certificate: None };
        let first = trust_in(&dirs, &trust).unwrap();
        let csr = first.signing_request.expect("a request: it has no certificate");
        assert!(identity_in(&dirs).is_none(), "no certificate yet");
        let cert = ca::sign_client(&ca, "node2", &csr).unwrap();
        let certified = SpreadTrust { certificate: Some(cert.clone()), ..trust.clone() };
        assert!(trust_in(&dirs, &certified).unwrap().signing_request.is_none());
        let again = trust_in(&dirs, &trust).unwrap();
        assert_eq!((again.changed, again.signing_request), (false, None), "nothing to do");
        let identity = identity_in(&dirs).unwrap();
        assert!(identity.is_client_of(&ca.cert_pem));
        for dir in &dirs {
            let names: std::collections::BTreeSet<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            let layout = [CA, CLIENT_CERT, CLIENT_KEY, LOCK].map(String::from).into();
            assert!(names.is_subset(&layout), "the names engines read, and the lock: {names:?}");
            assert_eq!(std::fs::metadata(dir.join(CLIENT_KEY)).unwrap().mode() & 0o777, 0o600);
            assert_eq!(std::fs::read_to_string(dir.join(CLIENT_CERT)).unwrap(), cert);
        }

        // Another head's certificate, or one for another key, is refused; a new CA asks again.
        let other_head = tempfile::tempdir().unwrap();
        let other_home = RegistryHome { dir: other_head.path().join("registry") };
        other_home.create().unwrap();
        let other_ca = ca::load_or_make(&other_home).unwrap();
        let foreign_csr = ca::signing_request(&ca::new_key().unwrap()).unwrap();
        let foreign =
            SpreadTrust { certificate: Some(ca::sign_client(&ca, "node2", &foreign_csr).unwrap()), ..trust.clone() };
        assert!(trust_in(&dirs, &foreign).is_err(), "a certificate for another key");
        let moved = SpreadTrust { ca_pem: other_ca.cert_pem.clone(), ..trust };
        assert!(trust_in(&dirs, &moved).unwrap().signing_request.is_some(), "a new CA: a new certificate");
    }

    #[tokio::test]
    async fn refuses_what_is_not_an_address_a_ca_or_its_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings::for_tests(dir.path());
        let bad = SpreadTrust {
            registry: "../../etc".into(),
            ca_pem: "-----BEGIN CERTIFICATE-----".into(),
            certificate: None,
        };
        assert!(spread_trust(&settings, &bad).await.unwrap_err().to_string().contains("not the IP:PORT"));
        let bad = SpreadTrust { registry: "192.168.100.1:5443".into(), ca_pem: "key".into(), certificate: None };
        assert!(spread_trust(&settings, &bad).await.unwrap_err().to_string().contains("not a PEM"));
    }
}
