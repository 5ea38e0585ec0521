//! The kernel command line the guide sets, and whether its GPU memory sizes agree and took effect.
//! Each parameter has its own check, but one command sets every one that is missing or wrong, and
//! a ttm.pages_limit that disagrees with amdgpu.gttsize (grubby on Fedora; on Debian and Ubuntu
//! the one GRUB_CMDLINE_LINUX line, then update-grub): it is given once, as the fix of the first
//! check that needs it.

use std::cmp::Ordering;

use super::{check, Check, Status};
use crate::host::cmdline::{with_params, REQUIRED_PARAMS};
use crate::host::os::OsFamily;
use crate::host::HostFacts;
use crate::reporter::Bytes;

const MIB: u64 = 1 << 20;
/// amdgpu.gttsize counts MiB, ttm.pages_limit 4 KiB pages.
const PAGES_PER_MIB: u64 = 256;
/// What the guide uses on a 128 GB node.
const GUIDE_GTTSIZE_MIB: u64 = 126976;

pub(super) fn checks(facts: &HostFacts, checks: &mut Vec<Check>) {
    let mut recipe = Recipe::new(facts);
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
        let check_name = format!("kernel:{name}");
        let fix = (status != Status::Pass && recipe.given_on.is_none()).then(|| recipe.fix_for(&check_name));
        checks.push(check(check_name, status, message, fix));
    }
    gtt_checks(facts, &mut recipe, checks);
}

/// What this node's kernel command line needs, and how its distribution sets it.
struct Recipe<'a> {
    facts: &'a HostFacts,
    /// The guide's parameters that are missing or wrong, each with the value it should have.
    params: Vec<(String, String)>,
    /// The ttm.pages_limit that agrees with amdgpu.gttsize, when both are set and disagree.
    pages_limit: Option<(String, String)>,
    /// The check the one fix was given on.
    given_on: Option<String>,
}

impl<'a> Recipe<'a> {
    fn new(facts: &'a HostFacts) -> Recipe<'a> {
        let number = |name: &str| facts.kernel_params.get(name).and_then(|v| v.parse::<u64>().ok());
        let (gtt_mib, pages) = (number("amdgpu.gttsize"), number("ttm.pages_limit"));
        let mut params = Vec::new();
        for (name, wanted) in REQUIRED_PARAMS {
            let value = match (facts.kernel_params.get(name), wanted) {
                (None, Some(want)) => want.to_string(),
                (Some(value), Some(want)) if value != want => want.to_string(),
                // The sizes: the one that agrees with the other, else the guide's for 128 GB.
                (None, None) if name == "amdgpu.gttsize" => {
                    pages.map_or(GUIDE_GTTSIZE_MIB, |pages| pages / PAGES_PER_MIB).to_string()
                }
                (None, None) => gtt_mib.unwrap_or(GUIDE_GTTSIZE_MIB).saturating_mul(PAGES_PER_MIB).to_string(),
                (Some(_), _) => continue,
            };
            params.push((name.to_string(), value));
        }
        let pages_limit = match (gtt_mib, pages) {
            (Some(gtt_mib), Some(pages)) if pages != gtt_mib.saturating_mul(PAGES_PER_MIB) => {
                Some(("ttm.pages_limit".to_string(), gtt_mib.saturating_mul(PAGES_PER_MIB).to_string()))
            }
            _ => None,
        };
        Recipe { facts, params, pages_limit, given_on: None }
    }

    /// The one fix the first time a check needs it; after that, where it is.
    fn fix_for(&mut self, check_name: &str) -> String {
        match &self.given_on {
            Some(first) => format!("the fix under {first} sets it too"),
            None => {
                self.given_on = Some(check_name.to_string());
                self.fix()
            }
        }
    }

    /// The command that makes every change, then the reboot. On Debian and Ubuntu: the whole
    /// GRUB_CMDLINE_LINUX line, with what it holds already.
    fn fix(&self) -> String {
        let changes: Vec<(String, String)> = self.params.iter().chain(&self.pages_limit).cloned().collect();
        let words: Vec<String> = changes.iter().map(|(name, value)| format!("{name}={value}")).collect();
        let words = words.join(" ");
        let grubby = format!("`sudo grubby --update-kernel=ALL --args=\"{words}\"`");
        match self.facts.os.family() {
            OsFamily::Fedora => format!("{grubby}, then reboot"),
            OsFamily::Debian => {
                let current = self.facts.grub_cmdline_linux.as_deref();
                let line = with_params(current.unwrap_or(""), &changes);
                let keep = if current.is_none() { " (after what it holds, if it is there)" } else { "" };
                format!(
                    "in /etc/default/grub make it `GRUB_CMDLINE_LINUX=\"{line}\"`{keep}, then `sudo update-grub` and \
                     reboot"
                )
            }
            OsFamily::Other => format!(
                "add `{words}` to the kernel command line, then reboot (Fedora: {grubby}; Debian and Ubuntu: \
                 GRUB_CMDLINE_LINUX in /etc/default/grub, then `sudo update-grub`)"
            ),
        }
    }
}

/// The guide sizes GPU memory twice: amdgpu.gttsize (how much GTT the driver sets up) and
/// ttm.pages_limit (how much TTM lets it allocate). They must agree, MiB × 256 = pages; and the GTT
/// the driver reports shows whether gttsize took effect (newer kernels size GTT from pages_limit).
fn gtt_checks(facts: &HostFacts, recipe: &mut Recipe, checks: &mut Vec<Check>) {
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
                format!("ttm.pages_limit={pages} matches amdgpu.gttsize={gtt_mib} ({})", Bytes(asked)),
                None,
            ),
            Ordering::Less => (
                Status::Warn,
                format!(
                    "ttm.pages_limit={pages} caps GPU memory at {} but amdgpu.gttsize={gtt_mib} asks for {}",
                    Bytes(allowed),
                    Bytes(asked)
                ),
                Some(format!("set ttm.pages_limit={wanted_pages} (MiB × 256): {}", recipe.fix_for("kernel:gtt-vs-ttm"))),
            ),
            Ordering::Greater => (
                Status::Warn,
                format!(
                    "ttm.pages_limit={pages} ({}) and amdgpu.gttsize={gtt_mib} ({}) disagree: pages should be MiB × 256",
                    Bytes(allowed),
                    Bytes(asked)
                ),
                Some(format!(
                    "set ttm.pages_limit={wanted_pages} (or amdgpu.gttsize={}): {}",
                    pages / PAGES_PER_MIB,
                    recipe.fix_for("kernel:gtt-vs-ttm")
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
            format!("GTT {} as amdgpu.gttsize asks", Bytes(actual)),
            None,
        ));
        return;
    }
    let fix = if pages != Some(wanted_pages) {
        format!(
            "set ttm.pages_limit={wanted_pages} next to amdgpu.gttsize={gtt_mib}: {}",
            recipe.fix_for("kernel:gtt-size")
        )
    } else {
        "`sudo dmesg | grep -i gtt` shows what amdgpu chose and why (a size beyond system memory is cut)".to_string()
    };
    checks.push(check(
        "kernel:gtt-size",
        Status::Warn,
        format!(
            "the GPU has {} of GTT but amdgpu.gttsize={gtt_mib} asks for {}: the parameter did not take effect",
            Bytes(actual),
            Bytes(asked)
        ),
        Some(fix),
    ));
}
