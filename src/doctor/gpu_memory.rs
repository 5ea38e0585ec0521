//! What the GPU runtime reports as its memory, beside what the GPU can really map, and which of
//! them the model-aware plan counts. On Strix Halo, HIP's `hipMemGetInfo` and
//! `hipGetDeviceProperties` have reported only the VRAM aperture, the BIOS carve-out
//! (`mem_info_vram_total`), not the GTT the GPU maps from system memory (ROCm/hip#3892; HIP with
//! ROCm/rocm-systems#5596 adds the GTT when it is the larger): a tool that sizes a model by HIP's
//! figure (vLLM's memory check, vllm#40963) sees a few GiB where there are a hundred. The plan
//! counts the GTT (`mem_info_gtt_total`), less what is in use now, less a reserve. With a carve-out
//! larger than the GTT the kernel keeps allocations in the carve-out, and the plan's figure is
//! then wrong: the fix is the carve-out at its minimum and a large GTT.

use super::{check, Check, Status};
use crate::host::gpu::GpuFacts;
use crate::reporter::Bytes;

/// The plan's figures for this node, as the plan computes them (the doctor's caller hands them
/// down: the plan stands on a higher floor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FitMemory {
    pub gtt_used_bytes: u64,
    pub reserve_bytes: u64,
    pub usable_bytes: u64,
}

const NAME: &str = "gpu:memory";

pub(super) fn checks(gpu: &GpuFacts, plan: Option<FitMemory>, checks: &mut Vec<Check>) {
    // No GPU: the gpu check says so, and there is no memory to speak of.
    if gpu.kfd.is_none() {
        return;
    }
    let (Some(gtt), Some(plan)) = (gpu.gtt_bytes.filter(|&bytes| bytes > 0), plan) else {
        checks.push(check(
            NAME,
            Status::Warn,
            "the GPU's GTT size is unknown (no /sys/class/drm/card*/device/mem_info_gtt_total): a launch cannot \
             plan how much of a model fits here",
            Some("load the amdgpu driver (`sudo modprobe amdgpu`); the kernel checks say what sets the GTT".into()),
        ));
        return;
    };
    let planned = format!(
        "the plan counts the GTT: {} less {} in use less a {} reserve = {} for a model",
        Bytes(gtt),
        Bytes(plan.gtt_used_bytes),
        Bytes(plan.reserve_bytes),
        Bytes(plan.usable_bytes)
    );
    match gpu.vram_bytes {
        _ if plan.usable_bytes == 0 => checks.push(check(
            NAME,
            Status::Warn,
            format!("{planned}: no model fits here"),
            Some(
                "raise the GTT with the kernel parameters the kernel checks name (amdgpu.gttsize, ttm.pages_limit), \
                 or free the GPU memory in use (`strix-toolbox status` says what serves here)"
                    .into(),
            ),
        )),
        Some(vram) if vram > gtt => checks.push(check(
            NAME,
            Status::Warn,
            format!(
                "the VRAM carve-out ({}) is larger than the GTT ({}): the kernel then keeps the GPU's allocations in \
                 the carve-out, and {planned}, which is not what the GPU gets",
                Bytes(vram),
                Bytes(gtt)
            ),
            Some(
                "set the iGPU memory (UMA frame buffer) to its minimum, 512 MB, in the BIOS, and a large GTT with \
                 the kernel parameters the kernel checks name (amdgpu.gttsize, ttm.pages_limit)"
                    .into(),
            ),
        )),
        Some(vram) => checks.push(check(
            NAME,
            Status::Info,
            format!(
                "HIP may report {} (the VRAM carve-out, mem_info_vram_total: ROCm/hip#3892) where the GPU maps {} of \
                 GTT; {planned}",
                Bytes(vram),
                Bytes(gtt)
            ),
            None,
        )),
        None => checks.push(check(
            NAME,
            Status::Info,
            format!("the VRAM carve-out is unknown (no mem_info_vram_total); {planned}"),
            None,
        )),
    }
}
