//! What decides a figure, so results are only ever held against results measured the same way:
//! the image (its digest), the engine, the model's identity, how it is spread (tensor- and
//! pipeline-parallel sizes, nodes), the link between the nodes, and the lengths. Concurrency is
//! decided per level inside a result; the number of requests only steadies a figure, so it is kept
//! but is no part of the key.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The inference engine behind the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ServingEngine {
    #[serde(rename = "vllm")]
    Vllm,
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
}

impl ServingEngine {
    pub fn name(self) -> &'static str {
        match self {
            ServingEngine::Vllm => "vllm",
            ServingEngine::LlamaCpp => "llama.cpp",
        }
    }
}

impl fmt::Display for ServingEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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
            ModelIdentity::Hub { repo, commit } => write!(f, "{repo}@{}", short(commit, 12)),
            ModelIdentity::Gguf { name, sha256 } => write!(f, "{name} (sha256:{})", short(sha256, 12)),
        }
    }
}

/// The link tensors cross between nodes: what decides a multi-node figure most after the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkTransport {
    /// One node: nothing crosses a link.
    Local,
    Roce,
    ThunderboltTcp,
    EthernetTcp,
}

impl LinkTransport {
    pub fn label(self) -> &'static str {
        match self {
            LinkTransport::Local => "one node",
            LinkTransport::Roce => "RoCE",
            LinkTransport::ThunderboltTcp => "Thunderbolt TCP",
            LinkTransport::EthernetTcp => "Ethernet TCP",
        }
    }
}

/// Everything a figure depends on besides the load's concurrency.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BenchKey {
    /// The serving image (`repo@sha256:…`, else its id).
    pub image: String,
    pub engine: ServingEngine,
    pub model: ModelIdentity,
    pub tensor_parallel: u32,
    pub pipeline_parallel: u32,
    pub nodes: u32,
    pub transport: LinkTransport,
    pub input_len: u32,
    pub output_len: u32,
}

impl BenchKey {
    /// The same setup on another image: how a new image is held against the old one.
    pub fn on_image(&self, image: &str) -> BenchKey {
        BenchKey { image: image.to_string(), ..self.clone() }
    }

    /// "TP2 PP1 on 2 nodes over RoCE".
    pub fn layout(&self) -> String {
        let nodes = if self.nodes == 1 { "1 node".to_string() } else { format!("{} nodes", self.nodes) };
        let over = if self.transport == LinkTransport::Local {
            String::new()
        } else {
            format!(" over {}", self.transport.label())
        };
        format!("TP{} PP{} on {nodes}{over}", self.tensor_parallel, self.pipeline_parallel)
    }
}

/// The first `n` characters, after an algorithm prefix (`sha256:`) if any.
pub fn short(id: &str, n: usize) -> String {
    let id = id.rsplit_once(':').map_or(id, |(_, hex)| hex);
    id.chars().take(n).collect()
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
        assert_eq!(serde_json::to_value(ServingEngine::LlamaCpp).unwrap(), "llama.cpp");
    }

    #[test]
    fn the_layout_reads_as_people_say_it() {
        let key = BenchKey {
            image: "sha256:aa".into(),
            engine: ServingEngine::Vllm,
            model: ModelIdentity::Hub { repo: "m/m".into(), commit: "c".into() },
            tensor_parallel: 2,
            pipeline_parallel: 1,
            nodes: 2,
            transport: LinkTransport::Roce,
            input_len: 128,
            output_len: 128,
        };
        assert_eq!(key.layout(), "TP2 PP1 on 2 nodes over RoCE");
        assert_eq!(key.on_image("sha256:bb").image, "sha256:bb");
        assert_eq!(short("docker.io/x@sha256:abcdef0123", 6), "abcdef");
    }
}
