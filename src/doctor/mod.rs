//! Checks over host facts, one file per area, in the order a person would fix them. Each says
//! what it found and, unless it passed, what fixes it: `pass`, `warn` or `fail`, or `info` for
//! what is worth knowing but not a fault (a release other than the verified one, a NIC that could
//! not be asked).

mod firewall;
mod firmware;
mod gpu;
mod groups;
mod kernel;
pub mod memlock;
mod network;
mod os;
mod rdma;
mod selinux;
mod tools;

use crate::host::installed::Installed;
use crate::host::HostFacts;

pub use crate::check::{Check, Status};
pub use tools::Programs;

fn check(name: impl Into<String>, status: Status, message: impl Into<String>, fix: Option<String>) -> Check {
    Check::new(name, status, message, fix)
}

/// Every check, in the order a person would fix them.
pub fn run_checks(facts: &HostFacts, installed: &Installed, programs: Programs) -> Vec<Check> {
    let mut checks = Vec::new();
    gpu::checks(facts, &mut checks);
    kernel::checks(facts, &mut checks);
    os::checks(facts, &mut checks);
    rdma::checks(facts, &mut checks);
    memlock::checks(facts, &mut checks);
    network::checks(facts, &mut checks);
    firmware::checks(facts, &mut checks);
    firewall::checks(facts, &mut checks);
    groups::checks(facts, &mut checks);
    selinux::checks(facts, &mut checks);
    tools::checks(installed, programs, &mut checks);
    for warning in &facts.warnings {
        checks.push(check(
            "host-files",
            Status::Warn,
            warning.clone(),
            Some("check the file named; it was ignored".into()),
        ));
    }
    checks
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// Jumbo frames: what RoCE wants end to end, and what a TCP link needs to keep up.
const JUMBO_MTU: u32 = 9000;

#[cfg(test)]
mod tests;
