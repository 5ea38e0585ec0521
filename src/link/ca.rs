//! The cluster CA and what it signs, made with rcgen. The CA is made once per head under a name of
//! its own (the head's hostname and the time: two CAs with one name confuse OpenSSL); its key never
//! leaves the head. It signs:
//! - the head's server certificate, for its link address and 127.0.0.1 (the registry's two
//!   listeners, and the blob server), made again when that address changes;
//! - the head's own client certificate, the one the registry's writer accepts;
//! - each node's client certificate, from the node's own signing request: a node's key is made on
//!   the node and never leaves it ([`signing_request`] there, [`sign_client`] on the head).

use std::net::{IpAddr, Ipv4Addr};

use chrono::{Datelike, Duration, Utc};
use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, CertificateSigningRequestParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use super::home::RegistryHome;
use crate::error::{Error, Result};
use crate::link::tls::TlsIdentity;
use crate::secret::Secret;

/// How long the certificates are valid: a cluster outlives a release.
const VALID_YEARS: i32 = 10;

/// The head's cluster CA.
pub struct ClusterCa {
    /// What every node installs as `ca.crt`.
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// The head's CA: the one made before, else a new one (written to `home`).
pub fn load_or_make(home: &RegistryHome) -> Result<ClusterCa> {
    let existing = (std::fs::read_to_string(home.ca_cert()), std::fs::read_to_string(home.ca_key()));
    let name = std::fs::read_to_string(home.ca_name());
    if let ((Ok(cert_pem), Ok(key_pem)), Ok(name)) = (existing, name) {
        let key = KeyPair::from_pem(&key_pem).map_err(|e| damaged(home, e))?;
        return Ok(ClusterCa { cert_pem, issuer: Issuer::new(ca_params(name.trim()), key) });
    }
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name =
        format!("strix-toolbox cluster registry CA {} {}", hostname.trim(), Utc::now().format("%Y%m%dT%H%M%S%.3fZ"));
    let key = KeyPair::generate().map_err(failed)?;
    let cert_pem = ca_params(&name).self_signed(&key).map_err(failed)?.pem();
    home.write(&home.ca_key(), key.serialize_pem().as_bytes(), 0o600)?;
    home.write(&home.ca_name(), name.as_bytes(), 0o644)?;
    home.write(&home.ca_cert(), cert_pem.as_bytes(), 0o644)?;
    Ok(ClusterCa { cert_pem, issuer: Issuer::new(ca_params(&name), key) })
}

/// The head's server certificate for `ip` (and 127.0.0.1) in the home's `certs/`, made again when
/// the address changed. Only its owner reads the key: the registry runs as root in its container,
/// which is this user (rootless podman maps it so) or root.
pub fn server_identity(home: &RegistryHome, ca: &ClusterCa, ip: Ipv4Addr) -> Result<TlsIdentity> {
    let (cert, key, made_for) = (home.server_cert(), home.server_key(), home.certs().join("ip"));
    let current = std::fs::read_to_string(&made_for).ok().filter(|made| made.trim() == ip.to_string());
    if let (Some(_), Ok(cert_pem), Ok(key_pem)) =
        (current, std::fs::read_to_string(&cert), std::fs::read_to_string(&key))
    {
        return Ok(TlsIdentity { cert_pem, key: Secret::new(key_pem) });
    }
    let key_pair = KeyPair::generate().map_err(failed)?;
    let mut params = leaf_params(&format!("strix-toolbox cluster registry {ip}"), ExtendedKeyUsagePurpose::ServerAuth);
    params.subject_alt_names =
        vec![SanType::IpAddress(IpAddr::V4(ip)), SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST))];
    let identity = signed(&params, key_pair, ca)?;
    home.write(&key, identity.key.expose().as_bytes(), 0o600)?;
    home.write(&cert, identity.cert_pem.as_bytes(), 0o644)?;
    home.write(&made_for, ip.to_string().as_bytes(), 0o644)?;
    Ok(identity)
}

