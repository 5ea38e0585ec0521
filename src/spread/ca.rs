//! The cluster registry's certificates, made with rcgen: a CA made once per head under a name of
//! its own (the head's hostname and the time: two CAs with one name confuse OpenSSL), whose
//! certificate every node installs in certs.d; and a server certificate for the head's link
//! address, made again when that address changes. The CA's key never leaves the head.

use std::net::{IpAddr, Ipv4Addr};

use chrono::{Datelike, Duration, Utc};
use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use super::home::RegistryHome;
use crate::error::{Error, Result};

/// How long the certificates are valid: a cluster outlives a release.
const VALID_YEARS: i32 = 10;

/// The head's cluster CA.
pub struct ClusterCa {
    /// What every node installs as `ca.crt`.
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A server certificate and its key, PEM.
pub struct ServerCertificate {
    pub cert_pem: String,
    pub key_pem: String,
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

/// A certificate for the registry at `ip`, signed by the CA.
pub fn server_certificate(ca: &ClusterCa, ip: Ipv4Addr) -> Result<ServerCertificate> {
    let key = KeyPair::generate().map_err(failed)?;
    let mut params = CertificateParams::default();
    params.distinguished_name = common_name(&format!("strix-toolbox cluster registry {ip}"));
    params.subject_alt_names = vec![SanType::IpAddress(IpAddr::V4(ip))];
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    valid_from_now(&mut params);
    let cert = params.signed_by(&key, &ca.issuer).map_err(failed)?;
    Ok(ServerCertificate { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
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
    Error::Internal(format!("cannot make the cluster registry's certificates: {error}"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_ca_per_head_kept_and_able_to_sign_again() {
        let dir = tempfile::tempdir().unwrap();
        let home = RegistryHome { dir: dir.path().join("registry") };
        home.create().unwrap();
        let first = load_or_make(&home).unwrap();
        assert!(first.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"), "{}", first.cert_pem);
        let name = std::fs::read_to_string(home.ca_name()).unwrap();
        assert!(name.starts_with("strix-toolbox cluster registry CA "), "{name}");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(home.ca_key()).unwrap().mode() & 0o777, 0o600);

        let again = load_or_make(&home).unwrap();
        assert_eq!(again.cert_pem, first.cert_pem, "the same CA, not a new one");
        let server = server_certificate(&again, Ipv4Addr::new(192, 168, 100, 1)).unwrap();
        assert!(server.cert_pem.contains("BEGIN CERTIFICATE") && server.key_pem.contains("PRIVATE KEY"));
    }
}
