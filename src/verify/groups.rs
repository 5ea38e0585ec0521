//! The process inside carries the supplementary groups that open the device nodes.

use std::collections::BTreeSet;

use super::probe::{Probe, Ran};
use super::Expected;
use crate::check::{Check, Status};

const NAME: &str = "groups";

pub async fn check(probe: &Probe<'_>, expected: &Expected) -> Check {
    let status = match probe.run(&["cat", "/proc/self/status"]).await {
        Ran::Exited(0, stdout, _) => stdout,
        Ran::Exited(_, _, stderr) => {
            return Check::new(NAME, Status::Fail, format!("cannot read /proc/self/status: {stderr}"), None)
        }
        Ran::Missing(why) => return Check::new(NAME, Status::Skipped, why, None),
        Ran::Broken(why) => return Check::new(NAME, Status::Fail, why, None),
    };
    let Some(carried) = supplementary_groups(&status) else {
        return Check::new(NAME, Status::Fail, "no Groups: line in /proc/self/status inside", None);
    };
    let missing: Vec<String> = expected.gids.iter().filter(|gid| !carried.contains(gid)).map(u32::to_string).collect();
    if missing.is_empty() {
        let list: Vec<String> = expected.gids.iter().map(u32::to_string).collect();
        Check::new(
            NAME,
            Status::Pass,
            format!("carries gids {}", if list.is_empty() { "-".into() } else { list.join(" ") }),
            None,
        )
    } else {
        Check::new(
            NAME,
            Status::Fail,
            format!("lacks gid(s) {}: the device nodes they guard stay closed", missing.join(" ")),
            Some(
                "recreate the toolbox with the node's video/render/rdma gids (`strix-toolbox refresh --force`)".into(),
            ),
        )
    }
}

/// The `Groups:` line of /proc/PID/status.
pub fn supplementary_groups(status: &str) -> Option<BTreeSet<u32>> {
    let line = status.lines().find_map(|l| l.strip_prefix("Groups:"))?;
    Some(line.split_whitespace().filter_map(|gid| gid.parse().ok()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_groups_line() {
        let status = "Name:\tcat\nUid:\t0\t0\t0\t0\nGroups:\t39 105 993 \nVmPeak:\t1 kB\n";
        assert_eq!(supplementary_groups(status).unwrap(), BTreeSet::from([39, 105, 993]));
        assert_eq!(supplementary_groups("Groups:\t\n").unwrap(), BTreeSet::new());
        assert_eq!(supplementary_groups("Name:\tcat\n"), None);
    }
}
