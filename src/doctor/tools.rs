//! The programs a toolbox needs on the node: a container engine, ideally a toolbox manager.

use super::{check, Check, Status};
use crate::host::installed::Installed;

pub(super) fn checks(installed: &Installed, checks: &mut Vec<Check>) {
    match (&installed.podman, &installed.docker) {
        (Some(path), _) | (None, Some(path)) => {
            checks.push(check("engine", Status::Pass, format!("container engine {}", path.display()), None))
        }
        (None, None) => checks.push(check(
            "engine",
            Status::Fail,
            "neither podman nor docker is installed",
            Some("`sudo dnf install podman` (Fedora) or `sudo apt-get install podman`".into()),
        )),
    }
    match (&installed.toolbox, &installed.distrobox) {
        (Some(path), _) | (None, Some(path)) => {
            checks.push(check("manager", Status::Pass, format!("toolbox manager {}", path.display()), None))
        }
        (None, None) => checks.push(check("manager", Status::Warn,
            "neither toolbox nor distrobox is installed: refresh will create a native container (enter it with `strix-toolbox enter`)",
            Some("`sudo dnf install toolbox` for `toolbox enter` integration".into()))),
    }
}
