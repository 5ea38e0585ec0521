//! The keys per user (`cluster keys add NAME`), kept on the cluster's head in `keys.json` (0600):
//! each key's name, the SHA-256 of its value (the value itself is printed once, where it was
//! made, and kept nowhere), the models it may use (none named: every one) and its rates, requests
//! and tokens a minute (none: no limit). The router reads the file again whenever it changes.
//!
//! ```json
//! {"keys": [{"name": "alice", "sha256": "9f86d0…", "models": ["coder"], "rpm": 60, "tpm": 100000,
//!   "created": "2026-11-28T10:00:00Z"}]}
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::secret::Secret;

/// What every key made here begins with: says what it is where it is found.
pub const KEY_PREFIX: &str = "sk-strix-";
/// The name the metrics give the endpoint's own key (`--api-key-file`): no key may take it.
pub const ENDPOINT_KEY: &str = "endpoint";
/// The longest key name (it is a metrics label and a table cell).
const MAX_NAME: usize = 64;

/// One key per user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyEntry {
    pub name: String,
    /// The SHA-256 of the key, in hex.
    pub sha256: String,
    /// The services it may use, by name; empty: every one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// Requests a minute (None: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<u64>,
    /// Tokens a minute, as the engines count them in their answers (None: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<u64>,
    /// When it was made (RFC 3339).
    pub created: String,
}

impl KeyEntry {
    /// Whether it may use `model`.
    pub fn allows(&self, model: &str) -> bool {
        self.models.is_empty() || self.models.iter().any(|allowed| allowed == model)
    }
}

/// The keys file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyBook {
    pub keys: Vec<KeyEntry>,
}

impl KeyBook {
    /// The keys in `bytes` (the file at `path`).
    pub fn parse(bytes: &[u8], path: &Path) -> Result<KeyBook> {
        serde_json::from_slice(bytes).map_err(|e| {
            Error::host(
                path.display().to_string(),
                format!("{} is not the router's keys ({e})", path.display()),
                format!(
                    "remove it (`rm {}`) and add the keys again (`strix-toolbox cluster keys add NAME`)",
                    path.display()
                ),
            )
        })
    }

    pub fn get(&self, name: &str) -> Option<&KeyEntry> {
        self.keys.iter().find(|key| key.name == name)
    }

    /// With `entry` added; a name taken already is a usage error.
    pub fn with(mut self, entry: KeyEntry) -> Result<KeyBook> {
        check_name(&entry.name)?;
        if self.get(&entry.name).is_some() {
            return Err(Error::Usage(format!(
                "a key named {0} exists already. Fix: another name, or `strix-toolbox cluster keys rm {0}` first",
                entry.name
            )));
        }
        self.keys.push(entry);
        self.keys.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(self)
    }

    /// Without the key `name`; None when there is no such key.
    pub fn without(mut self, name: &str) -> Option<KeyBook> {
        let before = self.keys.len();
        self.keys.retain(|key| key.name != name);
        (self.keys.len() < before).then_some(self)
    }
}

/// A new key: [`KEY_PREFIX`] and 32 random bytes in hex.
pub fn new_key() -> Result<Secret> {
    Ok(Secret::new(format!("{KEY_PREFIX}{}", Secret::random()?.expose())))
}

/// The SHA-256 of `token`, in hex: what the keys file keeps of a key.
pub fn digest_hex(token: &[u8]) -> String {
    Sha256::digest(token).iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A key's name: letters, digits, `.`, `_` and `-`, at most [`MAX_NAME`] of them, and not the
/// endpoint key's own.
pub fn check_name(name: &str) -> Result<()> {
    let fine = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !fine {
        return Err(Error::Usage(format!(
            "{name:?} is no key name: letters, digits, `.`, `_` and `-`, 1 to {MAX_NAME} of them"
        )));
    }
    if name == ENDPOINT_KEY {
        return Err(Error::Usage(format!(
            "`{ENDPOINT_KEY}` names the endpoint's own key (--api-key-file) in the metrics. Fix: another name"
        )));
    }
    Ok(())
}

/// A unit test's key `name`, its value its name, every model, no rates.
#[cfg(test)]
pub(crate) fn entry(name: &str) -> KeyEntry {
    KeyEntry {
        name: name.into(),
        sha256: digest_hex(name.as_bytes()),
        models: Vec::new(),
        rpm: None,
        tpm: None,
        created: "2026-11-28T10:00:00Z".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_added_once_by_name_and_removed() {
        let book = KeyBook::default().with(entry("bob")).unwrap().with(entry("alice")).unwrap();
        let names: Vec<&str> = book.keys.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["alice", "bob"]);
        assert!(book.clone().with(entry("bob")).unwrap_err().to_string().contains("exists already"));
        let book = book.without("alice").unwrap();
        assert!(book.get("alice").is_none() && book.get("bob").is_some());
        assert!(book.without("carol").is_none());
        let text = serde_json::to_string(&KeyBook::default().with(entry("x")).unwrap()).unwrap();
        assert_eq!(KeyBook::parse(text.as_bytes(), Path::new("keys.json")).unwrap().keys[0].name, "x");
        assert!(KeyBook::parse(b"{", Path::new("keys.json"))
            .unwrap_err()
            .to_string()
            .contains("not the router's keys"));
    }

    #[test]
    fn a_name_is_short_plain_and_not_the_endpoints() {
        for bad in ["", "a b", "a/b", ENDPOINT_KEY, &"x".repeat(65), "é"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        check_name("alice-laptop_2.0").unwrap();
    }

    #[test]
    fn a_new_key_is_long_random_and_kept_by_its_digest() {
        let (a, b) = (new_key().unwrap(), new_key().unwrap());
        assert!(a.expose().starts_with(KEY_PREFIX) && a.expose().len() >= KEY_PREFIX.len() + 64, "{}", a.expose());
        assert_ne!(a.expose(), b.expose());
        assert_eq!(digest_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        let mut only = entry("a");
        assert!(only.allows("anything"));
        only.models = vec!["coder".into()];
        assert!(only.allows("coder") && !only.allows("chat"));
    }
}
