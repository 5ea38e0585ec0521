//! TLS between the head and its nodes, all of it anchored in the cluster CA (`link::ca`): a
//! certificate with its key ([`TlsIdentity`]), the server side of the head's blob server, the
//! client side that trusts the cluster CA alone, and the check that a client certificate is one
//! the cluster's registry accepts. rustls on ring, as reqwest already builds it.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, RootCertStore, ServerConfig};

use crate::secret::Secret;

/// A certificate and its private key, PEM: a server's, or a client's identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsIdentity {
    pub cert_pem: String,
    pub key: Secret,
}

impl TlsIdentity {
    /// Both PEMs, as `reqwest::Identity::from_pem` takes them.
    pub fn pem_bundle(&self) -> Vec<u8> {
        format!("{}\n{}", self.cert_pem.trim_end(), self.key.expose()).into_bytes()
    }

    /// The key is the certificate's, and the certificate is valid now and signed by `ca_pem` for
    /// a TLS client: what the cluster registry asks of a node.
    pub fn is_client_of(&self, ca_pem: &str) -> bool {
        let verified = || -> Result<(), String> {
            let provider = provider();
            let verifier = WebPkiClientVerifier::builder_with_provider(roots(ca_pem)?, provider.clone())
                .build()
                .map_err(|e| e.to_string())?;
            let certified = self.certified_key(&provider)?;
            certified.keys_match().map_err(|e| e.to_string())?;
            let cert = certified.end_entity_cert().map_err(|e| e.to_string())?;
            verifier.verify_client_cert(cert, &[], UnixTime::now()).map(drop).map_err(|e| e.to_string())
        };
        verified().is_ok()
    }

    fn certified_key(&self, provider: &CryptoProvider) -> Result<CertifiedKey, String> {
        let certs = CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("the certificate is not PEM: {e}"))?;
        if certs.is_empty() {
            return Err("no certificate".into());
        }
        let key = PrivateKeyDer::from_pem_slice(self.key.expose().as_bytes())
            .map_err(|e| format!("the key is not PEM: {e}"))?;
        CertifiedKey::from_der(certs, key, provider).map_err(|e| e.to_string())
    }
}

/// A TLS server presenting `identity`, asking no client certificate (the blob server: its clients
/// hold the pull's key).
pub fn server_config(identity: &TlsIdentity) -> Result<ServerConfig, String> {
    let provider = provider();
    let certified = identity.certified_key(&provider)?;
    certified.keys_match().map_err(|e| format!("the key is not the certificate's: {e}"))?;
    Ok(ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified))))
}

/// A TLS server presenting `identity` that answers only a client whose certificate `ca_pem`
/// signed: what the cluster registry asks of its clients (the head's relay, `spread::relay`).
pub fn mutual_server_config(identity: &TlsIdentity, ca_pem: &str) -> Result<ServerConfig, String> {
    let provider = provider();
    let certified = identity.certified_key(&provider)?;
    certified.keys_match().map_err(|e| format!("the key is not the certificate's: {e}"))?;
    let clients = WebPkiClientVerifier::builder_with_provider(roots(ca_pem)?, provider.clone())
        .build()
        .map_err(|e| e.to_string())?;
    Ok(ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(clients)
        .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified))))
}

/// A TLS client that trusts the cluster CA `ca_pem` and nothing else (not the system's roots).
pub fn client_config(ca_pem: &str) -> Result<ClientConfig, String> {
    let provider = provider();
    let verifier = WebPkiServerVerifier::builder_with_provider(roots(ca_pem)?, provider.clone())
        .build()
        .map_err(|e| e.to_string())?;
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_webpki_verifier(verifier)
        .with_no_client_auth())
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The CA certificates in `ca_pem`.
fn roots(ca_pem: &str) -> Result<Arc<RootCertStore>, String> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.map_err(|e| format!("the CA is not PEM: {e}"))?).map_err(|e| e.to_string())?;
    }
    if roots.is_empty() {
        return Err("no CA certificate".into());
    }
    Ok(Arc::new(roots))
}
