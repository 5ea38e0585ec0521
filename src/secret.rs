//! A secret (HF_TOKEN, a pull's key, a registry password, a private key) on its way to where it is
//! used: it travels in a call over the channel's stdin and reaches a process through the engine's
//! exec environment or a 0600 file, never an argv. Its `Debug` and `Display` are redacted, so an
//! error or log line that formats it cannot show it, and no report type holds one.

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

    /// The value, for the one place that hands it to the process.
    pub fn expose(&self) -> &str {
        &self.0
    }
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

#[cfg(test)]
mod tests {
    #[test]
    fn debug_never_shows_the_value() {
        let secret = super::Secret::new("hf_abc123".into());
        assert!(!format!("{secret:?} {secret}").contains("hf_abc123"));
        assert_eq!(serde_json::to_string(&secret).unwrap(), "\"hf_abc123\"");
    }
}
