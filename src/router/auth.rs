//! The endpoint's key (`--api-key-file`), checked once, at the router: `Authorization: Bearer
//! KEY` on every path but `/health` (vLLM's middleware wants it on every `/v1` path; the router
//! also wants it on `/tokenize` and `/detokenize`, which reach the engines too). Only the key's
//! SHA-256 is kept, and a token is compared by its digest in constant time (as vLLM does), so
//! neither the comparison's time nor its length gives the key away.

use hyper::header::HeaderValue;
use sha2::{Digest, Sha256};

use crate::secret::Secret;

pub struct ApiKey {
    digest: [u8; 32],
}

impl ApiKey {
    pub fn new(key: &Secret) -> ApiKey {
        ApiKey { digest: Sha256::digest(key.expose().as_bytes()).into() }
    }

    /// Whether `authorization` (the request's header, if any) is `Bearer KEY` with this key.
    pub fn admits(&self, authorization: Option<&HeaderValue>) -> bool {
        let Some(token) = authorization.and_then(|value| bearer_token(value.as_bytes())) else { return false };
        let digest: [u8; 32] = Sha256::digest(token).into();
        digest.iter().zip(&self.digest).fold(0u8, |diff, (a, b)| diff | (a ^ b)) == 0
    }
}

/// The token of `Bearer TOKEN` (the scheme's case does not matter, RFC 9110 §11.1).
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let (scheme, token) = value.split_at_checked(7)?;
    scheme.eq_ignore_ascii_case(b"bearer ").then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(text: &str) -> HeaderValue {
        HeaderValue::from_str(text).unwrap()
    }

    #[test]
    fn only_the_bearer_of_the_key_is_admitted() {
        let key = ApiKey::new(&Secret::new("sk-router-1".into()));
        assert!(key.admits(Some(&header("Bearer sk-router-1"))));
        assert!(key.admits(Some(&header("bearer sk-router-1"))));
        for wrong in ["Bearer sk-router-2", "Bearer sk-router-1 ", "Bearer ", "Basic sk-router-1", "sk-router-1", ""] {
            assert!(!key.admits(Some(&header(wrong))), "{wrong:?}");
        }
        assert!(!key.admits(None));
    }
}
