//! GPU hangs as the kernel tells them: amdgpu's lines in the kernel's log (`/dev/kmsg` under the
//! node's host root), grouped into hangs, each with the line that began it and how its reset
//! went. On Strix Halo, after running out of memory, a hang is what users meet most: MES stops
//! answering (ROCm's legacy-rocm-build issues 5724 and 5745, rocm-libraries issue 1132) and the
//! driver resets the GPU. The lines, as amdgpu words them (drivers/gpu/drm/amd/amdgpu):
//! - a hang: `MES failed to respond to msg=REMOVE_QUEUE` (mes_v11_0.c; before, `MES failed to
//!   response msg=N`), `MES might be in unrecoverable state, issue a GPU reset`, `ring gfx_0.0.0
//!   timeout, signaled seq=…` (amdgpu_job.c), `[gfxhub] page fault (src_id:0 ring:24 …)`
//!   (gmc_v11_0.c, `[mmhub]` alike);
//! - its reset: `GPU reset begin!` (amdgpu_device.c's amdgpu_device_gpu_recover; newer kernels add
//!   `. Source: N`), ended by `GPU reset(N) succeeded!` or `GPU reset(N) failed` (the same file's
//!   amdgpu_device_sched_resume, or gpu_recover in older kernels; `GPU reset succeeded, trying to
//!   resume` comes before the resume, which may still fail, and does not end it).
//!
//! `/dev/kmsg` gives one record per read, `PRIORITY,SEQUENCE,MICROSECONDS,FLAGS;TEXT`, followed by
//! ` KEY=VALUE` lines (Documentation/ABI/testing/dev-kmsg); a test's host tree holds the same
//! records in a plain file. Its sequence numbers grow for the whole boot: whoever reads it again
//! tells a new hang from one seen by its number.

use std::io::Read;

use serde::{Deserialize, Serialize};

use super::HostRoot;

/// Where the kernel's log is read.
pub const KMSG: &str = "/dev/kmsg";
/// The most of the kernel's log read at once (its buffer is 2^CONFIG_LOG_BUF_SHIFT bytes, 128 KiB
/// to a few MiB in distributions' kernels; a record's text, more than that).
const READ_LIMIT: usize = 16 << 20;
/// The hangs kept, the newest: a node whose GPU hung more often this boot says the last ones.
const HANGS_KEPT: usize = 16;
/// Hang lines this far apart with no reset between them (page faults alone) are two hangs.
const QUIET_MICROSECONDS: u64 = 60_000_000;

/// One hang of a GPU: the kernel's first line of it, and its reset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuHang {
    /// The kernel's sequence number of its first line: higher is later, within one boot.
    pub seq: u64,
    /// When, in microseconds since the boot.
    pub at_microseconds: u64,
    /// The kernel's line that began it (`amdgpu 0000:c5:00.0: amdgpu: MES failed to respond …`).
    pub line: String,
    pub reset: GpuReset,
}

/// How far a hang's reset went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reset", content = "line", rename_all = "kebab-case")]
pub enum GpuReset {
    /// No reset began (page faults the process died of; the GPU went on).
    None,
    /// `GPU reset begin!`, not ended yet: the GPU cannot run anything until it ends.
    Underway(String),
    /// `GPU reset(N) succeeded!`.
    Succeeded(String),
    /// `GPU reset(N) failed`: the GPU needs the node rebooted.
    Failed(String),
}

impl GpuReset {
    fn ended(&self) -> bool {
        matches!(self, GpuReset::Succeeded(_) | GpuReset::Failed(_))
    }
}

/// What one amdgpu line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Said {
    Hang,
    ResetBegin,
    ResetSucceeded,
    ResetFailed,
}

fn said(text: &str) -> Option<Said> {
    if !text.contains("amdgpu") {
        return None;
    }
    let reset_ended = |outcome: &str| {
        text.split_once("GPU reset(")
            .is_some_and(|(_, rest)| rest.split_once(')').is_some_and(|(_, after)| after.starts_with(outcome)))
    };
    if text.contains("GPU reset begin!") {
        Some(Said::ResetBegin)
    } else if reset_ended(" succeeded!") {
        Some(Said::ResetSucceeded)
    } else if reset_ended(" failed") || text.contains("GPU reset end with ret =") {
        Some(Said::ResetFailed)
    } else if text.contains("MES failed to respond to msg=")
        || text.contains("MES failed to response msg=")
        || text.contains("MES might be in unrecoverable state")
        || (text.contains("] page fault (src_id:") && (text.contains("[gfxhub]") || text.contains("[mmhub]")))
        || text.contains(" timeout, signaled seq=")
    {
        Some(Said::Hang)
    } else {
        None
    }
}

