//! A secret (HF_TOKEN, an API key, Ray's token) on its way to a node: it travels in the call over the channel's stdin and
//! reaches the process through the engine's exec environment, never an argv. Its `Debug` is
//! redacted, so an error or log line that formats a call cannot show it, and no report type
//! holds one.

use serde::{Deserialize, Serialize};

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Secret {
        Secret(value)
    }

    /// A fresh one: 32 random bytes, hex (a launch's Ray token, a pull's key).
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
        f.write_str("Secret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn debug_never_shows_the_value() {
        let secret = super::Secret::new("hf_abc123".into());
        assert!(!format!("{secret:?}").contains("hf_abc123"));
        assert_eq!(serde_json::to_string(&secret).unwrap(), "\"hf_abc123\"");
    }

    #[test]
    fn every_random_secret_is_its_own() {
        let (a, b) = (super::Secret::random().unwrap(), super::Secret::random().unwrap());
        assert_eq!(a.expose().len(), 64);
        assert_ne!(a, b);
    }
}
