//! The GPU: /dev/kfd, a gfx1151 in the KFD topology, a render node.

use super::{check, Check, Status};
use crate::host::HostFacts;
use crate::reporter::Bytes;

pub(super) fn checks(facts: &HostFacts, checks: &mut Vec<Check>) {
    let gpu = &facts.gpu;
    let load_driver = Some("load the amdgpu driver (`sudo modprobe amdgpu`) on a Strix Halo node".to_string());
    if gpu.kfd.is_none() {
        checks.push(check(
            "gpu",
            Status::Fail,
            "/dev/kfd not found: no ROCm-capable GPU driver is loaded",
            load_driver.clone(),
        ));
    } else if !gpu.gfx_targets.iter().any(|t| t == "gfx1151") {
        let found = if gpu.gfx_targets.is_empty() { "none".to_string() } else { gpu.gfx_targets.join(", ") };
        checks.push(check(
            "gpu",
            Status::Fail,
            format!("no gfx1151 GPU in the KFD topology (found: {found}); the image's kernels are built for gfx1151"),
            Some("run on a Strix Halo (Ryzen AI Max+) node; for another GPU use an image built for its target".into()),
        ));
    } else {
        let memory = match gpu.gtt_bytes {
            Some(gtt) => format!(", GTT {}", Bytes(gtt)),
            None => String::new(),
        };
        checks.push(check("gpu", Status::Pass, format!("gfx1151 GPU at /dev/kfd{memory}"), None));
    }
    if gpu.dri.iter().any(|p| p.to_string_lossy().contains("renderD")) {
        checks.push(check("gpu:render-node", Status::Pass, "render node present under /dev/dri", None));
    } else {
        checks.push(check("gpu:render-node", Status::Fail, "no render node (renderD*) under /dev/dri", load_driver));
    }
}