/// One record of the kernel's log: its sequence number, its time, its text.
fn record(line: &str) -> Option<(u64, u64, &str)> {
    let (prefix, text) = line.split_once(';')?;
    let mut fields = prefix.split(',');
    let _priority: u32 = fields.next()?.parse().ok()?;
    let seq = fields.next()?.parse().ok()?;
    let microseconds = fields.next()?.parse().ok()?;
    Some((seq, microseconds, text))
}

/// The GPU hangs the kernel's log `text` tells, oldest first, the newest [`HANGS_KEPT`].
pub fn hangs(text: &str) -> Vec<GpuHang> {
    let mut hangs: Vec<GpuHang> = Vec::new();
    let mut last_line_at = 0;
    for (seq, at, text) in text.lines().filter_map(record) {
        let Some(what) = said(text) else { continue };
        let open = hangs.last_mut().filter(|hang| {
            !hang.reset.ended()
                && (hang.reset != GpuReset::None || at.saturating_sub(last_line_at) < QUIET_MICROSECONDS)
        });
        match (what, open) {
            (Said::Hang, Some(_)) => {}
            (Said::ResetBegin, Some(hang)) => hang.reset = GpuReset::Underway(text.to_string()),
            (Said::ResetSucceeded, Some(hang)) => hang.reset = GpuReset::Succeeded(text.to_string()),
            (Said::ResetFailed, Some(hang)) => hang.reset = GpuReset::Failed(text.to_string()),
            (what, None) => {
                // A reset's end whose beginning the log no longer holds is a hang all the same.
                let reset = match what {
                    Said::Hang => GpuReset::None,
                    Said::ResetBegin => GpuReset::Underway(text.to_string()),
                    Said::ResetSucceeded => GpuReset::Succeeded(text.to_string()),
                    Said::ResetFailed => GpuReset::Failed(text.to_string()),
                };
                hangs.push(GpuHang { seq, at_microseconds: at, line: text.to_string(), reset });
            }
        }
        last_line_at = at;
    }
    let drop = hangs.len().saturating_sub(HANGS_KEPT);
    hangs.drain(..drop);
    hangs
}

/// The GPU hangs of this boot, from the kernel's log under `root`; `Err` says why it could not be
/// read (none to read: Ok and empty).
pub fn read(root: &HostRoot) -> Result<Vec<GpuHang>, String> {
    let path = root.path(KMSG);
    let text = match read_kmsg(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(format!(
                "{}: {e}: GPU hangs are not seen (kernel.dmesg_restrict lets root alone read the kernel's log; \
                 run the node's strix-toolbox as root, or set kernel.dmesg_restrict=0)",
                path.display()
            ))
        }
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    Ok(hangs(&text))
}