/// The head's own client certificate in the home's `certs/` (made once): the one identity the
/// registry's writer accepts, and the head's on the link.
pub fn head_identity(home: &RegistryHome, ca: &ClusterCa) -> Result<TlsIdentity> {
    let (cert, key) = (home.head_cert(), home.head_key());
    if let (Ok(cert_pem), Ok(key_pem)) = (std::fs::read_to_string(&cert), std::fs::read_to_string(&key)) {
        let identity = TlsIdentity { cert_pem, key: Secret::new(key_pem) };
        if identity.is_client_of(&ca.cert_pem) {
            return Ok(identity);
        }
    }
    let params = leaf_params("strix-toolbox cluster head", ExtendedKeyUsagePurpose::ClientAuth);
    let identity = signed(&params, KeyPair::generate().map_err(failed)?, ca)?;
    home.write(&key, identity.key.expose().as_bytes(), 0o600)?;
    home.write(&cert, identity.cert_pem.as_bytes(), 0o644)?;
    Ok(identity)
}

/// A new private key (PEM), made on the node that keeps it.
pub fn new_key() -> Result<Secret> {
    Ok(Secret::new(KeyPair::generate().map_err(failed)?.serialize_pem()))
}

/// The signing request (PEM) for `key`: what the node sends the head, its key staying.
pub fn signing_request(key: &Secret) -> Result<String> {
    let key = KeyPair::from_pem(key.expose()).map_err(failed)?;
    let mut request = CertificateParams::default();
    request.distinguished_name = common_name("strix-toolbox cluster node");
    request.serialize_request(&key).map_err(failed)?.pem().map_err(failed)
}

/// A node's client certificate, signed by the CA for the key in `csr_pem` (its signature checked).
/// Only the request's key is taken: names, usages and CA flags are the head's, never the request's.
pub fn sign_client(ca: &ClusterCa, node: &str, csr_pem: &str) -> Result<String> {
    let request = CertificateSigningRequestParams::from_pem(csr_pem)
        .map_err(|e| Error::Usage(format!("{node}'s certificate signing request cannot be read: {e}")))?;
    let params = leaf_params(&format!("strix-toolbox cluster node {node}"), ExtendedKeyUsagePurpose::ClientAuth);
    Ok(params.signed_by(&request.public_key, &ca.issuer).map_err(failed)?.pem())
}

/// An end-entity certificate's parameters: one name, one usage, not a CA.
fn leaf_params(name: &str, usage: ExtendedKeyUsagePurpose) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = common_name(name);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![usage];
    params.use_authority_key_identifier_extension = true;
    valid_from_now(&mut params);
    params
}

fn signed(params: &CertificateParams, key: KeyPair, ca: &ClusterCa) -> Result<TlsIdentity> {
    let cert_pem = params.signed_by(&key, &ca.issuer).map_err(failed)?.pem();
    Ok(TlsIdentity { cert_pem, key: Secret::new(key.serialize_pem()) })
}

/// The CA's parameters: the same each time, so that it can sign again from its key and name.
fn ca_params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = common_name(name);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    valid_from_now(&mut params);
    params
}

fn common_name(name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn
}

/// From yesterday (clocks differ between nodes) for [`VALID_YEARS`].
fn valid_from_now(params: &mut CertificateParams) {
    let from = Utc::now() - Duration::days(1);
    let day = |year: i32| date_time_ymd(year, from.month() as u8, from.day().min(28) as u8);
    params.not_before = day(from.year());
    params.not_after = day(from.year() + VALID_YEARS);
}

fn failed(error: rcgen::Error) -> Error {
    Error::Internal(format!("cannot make the cluster's certificates: {error}"))
}

fn damaged(home: &RegistryHome, error: rcgen::Error) -> Error {
    Error::host(
        home.ca_key().display().to_string(),
        format!("the cluster registry's CA key {} cannot be read ({error})", home.ca_key().display()),
        format!(
            "remove {} (a new CA is made and installed on every node at the next cluster refresh)",
            home.dir.display()
        ),
    )
}

/// A cluster CA in a directory of its own, and a server certificate from it for 127.0.0.1.
#[cfg(test)]
pub mod testing {
    use super::*;

