//! The kernel command line the guide sets, and whether its GPU memory sizes agree and took effect.

use std::cmp::Ordering;

use super::{check, gib, Check, Status};
use crate::host::cmdline::REQUIRED_PARAMS;
use crate::host::HostFacts;

const GRUB_FIX: &str = "add it to GRUB_CMDLINE_LINUX in /etc/default/grub, then \
    `sudo grub2-mkconfig -o /boot/grub2/grub.cfg` (Fedora) or `sudo update-grub` (Debian/Ubuntu) and reboot";

const MIB: u64 = 1 << 20;
/// amdgpu.gttsize counts MiB, ttm.pages_limit 4 KiB pages.
const PAGES_PER_MIB: u64 = 256;

pub(super) fn checks(facts: &HostFacts, checks: &mut Vec<Check>) {
    for (name, wanted) in REQUIRED_PARAMS {
        let found = facts.kernel_params.get(name);
        let (status, message) = match (found, wanted) {
            (None, Some(value)) => (Status::Warn, format!("{name}={value} is not on the kernel command line")),
            (None, None) => (Status::Warn, format!("{name} is not set on the kernel command line")),
            (Some(value), Some(want)) if value != want => (
                Status::Warn,
                format!("{name}={value} on the kernel command line; the cluster guide wants {name}={want}"),
            ),
            (Some(value), _) => (Status::Pass, format!("{name}={value}")),
        };
        let fix = (status != Status::Pass).then(|| {
            let example = wanted.map_or_else(|| example_value(name), str::to_string);
            format!("{name}={example}: {GRUB_FIX}")
        });
        checks.push(check(format!("kernel:{name}"), status, message, fix));
    }
    gtt_checks(facts, checks);
}

/// The guide sizes GPU memory twice: amdgpu.gttsize (how much GTT the driver sets up) and
/// ttm.pages_limit (how much TTM lets it allocate). They must agree, MiB × 256 = pages; and the GTT
/// the driver reports shows whether gttsize took effect (newer kernels size GTT from pages_limit).
fn gtt_checks(facts: &HostFacts, checks: &mut Vec<Check>) {
    let number = |name: &str| facts.kernel_params.get(name).and_then(|v| v.parse::<u64>().ok());
    // A missing gttsize was reported above; without it there is nothing to compare.
    let Some(gtt_mib) = number("amdgpu.gttsize") else { return };
    let asked = gtt_mib.saturating_mul(MIB);
    let wanted_pages = gtt_mib.saturating_mul(PAGES_PER_MIB);
    let pages = number("ttm.pages_limit");

    if let Some(pages) = pages {
        let allowed = pages.saturating_mul(4096);
        let (status, message, fix) = match pages.cmp(&wanted_pages) {
            Ordering::Equal => (
                Status::Pass,
                format!("ttm.pages_limit={pages} matches amdgpu.gttsize={gtt_mib} ({})", gib(asked)),
                None,
            ),
            Ordering::Less => (
                Status::Warn,
                format!(
                    "ttm.pages_limit={pages} caps GPU memory at {} but amdgpu.gttsize={gtt_mib} asks for {}",
                    gib(allowed),
                    gib(asked)
                ),
                Some(format!("set ttm.pages_limit={wanted_pages} (MiB × 256): {GRUB_FIX}")),
            ),
            Ordering::Greater => (
                Status::Warn,
                format!(
                    "ttm.pages_limit={pages} ({}) and amdgpu.gttsize={gtt_mib} ({}) disagree: pages should be MiB × 256",
                    gib(allowed),
                    gib(asked)
                ),
                Some(format!(
                    "set ttm.pages_limit={wanted_pages} (or amdgpu.gttsize={}): {GRUB_FIX}",
                    pages / PAGES_PER_MIB
                )),
            ),
        };
        checks.push(check("kernel:gtt-vs-ttm", status, message, fix));
    }

    let Some(actual) = facts.gpu.gtt_bytes else { return };
    if actual >= asked {
        checks.push(check(
            "kernel:gtt-size",
            Status::Pass,
            format!("GTT {} as amdgpu.gttsize asks", gib(actual)),
            None,
        ));
        return;
    }
    let fix = if pages != Some(wanted_pages) {
        format!("set ttm.pages_limit={wanted_pages} next to amdgpu.gttsize={gtt_mib}: {GRUB_FIX}")
    } else {
        "`sudo dmesg | grep -i gtt` shows what amdgpu chose and why (a size beyond system memory is cut)".to_string()
    };
    checks.push(check(
        "kernel:gtt-size",
        Status::Warn,
        format!(
            "the GPU has {} of GTT but amdgpu.gttsize={gtt_mib} asks for {}: the parameter did not take effect",
            gib(actual),
            gib(asked)
        ),
        Some(fix),
    ));
}

/// What the guide uses on a 128 GB node.
fn example_value(name: &str) -> String {
    match name {
        "amdgpu.gttsize" => "126976".into(),
        "ttm.pages_limit" => "32505856".into(),
        _ => "VALUE".into(),
    }
}
