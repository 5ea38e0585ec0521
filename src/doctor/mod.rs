//! Checks over host facts, one file per area, in the order a person would fix them. Each says
//! what it found and, unless it passed, what fixes it: `pass`, `warn` or `fail`, or `info` for
//! what is worth knowing but not a fault (a release other than the verified one, a NIC that could
//! not be asked).

mod firewall;
mod firmware;
mod gpu;
mod gpu_memory;
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
use crate::link::ports::LinkPort;

pub use crate::check::{Check, Status};
pub use gpu_memory::FitMemory;
pub use tools::Programs;

fn check(name: impl Into<String>, status: Status, message: impl Into<String>, fix: Option<String>) -> Check {
    Check::new(name, status, message, fix)
}

/// Every check, in the order a person would fix them. `cluster_ports`: what the serving engines
/// listen on across the cluster link with no authentication of their own; `plan_memory`: what the
/// model-aware plan counts on this node (None: it could not say).
pub fn run_checks(
    facts: &HostFacts,
    installed: &Installed,
    programs: Programs,
    cluster_ports: &[LinkPort],
    plan_memory: Option<FitMemory>,
) -> Vec<Check> {
    let mut checks = Vec::new();
    gpu::checks(facts, &mut checks);
    gpu_memory::checks(&facts.gpu, plan_memory, &mut checks);
    kernel::checks(facts, &mut checks);
    os::checks(facts, &mut checks);
    rdma::checks(facts, &mut checks);
    memlock::checks(facts, &mut checks);
    network::checks(facts, &mut checks);
    firmware::checks(facts, &mut checks);
    firewall::checks(facts, cluster_ports, &mut checks);
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

/// Jumbo frames: what RoCE wants end to end, and what a TCP link needs to keep up.
const JUMBO_MTU: u32 = 9000;

/// A link's MTU, checked: jumbo frames pass; less, or unknown, warns: `{netdev} MTU is N{note}`
/// then `why`, with the fix that sets it to `set_to` and keeps it (NetworkManager), then `also`.
fn mtu_check(name: String, netdev: &str, mtu: Option<u32>, note: &str, why: &str, set_to: u32, also: &str) -> Check {
    match mtu {
        Some(mtu) if mtu >= JUMBO_MTU => check(name, Status::Pass, format!("{netdev} MTU {mtu}{note}"), None),
        mtu => check(
            name,
            Status::Warn,
            format!("{netdev} MTU is {}{note}{why}", mtu.map_or("unknown".into(), |m| m.to_string())),
            Some(format!(
                "`sudo ip link set dev {netdev} mtu {set_to}`, persisted with `sudo nmcli connection modify {netdev} \
                 802-3-ethernet.mtu {set_to}`{also}"
            )),
        ),
    }
}

#[cfg(test)]
mod tests;
