//! The distribution and kernel, beside the ones the guide was verified on: information, since
//! other releases may work, but a difference is the first thing to suspect.

use super::{check, Check, Status};
use crate::host::HostFacts;

/// os-release `ID` and `VERSION_ID` of the verified release, and how to call it.
const VERIFIED_OS: (&str, &str, &str) = ("fedora", "43", "Fedora 43");
const VERIFIED_KERNELS: [&str; 2] = ["6.18.5", "6.18.6"];

pub(super) fn checks(facts: &HostFacts, checks: &mut Vec<Check>) {
    let os = &facts.os;
    let (id, version, verified) = VERIFIED_OS;
    let name = os.name.clone().or_else(|| os.id.clone());
    checks.push(match name {
        None => check("os", Status::Info, "distribution unknown (no /etc/os-release)", None),
        Some(name) if os.id.as_deref() == Some(id) && os.version_id.as_deref() == Some(version) => {
            check("os", Status::Pass, format!("{name}, the release the guide verified"), None)
        }
        Some(name) => check(
            "os",
            Status::Info,
            format!("{name}: the guide verified {verified}; drivers, rdma-core and firewalld may differ here"),
            None,
        ),
    });

    let verified_kernels = VERIFIED_KERNELS.join(" and ");
    checks.push(match (&os.kernel, os.kernel_version()) {
        (Some(release), Some(version)) if VERIFIED_KERNELS.contains(&version) => {
            check("kernel", Status::Pass, format!("kernel {release}, one the guide verified"), None)
        }
        (Some(release), _) => check(
            "kernel",
            Status::Info,
            format!("kernel {release}: the guide verified {verified_kernels}; amdgpu, irdma and ice change between releases"),
            None,
        ),
        (None, _) => check("kernel", Status::Info, "kernel release unknown (/proc/sys/kernel/osrelease unreadable)", None),
    });
}
