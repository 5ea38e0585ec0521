//! Which engines and toolbox managers are installed, found on PATH. Read once per command.

use std::path::PathBuf;

#[derive(Debug, Clone, Default)]
pub struct Installed {
    pub podman: Option<PathBuf>,
    pub docker: Option<PathBuf>,
    pub toolbox: Option<PathBuf>,
    pub distrobox: Option<PathBuf>,
}

impl Installed {
    pub fn find() -> Self {
        let find = |name: &str| which::which(name).ok();
        Installed {
            podman: find("podman"),
            docker: find("docker"),
            toolbox: find("toolbox"),
            distrobox: find("distrobox"),
        }
    }
}
