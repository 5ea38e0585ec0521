//! The memlock limit: RDMA pins memory, and a rootless engine cannot raise the hard limit it
//! inherits, so on an RDMA node it must be unlimited. `refresh` stops on the same condition.

use super::{check, Check, Status};
use crate::host::HostFacts;

/// What lifts the limit; `refresh`'s refusal names it too.
pub const FIX: &str = "create /etc/security/limits.d/99-rdma-memlock.conf with `* soft memlock unlimited` and \
    `* hard memlock unlimited`, then log in again";

pub(super) fn checks(facts: &HostFacts, checks: &mut Vec<Check>) {
    // Only RDMA pins memory: without it the limit does not matter.
    if !facts.rdma.present() && facts.rdma.ports.is_empty() {
        return;
    }
    checks.push(match &facts.memlock {
        Some(memlock) if memlock.hard_is_unlimited() => {
            check("memlock", Status::Pass, "memlock hard limit is unlimited", None)
        }
        Some(memlock) => check(
            "memlock",
            Status::Fail,
            format!(
                "memlock hard limit is {} bytes: RDMA pins memory, and a rootless engine cannot raise it, so the \
                 toolbox would fail at start",
                memlock.hard.unwrap_or(0)
            ),
            Some(FIX.to_string()),
        ),
        None => check("memlock", Status::Warn, "memlock limit unknown (/proc/self/limits unreadable)", None),
    });
}
