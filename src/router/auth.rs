//! Who may ask the router: `Authorization: Bearer KEY` on every path but `/health` and `/metrics`
//! (vLLM's middleware wants it on every `/v1` path; the router also wants it on `/tokenize` and
//! `/detokenize`, which reach the engines too). KEY is the endpoint's own key (`--api-key-file`:
//! every model, no limit) or one of the keys per user ([`super::keys`]: its models and rates);
//! with neither, anyone may. Only keys' SHA-256 digests are kept: the endpoint's key is compared
//! by its digest in constant time (as vLLM does), a user's key is looked up by its digest (what
//! the lookup's time could say is about a digest no one can choose, never about a key).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use hyper::header::HeaderValue;
use sha2::{Digest, Sha256};

use super::keys::{KeyBook, KeyEntry, ENDPOINT_KEY};
use crate::secret::Secret;

/// The name metrics give a request when the router wants no key.
const ANYONE: &str = "none";

pub struct ApiKey {
    digest: [u8; 32],
}

impl ApiKey {
    pub fn new(key: &Secret) -> ApiKey {
        ApiKey { digest: Sha256::digest(key.expose().as_bytes()).into() }
    }

    /// Whether `token` is this key.
    fn is(&self, token: &[u8]) -> bool {
        let digest: [u8; 32] = Sha256::digest(token).into();
        digest.iter().zip(&self.digest).fold(0u8, |diff, (a, b)| diff | (a ^ b)) == 0
    }
}

/// Who sent a request, its key checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// The router wants no key.
    Anyone,
    /// The endpoint's own key.
    Endpoint,
    /// A key per user.
    User(Arc<KeyEntry>),
}

impl Caller {
    /// Its name in the metrics.
    pub fn name(&self) -> &str {
        match self {
            Caller::Anyone => ANYONE,
            Caller::Endpoint => ENDPOINT_KEY,
            Caller::User(key) => &key.name,
        }
    }

    /// Whether it may use `model`.
    pub fn allows(&self, model: &str) -> bool {
        match self {
            Caller::Anyone | Caller::Endpoint => true,
            Caller::User(key) => key.allows(model),
        }
    }
}

/// The keys the router takes now.
pub struct Gate {
    endpoint: Option<ApiKey>,
    users: HashMap<[u8; 32], Arc<KeyEntry>>,
}

impl Gate {
    pub fn new(endpoint: Option<&Secret>, book: &KeyBook) -> Gate {
        let users =
            book.keys.iter().filter_map(|key| Some((hex_digest(&key.sha256)?, Arc::new(key.clone())))).collect();
        Gate { endpoint: endpoint.map(ApiKey::new), users }
    }

    /// Who `authorization` (the request's header, if any) says sent it; None: no key, or not one
    /// the router takes (401).
    pub fn caller(&self, authorization: Option<&HeaderValue>) -> Option<Caller> {
        if self.endpoint.is_none() && self.users.is_empty() {
            return Some(Caller::Anyone);
        }
        let token = authorization.and_then(|value| bearer_token(value.as_bytes()))?;
        if self.endpoint.as_ref().is_some_and(|key| key.is(token)) {
            return Some(Caller::Endpoint);
        }
        let digest: [u8; 32] = Sha256::digest(token).into();
        self.users.get(&digest).cloned().map(Caller::User)
    }
}

/// The gate requests take, replaced whole when the keys change.
pub struct LiveGate(RwLock<Arc<Gate>>);

impl LiveGate {
    pub fn new(gate: Gate) -> LiveGate {
        LiveGate(RwLock::new(Arc::new(gate)))
    }

    /// A poisoned lock cannot hold half a gate (the swap is one assignment): read as it stands.
    pub fn now(&self) -> Arc<Gate> {
        self.0.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    pub fn replace(&self, gate: Gate) {
        *self.0.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(gate);
    }
}

/// The token of `Bearer TOKEN` (the scheme's case does not matter, RFC 9110 §11.1).
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let (scheme, token) = value.split_at_checked(7)?;
    scheme.eq_ignore_ascii_case(b"bearer ").then_some(token)
}

/// A digest written in hex (a keys file's `sha256`); None when it is not 64 hex digits.
fn hex_digest(hex: &str) -> Option<[u8; 32]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (byte, pair) in digest.iter_mut().zip(bytes.chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::keys::digest_hex;

    fn header(text: &str) -> HeaderValue {
        HeaderValue::from_str(text).unwrap()
    }

    fn user(name: &str, key: &str, models: &[&str]) -> KeyEntry {
        KeyEntry {
            sha256: digest_hex(key.as_bytes()),
            models: models.iter().map(|m| m.to_string()).collect(),
            ..crate::router::keys::entry(name)
        }
    }

    #[test]
    fn only_the_bearer_of_the_endpoints_key_is_admitted() {
        let gate = Gate::new(Some(&Secret::new("sk-router-1".into())), &KeyBook::default());
        assert_eq!(gate.caller(Some(&header("Bearer sk-router-1"))), Some(Caller::Endpoint));
        assert_eq!(gate.caller(Some(&header("bearer sk-router-1"))), Some(Caller::Endpoint));
        for wrong in ["Bearer sk-router-2", "Bearer sk-router-1 ", "Bearer ", "Basic sk-router-1", "sk-router-1", ""] {
            assert_eq!(gate.caller(Some(&header(wrong))), None, "{wrong:?}");
        }
        assert_eq!(gate.caller(None), None);
    }

    #[test]
    fn a_users_key_is_found_by_its_digest_and_says_its_models() {
        let book = KeyBook { keys: vec![user("alice", "sk-strix-a", &["coder"]), user("bob", "sk-strix-b", &[])] };
        let gate = Gate::new(None, &book);
        let Some(Caller::User(alice)) = gate.caller(Some(&header("Bearer sk-strix-a"))) else { panic!("alice") };
        assert_eq!(alice.name, "alice");
        let alice = Caller::User(alice);
        assert!(alice.allows("coder") && !alice.allows("chat"));
        assert!(gate.caller(Some(&header("Bearer sk-strix-b"))).is_some_and(|bob| bob.allows("chat")));
        assert_eq!(gate.caller(Some(&header("Bearer sk-strix-c"))), None);
        assert_eq!(gate.caller(None), None, "keys per user: a key is wanted");
        assert_eq!(Gate::new(None, &KeyBook::default()).caller(None), Some(Caller::Anyone));
        assert_eq!(Caller::Anyone.name(), "none");
        assert_eq!(hex_digest("zz"), None);
    }
}