/// Everything the log holds now: `/dev/kmsg` gives a record per read and EAGAIN at its end (it
/// would wait for the next one otherwise), EPIPE for a record overwritten while it was read (the
/// next read goes on); a plain file ends.
fn read_kmsg(path: &std::path::Path) -> std::io::Result<String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let mut text = Vec::new();
    let mut buffer = vec![0u8; 8192];
    while text.len() < READ_LIMIT {
        match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => text.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(String::from_utf8_lossy(&text).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ROCm legacy-rocm-build issue 5724 (Strix Halo, MES 0x83), as `/dev/kmsg` records.
    const MES_HANG: &str = "\
6,2000,292487846,-;userif-5: sent link up event.
3,2001,950818166,-;amdgpu 0000:c5:00.0: amdgpu: MES failed to respond to msg=REMOVE_QUEUE
 SUBSYSTEM=pci
 DEVICE=+pci:0000:c5:00.0
3,2002,950818171,-;amdgpu 0000:c5:00.0: amdgpu: failed to remove hardware queue from MES, doorbell=0x1802
3,2003,950818174,-;amdgpu 0000:c5:00.0: amdgpu: MES might be in unrecoverable state, issue a GPU reset
4,2004,950818199,-;amdgpu 0000:c5:00.0: amdgpu: GPU reset begin!. Source:  3
3,2005,952916113,-;amdgpu 0000:c5:00.0: amdgpu: MES failed to respond to msg=REMOVE_QUEUE
6,2006,953500000,-;amdgpu 0000:c5:00.0: amdgpu: GPU reset succeeded, trying to resume
";
    const RESET_DONE: &str = "6,2007,953577619,-;amdgpu 0000:c5:00.0: amdgpu: GPU reset(1) succeeded!\n";

    #[test]
    fn a_mes_hang_is_one_hang_underway_until_its_reset_has_succeeded() {
        let underway = hangs(MES_HANG);
        assert_eq!(underway.len(), 1, "{underway:?}");
        let hang = &underway[0];
        assert_eq!((hang.seq, hang.at_microseconds), (2001, 950_818_166));
        assert_eq!(hang.line, "amdgpu 0000:c5:00.0: amdgpu: MES failed to respond to msg=REMOVE_QUEUE");
        assert_eq!(
            hang.reset,
            GpuReset::Underway("amdgpu 0000:c5:00.0: amdgpu: GPU reset begin!. Source:  3".into()),
            "`trying to resume` does not end it"
        );
        let done = hangs(&format!("{MES_HANG}{RESET_DONE}"));
        assert_eq!(done[0].reset, GpuReset::Succeeded("amdgpu 0000:c5:00.0: amdgpu: GPU reset(1) succeeded!".into()));
        let failed = hangs(&format!("{MES_HANG}6,2007,953577619,-;amdgpu 0000:c5:00.0: amdgpu: GPU reset(1) failed\n"));
        assert!(matches!(&failed[0].reset, GpuReset::Failed(line) if line.ends_with("GPU reset(1) failed")));
    }

    #[test]
    fn page_faults_alone_are_a_hang_without_a_reset_and_a_later_burst_another() {
        // ROCm legacy-rocm-build issue 5745: a burst of gfxhub page faults, no reset.
        let burst = "\
3,10,1000000,-;amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32771)
3,11,1000010,-;amdgpu 0000:c1:00.0: amdgpu:  Process python pid 523991 thread python pid 523991
3,12,1000020,-;amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32771)
3,13,900000000,-;amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32772)
";
        let found = hangs(burst);
        assert_eq!(
            found.iter().map(|h| (h.seq, h.reset.clone())).collect::<Vec<_>>(),
            [(10, GpuReset::None), (13, GpuReset::None)]
        );
    }

    #[test]
    fn a_reset_whose_beginning_scrolled_out_is_a_hang_and_other_lines_are_nothing() {
        let found = hangs(RESET_DONE);
        assert_eq!((found.len(), found[0].seq), (1, 2007));
        assert!(hangs("6,1,5,-;amdgpu 0000:c5:00.0: amdgpu: SMU is resumed successfully!\n6,2,6,-;not a record\n")
            .is_empty());
        assert!(hangs("3,1,5,-;nvme nvme0: I/O 12 timeout, reset controller\n").is_empty(), "not amdgpu's");
    }

    #[test]
    fn this_machines_kernel_log_is_read_to_its_end_without_waiting() {
        // The real character device: a record per read, EAGAIN at the end (never a wait).
        match read_kmsg(std::path::Path::new(KMSG)) {
            Ok(text) => assert!(text.lines().filter_map(record).count() > 0, "no record parsed: {text:.200}"),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                assert!(read(&HostRoot::system()).unwrap_err().contains("dmesg_restrict"));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("{KMSG}: {e}"),
        }
    }

    #[test]
    fn the_log_is_read_under_the_host_root_and_none_is_no_hang() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::open(dir.path()).unwrap();
        assert_eq!(read(&root), Ok(Vec::new()), "no kernel log in the tree");
        std::fs::create_dir_all(dir.path().join("dev")).unwrap();
        std::fs::write(dir.path().join("dev/kmsg"), MES_HANG).unwrap();
        assert_eq!(read(&root).unwrap().len(), 1);
    }
}