    pub struct ClusterTls {
        pub ca_pem: String,
        pub server: TlsIdentity,
        /// A node's client identity, signed by the CA.
        pub client: TlsIdentity,
        _dir: tempfile::TempDir,
    }

    impl ClusterTls {
        pub fn new() -> ClusterTls {
            let dir = tempfile::tempdir().unwrap();
            let home = RegistryHome { dir: dir.path().join("registry") };
            home.create().unwrap();
            let ca = load_or_make(&home).unwrap();
            let server = server_identity(&home, &ca, Ipv4Addr::LOCALHOST).unwrap();
            let key = new_key().unwrap();
            let cert_pem = sign_client(&ca, "node2", &signing_request(&key).unwrap()).unwrap();
            ClusterTls { ca_pem: ca.cert_pem, server, client: TlsIdentity { cert_pem, key }, _dir: dir }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn home() -> (tempfile::TempDir, RegistryHome) {
        let dir = tempfile::tempdir().unwrap();
        let home = RegistryHome { dir: dir.path().join("registry") };
        home.create().unwrap();
        (dir, home)
    }

    #[test]
    fn one_ca_per_head_kept_and_able_to_sign_again() {
        let (_dir, home) = home();
        let first = load_or_make(&home).unwrap();
        assert!(first.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"), "{}", first.cert_pem);
        let name = std::fs::read_to_string(home.ca_name()).unwrap();
        assert!(name.starts_with("strix-toolbox cluster registry CA "), "{name}");
        assert_eq!(std::fs::metadata(home.ca_key()).unwrap().mode() & 0o777, 0o600);

        let again = load_or_make(&home).unwrap();
        assert_eq!(again.cert_pem, first.cert_pem, "the same CA, not a new one");
        let server = server_identity(&home, &again, Ipv4Addr::new(192, 168, 100, 1)).unwrap();
        assert!(server.cert_pem.contains("BEGIN CERTIFICATE") && server.key.expose().contains("PRIVATE KEY"));
        assert!(!server.is_client_of(&again.cert_pem), "a server certificate is no client's");
    }

    #[test]
    fn keys_are_their_owner_s_alone_and_kept() {
        let (_dir, home) = home();
        let ca = load_or_make(&home).unwrap();
        let server = server_identity(&home, &ca, Ipv4Addr::new(192, 168, 100, 1)).unwrap();
        let head = head_identity(&home, &ca).unwrap();
        let mode = |path: std::path::PathBuf| std::fs::metadata(path).unwrap().mode() & 0o777;
        assert_eq!((mode(home.server_key()), mode(home.server_cert())), (0o600, 0o644));
        assert_eq!((mode(home.head_key()), mode(home.head_cert())), (0o600, 0o644));
        assert_eq!(server_identity(&home, &ca, Ipv4Addr::new(192, 168, 100, 1)).unwrap(), server);
        assert_ne!(server_identity(&home, &ca, Ipv4Addr::new(192, 168, 100, 2)).unwrap(), server, "a new address");
        assert_eq!(head_identity(&home, &ca).unwrap(), head);
        assert!(head.is_client_of(&ca.cert_pem));
    }

    #[test]
    fn a_node_s_key_stays_with_it_and_the_head_signs_only_its_key() {
        let (_dir, home) = home();
        let ca = load_or_make(&home).unwrap();
        let key = new_key().unwrap();
        let csr = signing_request(&key).unwrap();
        assert!(csr.contains("BEGIN CERTIFICATE REQUEST"), "{csr}");
        let cert_pem = sign_client(&ca, "node2", &csr).unwrap();
        let node = TlsIdentity { cert_pem: cert_pem.clone(), key };
        assert!(node.is_client_of(&ca.cert_pem));

        let other_key = new_key().unwrap();
        assert!(!TlsIdentity { cert_pem, key: other_key }.is_client_of(&ca.cert_pem), "not that key's");
        let (_other, other_home) = self::home();
        let other_ca = load_or_make(&other_home).unwrap();
        assert!(!node.is_client_of(&other_ca.cert_pem), "another cluster's CA");
        let garbled = sign_client(&ca, "node2", "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n").unwrap_err();
        assert!(garbled.to_string().contains("node2"), "{garbled}");
    }
}
