//! Which weights a model is, beyond its name: a Hub repository at one commit, or a GGUF file by
//! its content. Bench results and the gate's references are keyed by it, so two models are never
//! held against each other because they share a name.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::image::short_digest;

/// Which weights answer: a name alone says too little (a repo moves on, a GGUF is requantized).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ModelIdentity {
    /// A Hugging Face Hub repository at one commit.
    Hub { repo: String, commit: String },
    /// A GGUF file (the first of a split model) by its content.
    Gguf { name: String, sha256: String },
}

impl ModelIdentity {
    /// A short, file-name-safe name for this identity: the repo or file name and a prefix of the
    /// commit or hash (`Qwen--Qwen3-32B@0123abcd`).
    pub fn slug(&self) -> String {
        let (name, id) = match self {
            ModelIdentity::Hub { repo, commit } => (repo.as_str(), commit.as_str()),
            ModelIdentity::Gguf { name, sha256 } => (name.as_str(), sha256.as_str()),
        };
        let safe: String = name
            .replace('/', "--")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' })
            .collect();
        let safe = safe.trim_start_matches('.');
        format!("{safe}@{}", id.chars().filter(char::is_ascii_alphanumeric).take(12).collect::<String>())
    }
}

impl fmt::Display for ModelIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelIdentity::Hub { repo, commit } => write!(f, "{repo}@{}", short_digest(commit)),
            ModelIdentity::Gguf { name, sha256 } => write!(f, "{name} (sha256:{})", short_digest(sha256)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_name_themselves_safely() {
        let hub = ModelIdentity::Hub { repo: "Qwen/Qwen3-32B".into(), commit: "0123456789abcdef0123".into() };
        assert_eq!(hub.slug(), "Qwen--Qwen3-32B@0123456789ab");
        assert_eq!(hub.to_string(), "Qwen/Qwen3-32B@0123456789ab");
        let gguf = ModelIdentity::Gguf { name: "../evil name.gguf".into(), sha256: "sha256:ff00".into() };
        assert_eq!(gguf.slug(), "--evil_name.gguf@sha256ff00");
        assert!(!gguf.slug().contains('/'));
        assert_eq!(serde_json::to_value(&gguf).unwrap()["kind"], "gguf");
    }
}
