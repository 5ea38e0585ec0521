//! Which inference engine serves: vLLM (over Ray across nodes) or llama.cpp's server (over its
//! RPC backend across nodes). What a launch records, and what a bench result is keyed by.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The inference engine behind the endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ServingEngine {
    /// Also what a record from before engines were recorded stands for.
    #[default]
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

#[cfg(test)]
mod tests {
    #[test]
    fn engines_are_named_as_their_projects_name_them() {
        assert_eq!(serde_json::to_value(super::ServingEngine::LlamaCpp).unwrap(), "llama.cpp");
        assert_eq!(serde_json::from_str::<super::ServingEngine>("\"vllm\"").unwrap(), super::ServingEngine::Vllm);
        assert_eq!(super::ServingEngine::default(), super::ServingEngine::Vllm);
    }
}
