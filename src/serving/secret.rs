//! A secret (HF_TOKEN) on its way to a node: it travels in the call over the channel's stdin and
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

    /// The value, for the one place that hands it to the process.
    pub fn expose(&self) -> &str {
        &self.0
    }
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
}
