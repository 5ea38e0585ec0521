//! A secret (HF_TOKEN, a pull's key, a registry password, a private key) on its way to where it is
//! used: it travels in a call over the channel's stdin and reaches a process through the engine's
//! exec environment or a 0600 file, never an argv. Its `Debug` and `Display` are redacted, so an
//! error or log line that formats it cannot show it, and no report type holds one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

/// What a secret reads as wherever it is shown.
pub const REDACTED: &str = "<redacted>";

impl Secret {
    pub fn new(value: String) -> Secret {
        Secret(value)
    }

    /// A fresh one: 32 random bytes, hex (a launch's Ray token).
    pub fn random() -> crate::error::Result<Secret> {
        let mut bytes = [0u8; 32];
        std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").map_err(urandom)?, &mut bytes)
            .map_err(urandom)?;
        Ok(Secret(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// The value, for the one place that hands it to the process.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

fn urandom(error: std::io::Error) -> crate::error::Error {
    crate::error::Error::host(
        "/dev/urandom",
        format!("cannot read /dev/urandom: {error}"),
        "a Linux system has it; check /dev",
    )
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({REDACTED})")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

/// The words of a variable's name that say its value is a secret (`HF_TOKEN`, `VLLM_API_KEY`,
/// `AWS_SECRET_ACCESS_KEY`, `REGISTRY_PASSWORD`); whole words, so `TOKENIZERS_PARALLELISM` is not.
const SECRET_WORDS: &[&str] = &[
    "TOKEN",
    "TOKENS",
    "KEY",
    "KEYS",
    "APIKEY",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "CREDENTIALS",
    "AUTH",
];

/// True when an environment variable's name says it holds a secret.
pub fn names_a_secret(name: &str) -> bool {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|word| SECRET_WORDS.contains(&word.to_ascii_uppercase().as_str()))
}

/// `env` as it may be shown (a report, `--json`, a dry run): every secret's value redacted.
pub fn shown_env(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.iter()
        .map(|(name, value)| (name.clone(), if names_a_secret(name) { REDACTED.to_string() } else { value.clone() }))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_random_secret_is_its_own() {
        let (a, b) = (super::Secret::random().unwrap(), super::Secret::random().unwrap());
        assert_eq!(a.expose().len(), 64);
        assert_ne!(a, b);
    }

    #[test]
    fn debug_never_shows_the_value() {
        let secret = super::Secret::new("hf_abc123".into());
        assert!(!format!("{secret:?} {secret}").contains("hf_abc123"));
        assert_eq!(serde_json::to_string(&secret).unwrap(), "\"hf_abc123\"");
    }

    #[test]
    fn variables_named_for_secrets_are_redacted_and_others_shown() {
        for name in ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "VLLM_API_KEY", "AWS_SECRET_ACCESS_KEY", "db_password"] {
            assert!(super::names_a_secret(name), "{name}");
        }
        for name in ["TOKENIZERS_PARALLELISM", "HF_HUB_OFFLINE", "NCCL_SOCKET_IFNAME", "KEYBOARD"] {
            assert!(!super::names_a_secret(name), "{name}");
        }
        let env = [("HF_TOKEN", "hf_abc123"), ("HF_HUB_OFFLINE", "1")].map(|(k, v)| (k.to_string(), v.to_string()));
        let shown = super::shown_env(&env.into_iter().collect());
        assert_eq!(shown["HF_TOKEN"], super::REDACTED);
        assert_eq!(shown["HF_HUB_OFFLINE"], "1");
    }
}
