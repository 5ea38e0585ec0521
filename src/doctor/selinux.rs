//! SELinux: enforcing, it stops a container opening /dev/kfd and /dev/dri unless the
//! `container_use_devices` boolean is on. (Toolbx and Distrobox disable labels on their own
//! containers; the native manager's toolbox is confined like any container.)

use super::{check, Check, Status};
use crate::host::HostFacts;

const NAME: &str = "selinux";
const SET_BOOLEAN: &str = "`sudo setsebool -P container_use_devices 1`";

pub(super) fn checks(facts: &HostFacts, checks: &mut Vec<Check>) {
    let Some(selinux) = &facts.selinux else {
        checks.push(check(
            NAME,
            Status::Pass,
            "SELinux is off: it does not stand between a container and the GPU",
            None,
        ));
        return;
    };
    checks.push(match (selinux.enforcing, selinux.container_use_devices) {
        (true, Some(true)) => check(
            NAME,
            Status::Pass,
            "SELinux is enforcing and container_use_devices is on: containers may open /dev/kfd and /dev/dri",
            None,
        ),
        (true, Some(false)) => check(
            NAME,
            Status::Fail,
            "SELinux is enforcing and container_use_devices is off: a container cannot open /dev/kfd and /dev/dri",
            Some(SET_BOOLEAN.into()),
        ),
        (true, None) => check(
            NAME,
            Status::Warn,
            "SELinux is enforcing and its policy has no container_use_devices boolean: a container may not open \
             /dev/kfd and /dev/dri",
            Some(format!("install container-selinux (`sudo dnf install container-selinux`), then {SET_BOOLEAN}")),
        ),
        (false, Some(true)) => check(
            NAME,
            Status::Pass,
            "SELinux is permissive, and container_use_devices is on for when it enforces",
            None,
        ),
        (false, _) => check(
            NAME,
            Status::Warn,
            "SELinux is permissive and container_use_devices is off: the devices open now, but not once SELinux \
             enforces",
            Some(SET_BOOLEAN.into()),
        ),
    });
}
