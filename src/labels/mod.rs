//! Label keys: what a container or image records about how it was made.

/// Every key we own starts with this.
pub const PREFIX: &str = "io.github.strix-toolbox";
/// "true" on every container strix-toolbox manages.
pub const MANAGED: &str = "io.github.strix-toolbox.managed";
/// The logical toolbox name (the container's name may be temporary during a swap).
pub const TOOLBOX: &str = "io.github.strix-toolbox.toolbox";
/// sha256 of the container spec, so an unchanged spec is a no-op refresh.
pub const SPEC_HASH: &str = "io.github.strix-toolbox.spec-sha256";
/// The image reference asked for (repo:channel or --image).
pub const IMAGE_REF: &str = "io.github.strix-toolbox.image";
/// The image id the container was created from.
pub const IMAGE_ID: &str = "io.github.strix-toolbox.image-id";
/// The registry digest of that image, when it came from a registry.
pub const IMAGE_DIGEST: &str = "io.github.strix-toolbox.image-digest";
/// The date tag the image was pinned under (YYYYMMDD-HHMMSS).
pub const PIN: &str = "io.github.strix-toolbox.pin";
/// toolbox, distrobox or native.
pub const MANAGER: &str = "io.github.strix-toolbox.manager";
/// The serving engine the toolbox was made for (`vllm`, `llama.cpp`; none: vllm).
pub const ENGINE: &str = "io.github.strix-toolbox.engine";
/// The user's `--env KEY=VALUE` pairs, as a JSON array, so `rollback` recreates them too.
pub const USER_ENV: &str = "io.github.strix-toolbox.env";

/// Where an image's engine computes: `cpu` (no GPU stack: the vLLM CPU image,
/// containerfiles/vllm-cpu.Containerfile); absent, the node's GPU.
pub const DEVICE: &str = "io.github.strix-toolbox.device";

/// Whether an image with these labels computes on the CPU alone.
pub fn computes_on_cpu(labels: &std::collections::BTreeMap<String, String>) -> bool {
    labels.get(DEVICE).is_some_and(|device| device == "cpu")
}

/// sha256 of the librccl.so.1 baked into an image.
pub const RCCL_SHA256: &str = "io.github.strix-toolbox.rccl.sha256";
/// Comma-separated gfx targets of that library.
pub const RCCL_GFX_TARGETS: &str = "io.github.strix-toolbox.rccl.gfx-targets";
/// Where that library came from.
pub const RCCL_SOURCE: &str = "io.github.strix-toolbox.rccl.source";

/// The vLLM release an image holds (`0.32.0`, `v0.13.0`), set by our Containerfiles: the plan
/// sizes the KV cache by that release's rules, on the image's [`DEVICE`].
pub const VLLM_VERSION: &str = "io.github.strix-toolbox.vllm.version";

pub const OCI_CREATED: &str = "org.opencontainers.image.created";
pub const OCI_SOURCE: &str = "org.opencontainers.image.source";
pub const OCI_REVISION: &str = "org.opencontainers.image.revision";

/// The `USER_ENV` label's value for `pairs` (none when there are none).
pub fn encode_user_env(pairs: &[String]) -> Option<String> {
    (!pairs.is_empty()).then(|| serde_json::to_string(pairs).unwrap_or_default())
}

/// The `--env` pairs a container was made with (none when it has no such label, or a mangled one).
pub fn decode_user_env(labels: &std::collections::BTreeMap<String, String>) -> Vec<String> {
    labels.get(USER_ENV).and_then(|text| serde_json::from_str(text).ok()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_env_round_trips_through_its_label() {
        let pairs = vec!["HF_TOKEN=a,b=c".to_string(), "VLLM_LOGGING_LEVEL=DEBUG".to_string()];
        let labels = [(USER_ENV.to_string(), encode_user_env(&pairs).unwrap())].into_iter().collect();
        assert_eq!(decode_user_env(&labels), pairs);
        assert_eq!(encode_user_env(&[]), None);
        let mangled = [(USER_ENV.to_string(), "not json".to_string())].into_iter().collect();
        assert!(decode_user_env(&mangled).is_empty());
    }
}
