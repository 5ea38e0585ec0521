//! `cluster keys add|list|rm`: the keys per user at the cluster's endpoint, kept by the router on
//! the cluster's head. A new key is made here, on the machine that drives the cluster, and
//! printed once; only its SHA-256 travels to the head and is kept there.

use crate::error::{Error, Result};
use crate::node::router_keys::{KeysReport, RouterKeys};
use crate::node::{Node, NodeCalls};
use crate::router::keys::{check_name, digest_hex, new_key, KeyEntry};
use crate::secret::Secret;

/// What a new key may do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyAsk {
    pub name: String,
    /// The services it may use (none: every one).
    pub models: Vec<String>,
    pub rpm: Option<u64>,
    pub tpm: Option<u64>,
}

/// A key made and kept (by its digest) on `head`: the key, to be shown once, and the keys now.
pub async fn add_key(head: &dyn Node, ask: &KeyAsk) -> Result<(Secret, KeysReport)> {
    check_name(&ask.name)?;
    if ask.models.iter().any(|model| model.is_empty()) {
        return Err(Error::Usage("--models names an empty model: give them as A,B".into()));
    }
    let key = new_key()?;
    let entry = KeyEntry {
        name: ask.name.clone(),
        sha256: digest_hex(key.expose().as_bytes()),
        models: ask.models.clone(),
        rpm: ask.rpm,
        tpm: ask.tpm,
        created: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    };
    let report = head.call(RouterKeys { add: Some(entry), remove: None }).await?;
    Ok((key, report))
}

pub async fn list_keys(head: &dyn Node) -> Result<KeysReport> {
    head.call(RouterKeys::default()).await
}

pub async fn remove_key(head: &dyn Node, name: &str) -> Result<KeysReport> {
    head.call(RouterKeys { add: None, remove: Some(name.to_string()) }).await
}
