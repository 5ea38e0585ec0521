//! Which vLLM the image holds, and the rules of it a plan depends on. The image says it in the
//! labels our Containerfiles set, [`crate::labels::VLLM_VERSION`] and [`crate::labels::DEVICE`]
//! (`cpu`; absent, the node's GPU: ROCm on a Strix Halo), read from the head's toolbox; without
//! them the plan assumes the newest rules on ROCm and says so. What depends on them, each from
//! vLLM's source:
//! - the block size: `CacheConfig.DEFAULT_BLOCK_SIZE` 16 on ROCm and CUDA; 128 on CPU
//!   (`platforms/cpu.py` `check_and_update_config`; MLA without AMX takes 16, which 128 covers);
//! - `--max-num-batched-tokens`' default for `vllm serve` (`EngineArgs.get_batch_defaults`): on
//!   CPU 2048 × (TP × PP); on a GPU 8192 with 70 GiB or more, else 2048;
//! - what a sliding-window layer keeps beyond its window (`SlidingWindowSpec.max_memory_usage_bytes`):
//!   from 0.24 the tokens in flight, `VllmConfig.max_in_flight_tokens` = the concurrent batches ×
//!   `--max-num-batched-tokens` (vllm#47728, merged 2026-07-07, after 0.23.0 was cut); the
//!   batches are PP + 1 on a GPU (async scheduling and the V2 model runner, both on by default)
//!   and PP on CPU (`platforms/cpu.py` turns async scheduling off); before 0.24 one batch;
//! - the KV cache dtypes its attention backends take: ROCm fp8 only as e4m3 (`CacheConfig.cache_dtype`'s
//!   documentation), the CPU backend auto and fp8 (`CPUAttentionBackend.supported_kv_cache_dtypes`).

use serde::{Deserialize, Serialize};

use crate::toolbox::status::VllmLabels;

const GIB: u64 = 1 << 30;
/// The first release that keeps the tokens in flight in a sliding layer's cache.
const IN_FLIGHT_SINCE: (u32, u32) = (0, 24);
/// The release whose rules the plan takes when the image does not say (the newest it knows: the
/// tests' vLLM CPU build).
const NEWEST: (u32, u32, u32) = (0, 32, 0);

/// What the image of the head's toolbox says of its vLLM, or why nothing does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadImage {
    /// Its labels (None: the image has none, or there was no toolbox to ask: `why`).
    pub vllm: Option<VllmLabels>,
    pub why: String,
}

impl Default for HeadImage {
    fn default() -> HeadImage {
        HeadImage { vllm: None, why: "the head's toolbox was not asked".into() }
    }
}

impl HeadImage {
    /// The build its labels name, or the one assumed.
    pub fn vllm_build(&self) -> VllmBuild {
        VllmBuild::of(self.vllm.as_ref(), &self.why)
    }
}

/// The device vLLM was built for (`VLLM_TARGET_DEVICE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VllmDevice {
    Rocm,
    Cuda,
    Cpu,
}

impl VllmDevice {
    fn named(name: &str) -> Option<VllmDevice> {
        match name.trim().to_ascii_lowercase().as_str() {
            "rocm" => Some(VllmDevice::Rocm),
            "cuda" => Some(VllmDevice::Cuda),
            "cpu" => Some(VllmDevice::Cpu),
            _ => None,
        }
    }

    fn title(self) -> &'static str {
        match self {
            VllmDevice::Rocm => "ROCm",
            VllmDevice::Cuda => "CUDA",
            VllmDevice::Cpu => "CPU",
        }
    }
}

/// The image's vLLM as the plan takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VllmBuild {
    /// major, minor, patch.
    pub version: (u32, u32, u32),
    pub device: VllmDevice,
    /// How the plan knows it, or what it assumed and why.
    pub said: String,
}

impl VllmBuild {
    /// The build `labels` (the head's toolbox's image; None: no such toolbox, or not asked:
    /// `why`) name; what they do not say is assumed, and said.
    pub fn of(labels: Option<&VllmLabels>, why: &str) -> VllmBuild {
        let version = labels.and_then(|l| l.version.as_deref()).and_then(release);
        let device_label = labels.and_then(|l| l.device.as_deref());
        let device = device_label.map_or(Some(VllmDevice::Rocm), VllmDevice::named);
        let (major, minor, patch) = version.unwrap_or(NEWEST);
        let named = format!("vLLM {major}.{minor}.{patch} on {}", device.unwrap_or(VllmDevice::Rocm).title());
        let said = match (labels, version, device) {
            (None, _, _) => format!("{named} assumed: {why}"),
            (Some(_), Some(_), Some(_)) if device_label.is_some() => format!("{named}, as the image's labels say"),
            (Some(_), Some(_), Some(_)) => {
                format!("{named}, as the image's labels say (no {} label: the node's GPU)", crate::labels::DEVICE)
            }
            (Some(labels), _, _) => format!(
                "{named} assumed where the image's labels say {} {} and {} {}",
                crate::labels::VLLM_VERSION,
                labels.version.as_deref().unwrap_or("nothing"),
                crate::labels::DEVICE,
                labels.device.as_deref().unwrap_or("nothing")
            ),
        };
        VllmBuild { version: version.unwrap_or(NEWEST), device: device.unwrap_or(VllmDevice::Rocm), said }
    }

    /// Tokens a KV cache block holds.
    pub fn block_size(&self) -> u64 {
        match self.device {
            VllmDevice::Cpu => 128,
            VllmDevice::Rocm | VllmDevice::Cuda => 16,
        }
    }

