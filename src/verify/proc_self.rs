//! What a process started in the toolbox sees of itself — its environment, limits and groups —
//! read by one `cat` of its own /proc/self files, so three checks cost one exec.
//!
//! `environ` comes first: its entries each end in a NUL, which text files never hold, so the last
//! NUL splits the output into the environment and the text of `limits` and `status` (whose
//! parsers each find their own lines).

use std::collections::BTreeMap;

use super::probe::Ran;
use crate::check::Status;

/// The command: `cat` reads /proc/self of the `cat` process itself, started as every process in
/// the toolbox is.
pub const COMMAND: [&str; 4] = ["cat", "/proc/self/environ", "/proc/self/limits", "/proc/self/status"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcSelf {
    pub environment: BTreeMap<String, String>,
    /// /proc/self/limits followed by /proc/self/status.
    pub limits_and_status: String,
}

/// Why there is nothing to judge: every check that needed it reports this, under its own name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unread {
    pub status: Status,
    pub message: String,
}

/// What `cat` printed, or why it could not be read.
pub fn read(ran: Ran) -> Result<ProcSelf, Unread> {
    match ran {
        Ran::Exited(0, stdout, _) => Ok(parse(&stdout)),
        Ran::Exited(code, _, stderr) => Err(Unread {
            status: Status::Fail,
            message: format!("cannot read /proc/self inside (cat exit {code}): {}", stderr.trim()),
        }),
        Ran::Missing(why) => Err(Unread { status: Status::Skipped, message: why }),
        Ran::Broken(why) => Err(Unread { status: Status::Fail, message: why }),
    }
}

pub fn parse(output: &str) -> ProcSelf {
    let (environ, text) = output.rsplit_once('\0').unwrap_or(("", output));
    let environment = environ
        .split('\0')
        .filter_map(|entry| entry.split_once('='))
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect();
    ProcSelf { environment, limits_and_status: text.to_string() }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// /proc/self/limits as recorded in a podman container on the testbed (Linux 6.18, whose
    /// hard memlock limit of 8 MiB cannot be raised).
    pub const LIMITS_8MIB: &str = "\
Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max file size             unlimited            unlimited            bytes     
Max data size             unlimited            unlimited            bytes     
Max stack size            8388608              unlimited            bytes     
Max core file size        0                    unlimited            bytes     
Max resident set          unlimited            unlimited            bytes     
Max processes             1024                 1024                 processes 
Max open files            1024                 1024                 files     
Max locked memory         8388608              8388608              bytes     
Max address space         unlimited            unlimited            bytes     
Max file locks            unlimited            unlimited            locks     
Max pending signals       96365                96365                signals   
Max msgqueue size         819200               819200               bytes     
Max nice priority         0                    0                    
Max realtime priority     0                    0                    
Max realtime timeout      unlimited            unlimited            us        
";

    /// The same with memlock unlimited, as the kernel prints an unlimited limit.
    pub fn limits_unlimited() -> String {
        LIMITS_8MIB.replace(
            "Max locked memory         8388608              8388608              bytes",
            "Max locked memory         unlimited            unlimited            bytes",
        )
    }

    /// The start of /proc/self/status, as recorded on the testbed, with `groups` on its Groups: line.
    pub fn status(groups: &str) -> String {
        format!(
            "Name:\tcat\nUmask:\t0022\nState:\tR (running)\nTgid:\t42\nNgid:\t0\nPid:\t42\nPPid:\t0\n\
             TracerPid:\t0\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nFDSize:\t64\nGroups:\t{groups}\n\
             NStgid:\t42\nVmPeak:\t    1604 kB\nnonvoluntary_ctxt_switches:\t0\n"
        )
    }

    /// What the `cat` prints: environ (NUL-terminated entries), then limits, then status.
    pub fn output(environment: &[&str], limits: &str, groups: &str) -> String {
        let environ: String = environment.iter().map(|entry| format!("{entry}\0")).collect();
        format!("{environ}{limits}{}", status(groups))
    }

    #[test]
    fn splits_the_environment_from_the_text_files() {
        let text = output(&["PATH=/usr/bin:/bin", "NCCL_IB_GID_INDEX=3", "MULTI=a=b\nc"], LIMITS_8MIB, "39 105 ");
        let read = parse(&text);
        assert_eq!(read.environment["NCCL_IB_GID_INDEX"], "3");
        assert_eq!(read.environment["MULTI"], "a=b\nc", "values keep their = and newlines");
        assert_eq!(read.environment.len(), 3);
        assert!(read.limits_and_status.starts_with("Limit "));
        assert!(read.limits_and_status.contains("Groups:\t39 105 \n"));
    }

    #[test]
    fn an_empty_environment_leaves_all_text() {
        let text = output(&[], LIMITS_8MIB, "");
        let read = parse(&text);
        assert!(read.environment.is_empty());
        assert_eq!(read.limits_and_status, text);
    }

    #[test]
    fn a_failed_or_missing_cat_says_why() {
        let failed = read(Ran::Exited(1, String::new(), "cat: can't open '/proc/self/environ': EACCES\n".into()));
        assert_eq!(failed.as_ref().unwrap_err().status, Status::Fail);
        assert!(failed.unwrap_err().message.contains("EACCES"));
        let missing = read(Ran::Missing("cat not in the image".into())).unwrap_err();
        assert_eq!(missing, Unread { status: Status::Skipped, message: "cat not in the image".into() });
    }
}
