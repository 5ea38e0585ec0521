//! GPU facts: /dev/kfd, /dev/dri, gfx targets from the KFD topology, GTT and VRAM sizes.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::devices::{char_devices_under, is_char_device};
use super::HostRoot;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuFacts {
    /// `/dev/kfd` when it is present (the ROCm compute interface).
    pub kfd: Option<PathBuf>,
    /// Every character device under /dev/dri (cards and render nodes).
    pub dri: Vec<PathBuf>,
    /// gfx targets of the GPU nodes in the KFD topology, e.g. "gfx1151".
    pub gfx_targets: Vec<String>,
    /// Total GTT (system memory the GPU may map), summed over cards.
    pub gtt_bytes: Option<u64>,
    /// Total dedicated VRAM (the BIOS carve-out on an APU), summed over cards.
    pub vram_bytes: Option<u64>,
    /// GTT in use now (`mem_info_gtt_used`), summed over cards: what a running model already holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gtt_used_bytes: Option<u64>,
    /// VRAM in use now (`mem_info_vram_used`), summed over cards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_used_bytes: Option<u64>,
}

const TOPOLOGY: &str = "/sys/class/kfd/kfd/topology/nodes";

pub fn read(root: &HostRoot, warnings: &mut Vec<String>) -> GpuFacts {
    let kfd = is_char_device(root, "/dev/kfd").then(|| PathBuf::from("/dev/kfd"));
    let dri = char_devices_under(root, "/dev/dri");

    let mut gfx_targets = Vec::new();
    for node in root.list(TOPOLOGY) {
        let path = format!("{TOPOLOGY}/{node}/properties");
        let Some(properties) = root.attribute(&path) else { continue };
        match gfx_target_of(&properties) {
            Ok(Some(target)) if !gfx_targets.contains(&target) => gfx_targets.push(target),
            Ok(_) => {}
            Err(why) => warnings.push(format!("{path}: {why}")),
        }
    }
    gfx_targets.sort();

    let (mut gtt_bytes, mut vram_bytes, mut gtt_used_bytes, mut vram_used_bytes) = (None, None, None, None);
    for card in root.list("/sys/class/drm").into_iter().filter(|c| is_card(c)) {
        for (file, total) in [
            ("mem_info_gtt_total", &mut gtt_bytes),
            ("mem_info_vram_total", &mut vram_bytes),
            ("mem_info_gtt_used", &mut gtt_used_bytes),
            ("mem_info_vram_used", &mut vram_used_bytes),
        ] {
            let path = format!("/sys/class/drm/{card}/device/{file}");
            let Some(text) = root.attribute(&path) else { continue };
            match text.parse::<u64>() {
                Ok(bytes) => *total = Some(total.unwrap_or(0) + bytes),
                Err(_) => warnings.push(format!("{path}: expected a byte count, found {text:?}")),
            }
        }
    }
    GpuFacts { kfd, dri, gfx_targets, gtt_bytes, vram_bytes, gtt_used_bytes, vram_used_bytes }
}

/// "card0" but not the connector entries like "card0-DP-1".
pub(super) fn is_card(name: &str) -> bool {
    name.strip_prefix("card").is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// A topology node's `gfx_target_version` that is not a number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("gfx_target_version is not a number: {0:?}")]
pub struct BadGfxTargetVersion(pub String);

/// The gfx target named by a topology node's `gfx_target_version` line; None for CPU nodes (0).
pub fn gfx_target_of(properties: &str) -> Result<Option<String>, BadGfxTargetVersion> {
    let Some(line) = properties.lines().find(|l| l.starts_with("gfx_target_version ")) else {
        return Ok(None);
    };
    let value = line["gfx_target_version ".len()..].trim();
    let version: u32 = value.parse().map_err(|_| BadGfxTargetVersion(value.to_string()))?;
    Ok(gfx_name(version))
}

/// 110501 → gfx1151, 90010 → gfx90a: major, then minor and stepping as hex digits.
pub fn gfx_name(version: u32) -> Option<String> {
    if version == 0 {
        return None;
    }
    let (major, minor, stepping) = (version / 10000, (version / 100) % 100, version % 100);
    Some(format!("gfx{major}{minor:x}{stepping:x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_gfx_targets() {
        assert_eq!(gfx_name(110501).as_deref(), Some("gfx1151"));
        assert_eq!(gfx_name(110000).as_deref(), Some("gfx1100"));
        assert_eq!(gfx_name(90010).as_deref(), Some("gfx90a"));
        assert_eq!(gfx_name(90402).as_deref(), Some("gfx942"));
        assert_eq!(gfx_name(0), None);
    }

    #[test]
    fn reads_properties() {
        let props = "cpu_cores_count 0\ngfx_target_version 110501\nvendor_id 4098\n";
        assert_eq!(gfx_target_of(props).unwrap().as_deref(), Some("gfx1151"));
        assert_eq!(gfx_target_of("gfx_target_version 0\n").unwrap(), None);
        let error = gfx_target_of("gfx_target_version banana\n").unwrap_err();
        assert_eq!(error.to_string(), "gfx_target_version is not a number: \"banana\"");
    }

    #[test]
    fn cards_not_connectors() {
        assert!(is_card("card0") && is_card("card12"));
        assert!(!is_card("card0-DP-1") && !is_card("renderD128") && !is_card("card"));
    }
}
