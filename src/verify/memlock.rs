//! RDMA pins memory: the process inside needs an unlimited memlock limit.

use super::proc_self::{ProcSelf, Unread};
use super::Expected;
use crate::check::{Check, Status};
use crate::host::limits::parse_memlock;

const NAME: &str = "memlock";

pub fn check(proc_self: &Result<ProcSelf, Unread>, expected: &Expected) -> Check {
    let limits = match proc_self {
        Ok(read) => &read.limits_and_status,
        Err(unread) => return Check::new(NAME, unread.status, unread.message.clone(), None),
    };
    let memlock = match parse_memlock(limits) {
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

#[cfg(test)]
mod tests {
    use super::super::proc_self::tests::{limits_unlimited, LIMITS_8MIB};
    use super::super::proc_self::{parse, tests::output};
    use super::*;

    fn expected(rdma: bool) -> Expected {
        Expected { rdma, ..Expected::default() }
    }

    fn judged(limits: &str, rdma: bool) -> Check {
        check(&Ok(parse(&output(&["PATH=/bin"], limits, "0"))), &expected(rdma))
    }

    #[test]
    fn rdma_needs_both_limits_unlimited() {
        let pass = judged(&limits_unlimited(), true);
        assert_eq!(pass.status, Status::Pass, "{pass:?}");
        let fail = judged(LIMITS_8MIB, true);
        assert_eq!(fail.status, Status::Fail);
        assert!(fail.message.contains("soft 8388608 bytes, hard 8388608 bytes"), "{}", fail.message);
        assert!(fail.fix.unwrap().contains("memlock=-1"));
        // An unlimited hard limit is not enough: verbs check the soft one.
        let soft_only = LIMITS_8MIB.replace(
            "Max locked memory         8388608              8388608 ",
            "Max locked memory         8388608              unlimited",
        );
        assert_eq!(judged(&soft_only, true).status, Status::Fail);
    }

    #[test]
    fn without_rdma_the_limit_is_only_information() {
        let info = judged(LIMITS_8MIB, false);
        assert_eq!(info.status, Status::Info);
        assert!(info.message.contains("no RDMA"));
    }

    #[test]
    fn unreadable_limits_fail_and_a_missing_cat_skips() {
        assert_eq!(judged("Limit  Soft Limit  Hard Limit  Units\n", true).status, Status::Fail);
        let skipped = Unread { status: Status::Skipped, message: "cat not in the image".into() };
        let check = check(&Err(skipped), &expected(true));
        assert_eq!((check.status, check.message.as_str()), (Status::Skipped, "cat not in the image"));
    }
}
