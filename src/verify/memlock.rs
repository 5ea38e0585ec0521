//! RDMA pins memory: the process inside needs an unlimited memlock limit.

use super::probe::{Probe, Ran};
use super::Expected;
use crate::check::{Check, Status};
use crate::host::limits::parse_memlock;

const NAME: &str = "memlock";

pub async fn check(probe: &Probe<'_>, expected: &Expected) -> Check {
    let limits = match probe.run(&["cat", "/proc/self/limits"]).await {
        Ran::Exited(0, stdout, _) => stdout,
        Ran::Exited(_, _, stderr) => {
            return Check::new(NAME, Status::Fail, format!("cannot read /proc/self/limits: {stderr}"), None)
        }
        Ran::Missing(why) => return Check::new(NAME, Status::Skipped, why, None),
        Ran::Broken(why) => return Check::new(NAME, Status::Fail, why, None),
    };
    let memlock = match parse_memlock(&limits) {
        Ok(memlock) => memlock,
        Err(why) => return Check::new(NAME, Status::Fail, format!("/proc/self/limits inside: {why}"), None),
    };
    let shown = |limit: Option<u64>| limit.map_or("unlimited".to_string(), |bytes| format!("{bytes} bytes"));
    let found = format!("soft {}, hard {}", shown(memlock.soft), shown(memlock.hard));
    match (expected.rdma, memlock.soft.is_none() && memlock.hard.is_none()) {
        (true, true) => Check::new(NAME, Status::Pass, format!("memlock unlimited inside ({found})"), None),
        (true, false) => Check::new(
            NAME,
            Status::Fail,
            format!("memlock inside is {found}: RDMA cannot pin its buffers and RCCL falls back to TCP"),
            Some("recreate the toolbox with `--ulimit memlock=-1` (`strix-toolbox refresh --force`)".into()),
        ),
        (false, _) => Check::new(
            NAME,
            Status::Info,
            format!("memlock inside is {found}; no RDMA on this node, so nothing needs it"),
            None,
        ),
    }
}
