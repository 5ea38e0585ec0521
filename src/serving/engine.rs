//! The serving engines, each a profile: its toolbox image and channels, its default toolbox name,
//! the variable its server reads an API key from, the process that serves the endpoint, and how it
//! runs across nodes (its [`Backend`]). What a launch runs per engine is in [`super::vllm`] and
//! [`super::llama`]; the launch's discipline, shared by both, in `cluster::launch`.
//!
//! The engine a toolbox was made for is recorded on it (the `ENGINE` label), so `status`, `verify`
//! and `launch` know it; a toolbox from before engines were profiles is a vLLM one.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ServingEngine {
    /// `vllm serve`: tensor or pipeline parallelism across the nodes' GPUs (RCCL), its own
    /// multiprocessing executor across nodes (or Ray's). Also what a record from before engines were recorded stands for.
    #[default]
    #[serde(rename = "vllm")]
    Vllm,
    /// `llama-server`: the model's layers split over the nodes, whose GPUs it reaches through
    /// `rpc-server` on each other node (llama.cpp's RPC backend). GGUF models.
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
}

/// How an engine's processes make one server out of several nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// One node: the server alone.
    #[default]
    Single,
    /// vLLM's Ray executor: Ray on every node, `vllm serve` on the head.
    Ray,
    /// vLLM's multiprocessing executor across nodes: `vllm serve --nnodes N --node-rank 0` on the
    /// head (the API, and the rendezvous on its link address), `--headless` ranks on the others.
    Mp,
    /// llama.cpp's RPC backend: `rpc-server` on every other node, `llama-server` on the head.
    Rpc,
}

impl ServingEngine {
    pub const ALL: [ServingEngine; 2] = [ServingEngine::Vllm, ServingEngine::LlamaCpp];

    /// As the command line and the label spell it.
    pub fn name(self) -> &'static str {
        match self {
            ServingEngine::Vllm => "vllm",
            ServingEngine::LlamaCpp => "llama.cpp",
        }
    }

    /// `--engine vllm|llama.cpp`. The container engine's names are refused with its flag's name
    /// (it was `--engine` before there were serving engines).
    pub fn parse(text: &str) -> Result<ServingEngine> {
        match text {
            "vllm" => Ok(ServingEngine::Vllm),
            "llama.cpp" | "llamacpp" | "llama-cpp" => Ok(ServingEngine::LlamaCpp),
            "auto" | "podman" | "docker" => Err(Error::Usage(format!(
                "--engine {text}: the container engine is chosen with --container-engine {text}; --engine names \
                 the serving engine, vllm or llama.cpp"
            ))),
            other => Err(Error::Usage(format!("--engine {other:?}: the serving engine is vllm or llama.cpp"))),
        }
    }

    /// The engine a toolbox label names; none (a toolbox made before engines were recorded) is vLLM.
    pub fn of_label(label: Option<&str>) -> ServingEngine {
        match label {
            Some("llama.cpp") => ServingEngine::LlamaCpp,
            _ => ServingEngine::Vllm,
        }
    }

    /// The toolbox a launch or refresh uses when no `--name` is given.
    pub fn default_toolbox(self) -> &'static str {
        match self {
            ServingEngine::Vllm => "vllm",
            ServingEngine::LlamaCpp => "llama",
        }
    }

    /// How it spans more than one node.
    pub fn cluster_backend(self) -> Backend {
        match self {
            ServingEngine::Vllm => Backend::Mp,
            ServingEngine::LlamaCpp => Backend::Rpc,
        }
    }

    /// The process on the head that serves the endpoint (its log is `TOOLBOX.NAME.log`).
    pub fn server(self) -> &'static str {
        match self {
            ServingEngine::Vllm => "vllm",
            ServingEngine::LlamaCpp => "llama-server",
        }
    }

    /// The variable its server takes an API key from, so the key is never in its argv: vLLM's
    /// `VLLM_API_KEY` (the `--api-key` default), llama-server's `LLAMA_API_KEY` (`--api-key`'s).
    pub fn api_key_env(self) -> &'static str {
        match self {
            ServingEngine::Vllm => "VLLM_API_KEY",
            ServingEngine::LlamaCpp => "LLAMA_API_KEY",
        }
    }

    /// The name the engine's server gives the model when the operator names none: vLLM's
    /// `--served-model-name`, llama-server's `--alias`.
    pub fn name_flags(self) -> &'static [&'static str] {
        match self {
            ServingEngine::Vllm => &["--served-model-name"],
            ServingEngine::LlamaCpp => &["--alias", "-a"],
        }
    }
}

impl Backend {
    /// As the command line and the report spell it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Single => "single",
            Backend::Ray => "ray",
            Backend::Mp => "mp",
            Backend::Rpc => "rpc",
        }
    }

    /// Ray runs in the toolbox: started by `ray start`, stopped by `ray stop`.
    pub fn runs_ray(self) -> bool {
        self == Backend::Ray
    }
}

impl std::fmt::Display for ServingEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_parse_by_name_and_the_container_engines_say_their_flag() {
        for engine in ServingEngine::ALL {
            assert_eq!(ServingEngine::parse(engine.name()).unwrap(), engine);
            assert_eq!(ServingEngine::of_label(Some(engine.name())), engine);
        }
        let error = ServingEngine::parse("docker").unwrap_err().to_string();
        assert!(error.contains("--container-engine docker"), "{error}");
        assert!(matches!(ServingEngine::parse("tgi"), Err(Error::Usage(_))));
        assert_eq!(ServingEngine::of_label(None), ServingEngine::Vllm, "a toolbox from before profiles");
        assert_eq!(serde_json::to_string(&ServingEngine::LlamaCpp).unwrap(), "\"llama.cpp\"");
    }

    #[test]
    fn engines_are_named_as_their_projects_name_them() {
        assert_eq!(serde_json::to_value(ServingEngine::LlamaCpp).unwrap(), "llama.cpp");
        assert_eq!(serde_json::from_str::<ServingEngine>("\"vllm\"").unwrap(), ServingEngine::Vllm);
        assert_eq!(ServingEngine::default(), ServingEngine::Vllm);
    }

    #[test]
    fn vllm_spans_nodes_without_ray_unless_asked() {
        assert_eq!(ServingEngine::Vllm.cluster_backend(), Backend::Mp);
        for backend in [Backend::Single, Backend::Ray, Backend::Mp, Backend::Rpc] {
            assert_eq!(serde_json::to_value(backend).unwrap(), backend.name());
        }
    }
}
