//! The memlock limit from /proc/self/limits: RDMA pins memory, so it must be unlimited. And a
//! process's own limits (`/proc/PID/`): whether the processes it starts may be given more.

use serde::{Deserialize, Serialize};

use super::HostRoot;

/// CAP_SYS_RESOURCE's bit in `/proc/PID/status`'s `CapEff` (linux/capability.h).
const CAP_SYS_RESOURCE: u32 = 24;

/// Soft and hard limits in bytes; `None` means unlimited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memlock {
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

impl Memlock {
    pub fn hard_is_unlimited(&self) -> bool {
        self.hard.is_none()
    }
}

/// What a process may give the processes it starts: their hard limits may go past its own only
/// when it may raise them, which setrlimit(2) allows with CAP_SYS_RESOURCE in the initial user
/// namespace alone (kernel/sys.c asks `capable()`): not in a rootless engine's namespace, not in a
/// container started without it (this project's test machines: hard memlock 8 MiB).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessLimits {
    pub memlock: Memlock,
    /// It holds CAP_SYS_RESOURCE in the initial user namespace.
    pub raises: bool,
}

/// The limits of the process whose `/proc` directory is `proc_dir` (`/proc/1234`) on the node
/// `root` holds; None when it is not there (another pid namespace, a fake tree without it) or its
/// limits cannot be read.
pub fn read_process(root: &HostRoot, proc_dir: &str) -> Option<ProcessLimits> {
    let memlock = parse_memlock(&root.read(format!("{proc_dir}/limits")).ok()??).ok()?;
    let status = root.read(format!("{proc_dir}/status")).ok().flatten().unwrap_or_default();
    let uid_map = root.read(format!("{proc_dir}/uid_map")).ok().flatten().unwrap_or_default();
    Some(ProcessLimits { memlock, raises: has_capability(&status, CAP_SYS_RESOURCE) && initial_namespace(&uid_map) })
}

/// `CapEff:` of a `/proc/PID/status` has capability `bit`.
fn has_capability(status: &str, bit: u32) -> bool {
    let effective = status.lines().find_map(|line| line.strip_prefix("CapEff:")).map(str::trim);
    effective.and_then(|hex| u64::from_str_radix(hex, 16).ok()).is_some_and(|caps| caps >> bit & 1 == 1)
}

/// A `uid_map` that maps every id to itself: the initial user namespace's.
fn initial_namespace(uid_map: &str) -> bool {
    let fields: Vec<&str> = uid_map.split_whitespace().collect();
    fields == ["0", "0", "4294967295"]
}

/// Why /proc/self/limits gave no memlock limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    #[error("no \"Max locked memory\" line")]
    NoMemlockLine,
    #[error("{which} memlock limit missing")]
    Missing { which: &'static str },
    #[error("{which} memlock limit is not a number: {value:?}")]
    NotANumber { which: &'static str, value: String },
}

/// Parse the "Max locked memory" line.
pub fn parse_memlock(limits: &str) -> Result<Memlock, LimitsError> {
    let line = limits.lines().find(|l| l.starts_with("Max locked memory")).ok_or(LimitsError::NoMemlockLine)?;
    let mut columns = line["Max locked memory".len()..].split_whitespace();
    let mut limit = |which: &'static str| -> Result<Option<u64>, LimitsError> {
        match columns.next() {
            Some("unlimited") => Ok(None),
            Some(value) => {
                value.parse().map(Some).map_err(|_| LimitsError::NotANumber { which, value: value.to_string() })
            }
            None => Err(LimitsError::Missing { which }),
        }
    };
    Ok(Memlock { soft: limit("soft")?, hard: limit("hard")? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_limits() {
        let text = "Limit                     Soft Limit           Hard Limit           Units\n\
                    Max locked memory         8388608              unlimited            bytes\n";
        assert_eq!(parse_memlock(text).unwrap(), Memlock { soft: Some(8388608), hard: None });
        let error = parse_memlock("Max locked memory  lots  unlimited bytes").unwrap_err();
        assert_eq!(error.to_string(), "soft memlock limit is not a number: \"lots\"");
        assert_eq!(parse_memlock("Max locked memory  1024").unwrap_err(), LimitsError::Missing { which: "hard" });
        assert_eq!(parse_memlock("nothing here").unwrap_err(), LimitsError::NoMemlockLine);
    }

    /// A `/proc/PID` under a fake node's root.
    fn process(status_caps: &str, uid_map: &str, memlock: &str) -> (tempfile::TempDir, HostRoot) {
        let dir = tempfile::tempdir().unwrap();
        let proc_dir = dir.path().join("proc/4242");
        std::fs::create_dir_all(&proc_dir).unwrap();
        let limits = format!("Limit                     Soft Limit           Hard Limit           Units\n{memlock}\n");
        std::fs::write(proc_dir.join("limits"), limits).unwrap();
        std::fs::write(proc_dir.join("status"), format!("Name:\tpodman\nCapEff:\t{status_caps}\n")).unwrap();
        std::fs::write(proc_dir.join("uid_map"), uid_map).unwrap();
        let root = HostRoot::open(dir.path()).unwrap();
        (dir, root)
    }

    #[test]
    fn a_process_raises_limits_with_cap_sys_resource_in_the_initial_namespace_only() {
        const CAPPED: &str = "Max locked memory         8388608              8388608              bytes";
        const INITIAL: &str = "         0          0 4294967295\n";
        // Root on a host: every capability.
        let (_dir, root) = process("000001ffffffffff", INITIAL, CAPPED);
        let limits = read_process(&root, "/proc/4242").unwrap();
        assert_eq!(
            limits,
            ProcessLimits { memlock: Memlock { soft: Some(8 << 20), hard: Some(8 << 20) }, raises: true }
        );
        // Root in a container without CAP_SYS_RESOURCE (this machine's CapEff).
        let (_dir, root) = process("000001fffeffffff", INITIAL, CAPPED);
        assert!(!read_process(&root, "/proc/4242").unwrap().raises);
        // A rootless engine: every capability, in a namespace of its own.
        let (_dir, root) = process("000001ffffffffff", "         0       1000          1\n", CAPPED);
        assert!(!read_process(&root, "/proc/4242").unwrap().raises);
        assert_eq!(read_process(&root, "/proc/1"), None, "not there");
    }

    #[test]
    fn this_process_reads_as_itself() {
        let mine = read_process(&HostRoot::system(), "/proc/self").expect("this process's own /proc");
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
        assert_eq!(mine.memlock, parse_memlock(&limits).unwrap());
    }
}
