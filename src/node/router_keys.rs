//! The keys per user, the node's side (the cluster's head): [`RouterKeys`] lists them, adds one
//! (made, and hashed, where `cluster keys add` runs: only its SHA-256 comes here) or removes one,
//! in the router's keys file, under the routes' lock. The running router reads the file again
//! within a second: no restart.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::router::keys::KeyEntry;
use crate::router::routes::RouterFiles;
use crate::settings::Settings;

/// A change of the keys, or none (a list).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterKeys {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add: Option<KeyEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove: Option<String>,
}

/// One key as it is shown: never its digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyShown {
    pub name: String,
    /// The services it may use (empty: every one).
    pub models: Vec<String>,
    pub rpm: Option<u64>,
    pub tpm: Option<u64>,
    pub created: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeysReport {
    /// Every key after the change, by name.
    pub keys: Vec<KeyShown>,
    /// The key file on the head.
    pub file: String,
}

pub async fn router_keys(settings: &Settings, change: &RouterKeys) -> Result<KeysReport> {
    let files = RouterFiles::of(&settings.paths)?;
    let book = if change.add.is_none() && change.remove.is_none() {
        files.read_keys()?
    } else {
        let _lock = files.lock().await?;
        let mut book = files.read_keys()?;
        if let Some(name) = &change.remove {
            book = book.without(name).ok_or_else(|| {
                Error::Usage(format!("no key is named {name}. `strix-toolbox cluster keys list` shows them"))
            })?;
        }
        if let Some(entry) = &change.add {
            book = book.with(entry.clone())?;
        }
        files.write_keys(&book)?;
        book
    };
    Ok(KeysReport { keys: book.keys.iter().map(shown).collect(), file: files.keys_path().display().to_string() })
}

fn shown(key: &KeyEntry) -> KeyShown {
    KeyShown {
        name: key.name.clone(),
        models: key.models.clone(),
        rpm: key.rpm,
        tpm: key.tpm,
        created: key.created.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::keys::digest_hex;

    fn entry(name: &str) -> KeyEntry {
        KeyEntry { models: vec!["coder".into()], rpm: Some(6), ..crate::router::keys::entry(name) }
    }

    #[tokio::test]
    async fn keys_are_added_listed_and_removed_on_the_head_by_their_digest_alone() {
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings::for_tests(dir.path());
        let listed = router_keys(&settings, &RouterKeys::default()).await.unwrap();
        assert!(listed.keys.is_empty());
        let added = router_keys(&settings, &RouterKeys { add: Some(entry("alice")), remove: None }).await.unwrap();
        assert_eq!(added.keys[0].models, ["coder"]);
        assert!(!serde_json::to_string(&added).unwrap().contains(&digest_hex(b"alice")), "no digest in a report");
        let file = std::path::Path::new(&added.file);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(file).unwrap().permissions().mode() & 0o777, 0o600);
        let twice = router_keys(&settings, &RouterKeys { add: Some(entry("alice")), remove: None }).await;
        assert!(twice.unwrap_err().to_string().contains("exists already"));
        router_keys(&settings, &RouterKeys { add: Some(entry("bob")), remove: None }).await.unwrap();
        let left = router_keys(&settings, &RouterKeys { add: None, remove: Some("alice".into()) }).await.unwrap();
        assert_eq!(left.keys.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["bob"]);
        let files = RouterFiles::of(&settings.paths).unwrap();
        let kept: Vec<String> = files.read_keys().unwrap().keys.into_iter().map(|k| k.name).collect();
        assert_eq!(kept, ["bob"]);
        let missing = router_keys(&settings, &RouterKeys { add: None, remove: Some("carol".into()) }).await;
        assert!(missing.unwrap_err().to_string().contains("no key is named carol"));
    }
}
