//! The gate's prompt set: a handful of short, fixed prompts, sent at temperature 0 with a fixed
//! seed and `ignore_eos`, so every prompt yields exactly `max_tokens` tokens to compare. The set
//! is versioned: a reference holds answers to one version, and any change of the prompts, the
//! length or the seed is a new version (a unit test pins each version's fingerprint), whose first
//! accepted run is a new reference.

use serde::Serialize;
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GatePrompt {
    /// Names the prompt in a mismatch.
    pub id: &'static str,
    pub text: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PromptSet {
    pub version: u32,
    /// Tokens generated per prompt.
    pub max_tokens: u32,
    pub seed: u64,
    pub prompts: &'static [GatePrompt],
}

/// The set in use.
pub const PROMPT_SET: PromptSet = PromptSet {
    version: 1,
    max_tokens: 32,
    seed: 1234,
    prompts: &[
        GatePrompt { id: "capital", text: "The capital of France is" },
        GatePrompt { id: "counting", text: "1, 2, 3, 4, 5," },
        GatePrompt { id: "code", text: "def fibonacci(n):\n" },
        GatePrompt { id: "story", text: "Once upon a time, in a small village by the sea," },
        GatePrompt { id: "science", text: "Water boils at a temperature of" },
        GatePrompt { id: "translation", text: "English: Good morning.\nFrench:" },
    ],
};

impl PromptSet {
    /// sha256 of everything that decides the answers (hex).
    pub fn fingerprint(&self) -> String {
        let canonical = serde_json::to_vec(self).unwrap_or_default();
        Sha256::digest(canonical).iter().map(|byte| format!("{byte:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each version's fingerprint, pinned: a change of the set without a new version fails here.
    const FINGERPRINTS: &[(u32, &str)] = &[(1, "657e90cc8444ce44c34bcc8926aca4a234529d25406a58121018cea25bc07cfd")];

    #[test]
    fn a_changed_set_is_a_new_version() {
        let pinned = FINGERPRINTS.iter().find(|(version, _)| *version == PROMPT_SET.version);
        assert_eq!(
            pinned.map(|(_, fingerprint)| *fingerprint),
            Some(PROMPT_SET.fingerprint().as_str()),
            "the prompt set changed: give it a new version and pin its fingerprint here"
        );
        let ids: std::collections::BTreeSet<_> = PROMPT_SET.prompts.iter().map(|prompt| prompt.id).collect();
        assert_eq!(ids.len(), PROMPT_SET.prompts.len(), "prompt ids must be unique");
    }
}
