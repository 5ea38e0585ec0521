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

    /// The image repository its toolbox comes from; the channels are its tags.
    pub fn image_repo(self) -> &'static str {
        match self {
            ServingEngine::Vllm => crate::DEFAULT_IMAGE_REPO,
            ServingEngine::LlamaCpp => "docker.io/kyuz0/amd-strix-halo-toolboxes",
        }
    }

    /// The channels (tags) it is refreshed from, the default first. kyuz0's llama.cpp toolboxes:
    /// `vulkan-radv` is the one its README recommends for most users and all models; the active
    /// ROCm tags need /dev/kfd (see [`ServingEngine::needs_kfd`]).
    pub fn channels(self) -> &'static [&'static str] {
        match self {
            ServingEngine::Vllm => &crate::image::reference::CHANNELS,
            ServingEngine::LlamaCpp => &[
                "vulkan-radv",
                "vulkan-amdvlk",
                "rocm-6.4.4",
                "rocm-6.4.4-rocwmma",
                "rocm-7.1.1",
                "rocm-7.1.1-rocwmma",
                "rocm-7rc",
                "rocm-7rc-rocwmma",
                "rocm-7alpha",
                "rocm-7alpha-rocwmma",
                "rocm-7alpha-rocwmma-improved",
            ],
        }
    }

    /// `channel` if it is one of its channels.
    pub fn parse_channel(self, channel: &str) -> Result<&'static str> {
        self.channels().iter().copied().find(|c| *c == channel).ok_or_else(|| {
            Error::Usage(format!(
                "unknown channel {channel:?} for {self}: expected one of {}",
                self.channels().join(", ")
            ))
        })
    }

    /// The toolbox a refresh of `channel` makes when no `--name` is given: the default channel's
    /// is the engine's toolbox, another channel's carries its name.
    pub fn toolbox_for(self, channel: &str) -> String {
        if channel == self.channels()[0] {
            self.default_toolbox().to_string()
        } else {
            format!("{}-{channel}", self.default_toolbox())
        }
    }

    /// Whether its toolbox from `image_ref` needs ROCm's /dev/kfd: vLLM's always; llama.cpp's for
    /// a ROCm build (its tag says so: `rocm-…`), not for Vulkan, which needs /dev/dri alone.
    pub fn needs_kfd(self, image_ref: &str) -> bool {
        match self {
            ServingEngine::Vllm => true,
            ServingEngine::LlamaCpp => {
                let tag = crate::image::reference::ImageRef::parse(image_ref).ok().map(|r| r.tag);
                tag.flatten().is_some_and(|tag| tag.starts_with("rocm"))
            }
        }
    }

    /// Whether its toolbox gets the node's RDMA devices, memlock and NCCL's transport: vLLM's
    /// (RCCL over RoCE); llama.cpp's RPC is plain TCP.
    pub fn uses_rdma(self) -> bool {
        self == ServingEngine::Vllm
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
    fn llama_cpp_toolboxes_are_kyuz0s_with_its_tags_as_channels() {
        let llama = ServingEngine::LlamaCpp;
        assert_eq!(llama.image_repo(), "docker.io/kyuz0/amd-strix-halo-toolboxes");
        assert_eq!(llama.channels()[0], "vulkan-radv", "its README's recommendation");
        assert_eq!(llama.toolbox_for("vulkan-radv"), "llama");
        assert_eq!(llama.toolbox_for("rocm-7.1.1"), "llama-rocm-7.1.1");
        assert_eq!(ServingEngine::Vllm.toolbox_for("dev"), "vllm-dev");
        assert!(llama.parse_channel("latest").unwrap_err().to_string().contains("vulkan-radv"));
        assert!(llama.needs_kfd("docker.io/kyuz0/amd-strix-halo-toolboxes:rocm-7.1.1-rocwmma"));
        assert!(!llama.needs_kfd("docker.io/kyuz0/amd-strix-halo-toolboxes:vulkan-radv"));
        assert!(ServingEngine::Vllm.needs_kfd("x/y:latest") && !llama.uses_rdma());
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