    /// `--max-num-batched-tokens` as `vllm serve` defaults it for `world` ranks (TP × PP) on a
    /// device of `device_bytes`.
    pub fn default_max_num_batched_tokens(&self, world: u64, device_bytes: u64) -> u64 {
        match self.device {
            VllmDevice::Cpu => 2048 * world.max(1),
            VllmDevice::Rocm | VllmDevice::Cuda if device_bytes >= 70 * GIB => 8192,
            VllmDevice::Rocm | VllmDevice::Cuda => 2048,
        }
    }

    /// The batches a sliding layer keeps in flight beyond its window, at pipeline parallel `pp`.
    pub fn batches_in_flight(&self, pp: u64) -> u64 {
        if (self.version.0, self.version.1) < IN_FLIGHT_SINCE {
            return 1;
        }
        match self.device {
            VllmDevice::Cpu => pp.max(1),
            VllmDevice::Rocm | VllmDevice::Cuda => pp.max(1) + 1,
        }
    }

    /// The `--kv-cache-dtype` names its attention backends take (of those the plan can size).
    pub fn kv_cache_dtypes(&self) -> &'static [&'static str] {
        match self.device {
            VllmDevice::Cpu => &["auto", "fp8", "fp8_e4m3", "fp8_e5m2"],
            VllmDevice::Rocm => &["auto", "bfloat16", "float16", "fp8", "fp8_e4m3"],
            VllmDevice::Cuda => &["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"],
        }
    }

    /// `vLLM 0.32.0 on CPU`.
    pub fn title(&self) -> String {
        let (major, minor, patch) = self.version;
        format!("vLLM {major}.{minor}.{patch} on {}", self.device.title())
    }
}

/// `0.32.0`, `v0.13.0`, `0.22.1rc1.dev499+g470229c37`: major, minor and patch (0 when absent).
fn release(text: &str) -> Option<(u32, u32, u32)> {
    let text = text.trim().trim_start_matches('v');
    let mut parts = text.split('.').map(|part| {
        let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    let major = parts.next()??;
    let minor = parts.next()??;
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labelled(version: &str, device: &str) -> VllmLabels {
        VllmLabels { version: Some(version.into()), device: Some(device.into()) }
    }

    #[test]
    fn the_image_says_its_vllm_or_the_plan_says_what_it_assumed() {
        let cpu = VllmBuild::of(Some(&labelled("0.32.0", "cpu")), "");
        assert_eq!((cpu.version, cpu.device, cpu.block_size()), ((0, 32, 0), VllmDevice::Cpu, 128));
        assert_eq!(cpu.said, "vLLM 0.32.0 on CPU, as the image's labels say");
        let rocm = VllmBuild::of(Some(&labelled("v0.13.0", "rocm")), "");
        assert_eq!((rocm.version, rocm.block_size()), ((0, 13, 0), 16));
        let dev = VllmBuild::of(Some(&labelled("0.22.1rc1.dev499+g470229c37.d20260613", "ROCm")), "");
        assert_eq!((dev.version, dev.device), ((0, 22, 1), VllmDevice::Rocm));
        let none = VllmBuild::of(None, "the head has no toolbox vllm");
        assert_eq!((none.version, none.device), (NEWEST, VllmDevice::Rocm));
        assert_eq!(none.said, "vLLM 0.32.0 on ROCm assumed: the head has no toolbox vllm");
        // No device label: the node's GPU (labels::DEVICE), ROCm on a Strix Halo.
        let gpu = VllmBuild::of(Some(&VllmLabels { version: Some("v0.13.0".into()), device: None }), "");
        assert_eq!((gpu.version, gpu.device), ((0, 13, 0), VllmDevice::Rocm));
        assert!(gpu
            .said
            .ends_with("as the image's labels say (no io.github.strix-toolbox.device label: the node's GPU)"));
        let odd = VllmBuild::of(Some(&labelled("latest", "tpu")), "");
        assert_eq!(
            odd.said,
            "vLLM 0.32.0 on ROCm assumed where the image's labels say io.github.strix-toolbox.vllm.version latest and \
             io.github.strix-toolbox.device tpu"
        );
    }

    #[test]
    fn batch_defaults_and_tokens_in_flight_by_release_and_device() {
        let cpu = VllmBuild::of(Some(&labelled("0.32.0", "cpu")), "");
        // CPU: 2048 a rank, and no async scheduling: PP batches in flight.
        assert_eq!((cpu.default_max_num_batched_tokens(2, 0), cpu.batches_in_flight(1)), (4096, 1));
        let rocm = VllmBuild::of(Some(&labelled("0.32.0", "rocm")), "");
        assert_eq!(rocm.default_max_num_batched_tokens(1, 128 * GIB), 8192);
        assert_eq!(rocm.default_max_num_batched_tokens(1, 64 * GIB), 2048);
        // GPU: async scheduling keeps one batch more than the pipeline's stages.
        assert_eq!((rocm.batches_in_flight(1), rocm.batches_in_flight(3)), (2, 4));
        let old = VllmBuild::of(Some(&labelled("0.23.0", "rocm")), "");
        assert_eq!(old.batches_in_flight(3), 1, "before vllm#47728: one batch");
        assert!(!rocm.kv_cache_dtypes().contains(&"fp8_e5m2") && cpu.kv_cache_dtypes().contains(&"fp8_e5m2"));
        assert!(!cpu.kv_cache_dtypes().contains(&"bfloat16"), "the CPU backend takes auto, not bfloat16 by name");
    }
}
