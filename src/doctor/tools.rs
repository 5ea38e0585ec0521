//! The programs a toolbox needs on the node: a container engine, ideally a toolbox manager. Under
//! `--host-root DIR` the facts are a copy of a node's files while the programs found are this
//! machine's: what is missing here says nothing about that node, so it is information.

use super::{check, Check, Status};
use crate::host::installed::Installed;

/// Whose programs were found on PATH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Programs {
    /// The node's own (the host root is `/`).
    TheNodes,
    /// This machine's, beside a copied tree (`--host-root DIR`).
    ThisMachines,
}

pub(super) fn checks(installed: &Installed, programs: Programs, checks: &mut Vec<Check>) {
    let (missing_engine, missing_manager, here) = match programs {
        Programs::TheNodes => (Status::Fail, Status::Warn, ""),
        Programs::ThisMachines => {
            (Status::Info, Status::Info, " on this machine (the node under --host-root is only files)")
        }
    };
    match (&installed.podman, &installed.docker) {
        (Some(path), _) | (None, Some(path)) => {
            checks.push(check("engine", Status::Pass, format!("container engine {}", path.display()), None))
        }
        (None, None) => checks.push(check(
            "engine",
            missing_engine,
            format!("neither podman nor docker is installed{here}"),
            Some("`sudo dnf install podman` (Fedora) or `sudo apt-get install podman`".into()),
        )),
    }
    match (&installed.toolbox, &installed.distrobox) {
        (Some(path), _) | (None, Some(path)) => {
            checks.push(check("manager", Status::Pass, format!("toolbox manager {}", path.display()), None))
        }
        (None, None) => checks.push(check(
            "manager",
            missing_manager,
            format!(
                "neither toolbox nor distrobox is installed{here}: refresh will create a native container (enter it \
                 with `strix-toolbox enter`)"
            ),
            Some("`sudo dnf install toolbox` for `toolbox enter` integration".into()),
        )),
    }
}
