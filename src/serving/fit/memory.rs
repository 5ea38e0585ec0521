//! What a node can give a model: on Strix Halo the GPU's memory is the GTT the kernel allows it
//! (`mem_info_gtt_total`, what doctor reads from the amdgpu and TTM parameters), less what is in
//! use now (`mem_info_gtt_used`: another model, the desktop), less a reserve in GiB for the OS and
//! the runtime, less what the operator keeps free for another service. Never a fraction of what
//! HIP reports: HIP may see only the BIOS carve-out.

use serde::{Deserialize, Serialize};

use super::vllm_build::HeadImage;
use crate::error::{Error, Result};
use crate::host::gpu::GpuFacts;
use crate::spec::Transport;

/// GiB kept back on every node unless the operator says otherwise: the OS, the container, the
/// engine's own runtime outside its tensors.
pub const DEFAULT_RESERVE_GIB: u64 = 4;
const GIB: u64 = 1 << 30;

/// The nodes a plan is made for: each one's memory (the head first), the cluster link between
/// them, whether the head's server has a GPU of its own (llama.cpp's `--list-devices`; None:
/// not asked, and the head is taken to have its GPU as every Strix Halo does), what the head's
/// toolbox answered the engine's question (its server's build and devices, for the engine's plan
/// to read; None: not asked), and which build of the engine the head's toolbox image holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FitNodes {
    pub memory: Vec<NodeMemory>,
    pub transport: Transport,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_gpu: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_said: Option<String>,
    /// What the head's toolbox's image says of its engine (the rules its plan follows).
    #[serde(default)]
    pub image: HeadImage,
}

/// One node's memory for a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMemory {
    pub node: String,
    /// GTT the GPU may map (`mem_info_gtt_total`, summed over cards).
    pub gtt_bytes: u64,
    /// GTT in use now (`mem_info_gtt_used`); 0 when the kernel does not say.
    pub gtt_used_bytes: u64,
    pub reserve_bytes: u64,
    /// Kept free for another service (`--keep-free`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kept_free_bytes: u64,
    /// What is left for this model: total less used less the reserve less what is kept free.
    pub usable_bytes: u64,
}

fn is_zero(bytes: &u64) -> bool {
    *bytes == 0
}

impl NodeMemory {
    /// `node`'s memory from its GPU facts, `reserve_gib` kept back, `keep_free_gib` more for
    /// another service.
    pub fn of(node: &str, gpu: &GpuFacts, reserve_gib: u64, keep_free_gib: u64) -> Result<NodeMemory> {
        let Some(gtt_bytes) = gpu.gtt_bytes.filter(|&bytes| bytes > 0) else {
            return Err(Error::host(
                format!("{node}: mem_info_gtt_total"),
                format!("{node}: the GPU's GTT size is unknown (no /sys/class/drm/card*/device/mem_info_gtt_total)"),
                "the amdgpu driver must be loaded for a plan to know the GPU's memory; `strix-toolbox doctor` on the \
                 node says what is missing",
            ));
        };
        let memory = NodeMemory::new(node, gtt_bytes, gpu.gtt_used_bytes.unwrap_or(0), reserve_gib.saturating_mul(GIB));
        Ok(memory.keeping_free(keep_free_gib.saturating_mul(GIB)))
    }

    pub fn new(node: &str, gtt_bytes: u64, gtt_used_bytes: u64, reserve_bytes: u64) -> NodeMemory {
        NodeMemory {
            node: node.to_string(),
            gtt_bytes,
            gtt_used_bytes,
            reserve_bytes,
            kept_free_bytes: 0,
            usable_bytes: gtt_bytes.saturating_sub(gtt_used_bytes).saturating_sub(reserve_bytes),
        }
    }

    /// The same node with `bytes` more kept free for another service.
    pub fn keeping_free(self, bytes: u64) -> NodeMemory {
        NodeMemory {
            kept_free_bytes: self.kept_free_bytes.saturating_add(bytes),
            usable_bytes: self.usable_bytes.saturating_sub(bytes),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_is_the_gtt_less_what_is_used_less_the_reserve() {
        // A 128 GiB node with the kernel's GTT at 120 GiB, 2 GiB in use, 4 GiB kept: 114 GiB.
        let gpu = GpuFacts { gtt_bytes: Some(120 * GIB), gtt_used_bytes: Some(2 * GIB), ..GpuFacts::default() };
        let memory = NodeMemory::of("node1", &gpu, 4, 0).expect("memory");
        assert_eq!(memory.usable_bytes, 114 * GIB);
        assert_eq!((memory.gtt_bytes, memory.gtt_used_bytes, memory.reserve_bytes), (120 * GIB, 2 * GIB, 4 * GIB));
        // What HIP says (the carve-out in vram_bytes) plays no part.
        let carve_out = GpuFacts { vram_bytes: Some(512 << 20), ..gpu.clone() };
        assert_eq!(NodeMemory::of("node1", &carve_out, 4, 0).expect("memory").usable_bytes, 114 * GIB);
        let unknown_use = GpuFacts { gtt_used_bytes: None, ..gpu.clone() };
        assert_eq!(NodeMemory::of("node1", &gpu, DEFAULT_RESERVE_GIB, 0).expect("memory").reserve_bytes, 4 * GIB);
        assert_eq!(NodeMemory::of("node1", &unknown_use, 0, 0).expect("memory").usable_bytes, 120 * GIB);
        // 20 GiB more kept free for another service: 94 GiB for this one.
        let keeping = NodeMemory::of("node1", &gpu, 4, 20).expect("memory");
        assert_eq!((keeping.usable_bytes, keeping.kept_free_bytes), (94 * GIB, 20 * GIB));
        assert_eq!(NodeMemory::new("small", GIB, 2 * GIB, GIB).usable_bytes, 0);
    }

    #[test]
    fn a_node_without_a_gtt_size_is_a_host_error_with_its_fix() {
        let error = NodeMemory::of("node2", &GpuFacts::default(), 4, 0).expect_err("no GTT");
        let text = error.to_string();
        assert!(text.contains("node2") && text.contains("mem_info_gtt_total") && text.contains("doctor"), "{text}");
    }
}
