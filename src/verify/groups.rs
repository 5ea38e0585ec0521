//! The process inside carries the supplementary groups that open the device nodes.
//!
//! With keep-groups (rootless podman on crun) the host's groups come along but are not mapped in
//! the container's user namespace, so the kernel shows each one as the overflow gid: there, every
//! expected gid not seen as itself must be matched by one overflow entry.

use super::proc_self::{ProcSelf, Unread};
use super::Expected;
use crate::check::{Check, Status};

const NAME: &str = "groups";
/// What the kernel shows for a gid the reader's user namespace does not map
/// (/proc/sys/kernel/overflowgid).
pub const OVERFLOW_GID: u32 = 65534;

pub fn check(proc_self: &Result<ProcSelf, Unread>, expected: &Expected) -> Check {
    let status = match proc_self {
        Ok(read) => &read.limits_and_status,
        Err(unread) => return Check::new(NAME, unread.status, unread.message.clone(), None),
    };
    let Some(carried) = supplementary_groups(status) else {
        return Check::new(NAME, Status::Fail, "no Groups: line in /proc/self/status inside", None);
    };
    let listed = |gids: &[u32]| {
        if gids.is_empty() {
            "-".to_string()
        } else {
            gids.iter().map(u32::to_string).collect::<Vec<_>>().join(" ")
        }
    };
    let missing: Vec<u32> = expected.gids.iter().copied().filter(|gid| !carried.contains(gid)).collect();
    if missing.is_empty() {
        return Check::new(NAME, Status::Pass, format!("carries gids {}", listed(&expected.gids)), None);
    }
    let unmapped = carried.iter().filter(|gid| **gid == OVERFLOW_GID).count();
    if expected.keep_groups && unmapped >= missing.len() {
        return Check::new(
            NAME,
            Status::Pass,
            format!(
                "keeps the host's groups: gids {} are unmapped in the user namespace and show as {OVERFLOW_GID} \
                 ({unmapped} such)",
                listed(&missing)
            ),
            None,
        );
    }
    let fix = if expected.keep_groups {
        "keep-groups carries the groups of your login session: `sudo usermod -aG video,render,rdma $USER`, log in \
         again, then `strix-toolbox refresh --force`"
    } else {
        "recreate the toolbox with the node's video/render/rdma gids (`strix-toolbox refresh --force`)"
    };
    Check::new(
        NAME,
        Status::Fail,
        format!(
            "lacks gid(s) {} (carries {}): the device nodes they guard stay closed",
            listed(&missing),
            listed(&carried)
        ),
        Some(fix.into()),
    )
}

/// The gids on the `Groups:` line of /proc/PID/status, repeats kept (unmapped ones all show as
/// [`OVERFLOW_GID`]).
pub fn supplementary_groups(status: &str) -> Option<Vec<u32>> {
    let line = status.lines().find_map(|l| l.strip_prefix("Groups:"))?;
    Some(line.split_whitespace().filter_map(|gid| gid.parse().ok()).collect())
}

#[cfg(test)]
mod tests {
    use super::super::proc_self::parse;
    use super::super::proc_self::tests::{output, LIMITS_8MIB};
    use super::*;

    fn judged(groups: &str, gids: &[u32], keep_groups: bool) -> Check {
        let expected = Expected { gids: gids.to_vec(), keep_groups, ..Expected::default() };
        check(&Ok(parse(&output(&[], LIMITS_8MIB, groups))), &expected)
    }

    #[test]
    fn reads_the_groups_line() {
        let status = "Name:\tcat\nUid:\t0\t0\t0\t0\nGroups:\t39 105 993 \nVmPeak:\t1 kB\n";
        assert_eq!(supplementary_groups(status).unwrap(), [39, 105, 993]);
        assert_eq!(supplementary_groups("Groups:\t\n").unwrap(), Vec::<u32>::new());
        assert_eq!(supplementary_groups("Groups:\t65534 65534 \n").unwrap(), [65534, 65534]);
        assert_eq!(supplementary_groups("Name:\tcat\n"), None);
    }

    #[test]
    fn numeric_gids_must_be_carried_as_themselves() {
        assert_eq!(judged("39 105 ", &[39, 105], false).status, Status::Pass);
        let fail = judged("39 ", &[39, 105], false);
        assert_eq!(fail.status, Status::Fail);
        assert!(fail.message.starts_with("lacks gid(s) 105 (carries 39)"), "{}", fail.message);
        assert!(fail.fix.unwrap().contains("refresh --force"));
        // Overflow entries prove nothing without keep-groups.
        assert_eq!(judged("39 65534 ", &[39, 105], false).status, Status::Fail);
    }

    /// Recorded on the testbed: `setpriv --groups 44,105,993 unshare --user --map-root-user grep
    /// Groups /proc/self/status` prints `Groups:\t65534 65534 65534`, as a rootless keep-groups
    /// toolbox shows the host's video, render and rdma groups.
    #[test]
    fn kept_host_groups_show_as_the_overflow_gid() {
        let pass = judged("65534 65534 65534 ", &[44, 105, 993], true);
        assert_eq!(pass.status, Status::Pass, "{pass:?}");
        assert!(pass.message.contains("show as 65534"), "{}", pass.message);
        // One mapped as itself (the user's primary group), two unmapped.
        assert_eq!(judged("105 65534 65534 ", &[44, 105, 993], true).status, Status::Pass);
        // Groups dropped (a session from before `usermod -aG`): fewer overflow entries than needed.
        let fail = judged("65534 ", &[44, 105, 993], true);
        assert_eq!(fail.status, Status::Fail);
        assert!(fail.fix.unwrap().contains("log in again"));
    }
}
