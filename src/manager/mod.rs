//! The `Manager` seam: who owns the toolbox. Toolbx and Distrobox keep their own `enter`
//! working; native means the engine directly, with the integration a toolbox gives.

mod distrobox;
pub mod login_shell;
mod native;
pub mod process;
mod recreate;
mod toolbox;

use std::path::Path;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use distrobox::Distrobox;
pub use native::Native;
pub use toolbox::Toolbox;

use crate::container_engine::{ContainerEngine, CreateRequest, EngineInfo, EngineKind};
use crate::error::{Error, Result};
use crate::host::installed::Installed;
use crate::manager::process::ChildEnv;

/// `--manager`: who should own the toolbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ManagerChoice {
    /// Toolbx with podman if installed, else distrobox (not as root), else native.
    Auto,
    /// Toolbx (`toolbox enter NAME` keeps working).
    Toolbox,
    /// Distrobox (`distrobox enter NAME` keeps working).
    Distrobox,
    /// The engine directly, with the integration a toolbox gives.
    Native,
}

impl From<ManagerKind> for ManagerChoice {
    fn from(kind: ManagerKind) -> Self {
        match kind {
            ManagerKind::Toolbox => ManagerChoice::Toolbox,
            ManagerKind::Distrobox => ManagerChoice::Distrobox,
            ManagerKind::Native => ManagerChoice::Native,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ManagerKind {
    Toolbox,
    Distrobox,
    Native,
}

impl ManagerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ManagerKind::Toolbox => "toolbox",
            ManagerKind::Distrobox => "distrobox",
            ManagerKind::Native => "native",
        }
    }

    /// Which manager made a container (native when it carries no label of ours).
    pub fn of(container: &crate::container_engine::ContainerInfo) -> ManagerKind {
        container.labels.get(crate::labels::MANAGER).and_then(|k| ManagerKind::parse(k)).unwrap_or(ManagerKind::Native)
    }

    /// Who commands run as in this manager's containers: Toolbx and Distrobox run as root and
    /// create the invoking user inside (same uid), and commands run as that user, as `toolbox run`
    /// does; native ones already run as us (None: the container's user).
    pub fn exec_user(self) -> Option<String> {
        match self {
            ManagerKind::Native => None,
            // SAFETY: getuid/getgid have no preconditions and cannot fail.
            ManagerKind::Toolbox | ManagerKind::Distrobox => {
                Some(unsafe { format!("{}:{}", libc::getuid(), libc::getgid()) })
            }
        }
    }

    pub fn parse(text: &str) -> Option<ManagerKind> {
        [ManagerKind::Toolbox, ManagerKind::Distrobox, ManagerKind::Native].into_iter().find(|k| k.as_str() == text)
    }
}

#[async_trait]
pub trait Manager: Send + Sync {
    fn kind(&self) -> ManagerKind;

    /// Add what this manager's toolboxes get beyond the spec (native: user, home, host network).
    fn complete(&self, request: &mut CreateRequest, engine: &EngineInfo);

    /// The command lines `create` runs, for `--dry-run`.
    fn describe_create(&self, engine: EngineKind, request: &CreateRequest) -> Vec<Vec<String>>;

    /// Create the container `request.name`; returns its id. Leaves nothing behind on failure.
    async fn create(&self, engine: &dyn ContainerEngine, request: &CreateRequest) -> Result<String>;

    /// The command that opens an interactive `shell` in `name` (Toolbx and Distrobox pick their own).
    fn enter_argv(&self, engine: EngineKind, name: &str, shell: &str) -> Vec<String>;

    /// What the programs this manager runs need in their environment.
    fn child_env(&self, _engine: EngineKind) -> ChildEnv {
        ChildEnv::default()
    }
}

/// Only the spec's fields and labels of a request: what Toolbx and Distrobox must be told,
/// since they bring user, home, network and entry point themselves.
fn spec_fields(request: &CreateRequest) -> CreateRequest {
    CreateRequest {
        devices: request.devices.clone(),
        group_add: request.group_add.clone(),
        ulimits: request.ulimits.clone(),
        security_opt: request.security_opt.clone(),
        env: request.env.clone(),
        annotations: request.annotations.clone(),
        labels: request.labels.clone(),
        ..Default::default()
    }
}

/// Pick the manager: `auto` is Toolbx with podman when installed, else distrobox (not as root),
/// else native.
pub fn choose(
    choice: ManagerChoice,
    engine: EngineKind,
    installed: &Installed,
    home: Option<&Path>,
) -> Result<Box<dyn Manager>> {
    let native = || Ok(Box::new(Native { home: home.map(Path::to_path_buf) }) as Box<dyn Manager>);
    let toolbox = || -> Result<Box<dyn Manager>> {
        let program = installed.toolbox.clone().ok_or_else(|| {
            not_installed(
                "toolbox",
                "toolbox is not installed",
                "install it (`sudo dnf install toolbox`) or use --manager native",
            )
        })?;
        let podman = installed.podman.clone().ok_or_else(|| {
            not_installed(
                "podman",
                "Toolbx needs the podman CLI, which is not installed",
                "install podman or use --manager native",
            )
        })?;
        if engine != EngineKind::Podman {
            return Err(Error::Usage("--manager toolbox works only with --container-engine podman".into()));
        }
        Ok(Box::new(Toolbox { program, podman }))
    };
    let distrobox = || -> Result<Box<dyn Manager>> {
        let program = installed.distrobox.clone().ok_or_else(|| {
            not_installed("distrobox", "distrobox is not installed", "install it or use --manager native")
        })?;
        if engine == EngineKind::Podman && installed.podman.is_none() {
            return Err(not_installed(
                "podman",
                "Distrobox with podman needs the podman CLI, which is not installed",
                "install podman or use --manager native",
            ));
        }
        Ok(Box::new(Distrobox { program, podman: installed.podman.clone() }))
    };
    match choice {
        ManagerChoice::Toolbox => toolbox(),
        ManagerChoice::Distrobox => distrobox(),
        ManagerChoice::Native => native(),
        ManagerChoice::Auto
            if engine == EngineKind::Podman && installed.toolbox.is_some() && installed.podman.is_some() =>
        {
            toolbox()
        }
        // distrobox refuses to run as root.
        ManagerChoice::Auto if installed.distrobox.is_some() && !running_as_root() => distrobox(),
        ManagerChoice::Auto => native(),
    }
}

fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The manager that made a container, from its label (native when unlabelled).
pub fn for_existing(kind: ManagerKind, installed: &Installed, home: Option<&Path>) -> Box<dyn Manager> {
    match (kind, &installed.toolbox, &installed.podman, &installed.distrobox) {
        (ManagerKind::Toolbox, Some(program), Some(podman), _) => {
            Box::new(Toolbox { program: program.clone(), podman: podman.clone() })
        }
        (ManagerKind::Distrobox, _, podman, Some(program)) => {
            Box::new(Distrobox { program: program.clone(), podman: podman.clone() })
        }
        _ => Box::new(Native { home: home.map(Path::to_path_buf) }),
    }
}

/// A program the manager needs is not on this host.
pub(crate) fn not_installed(program: &str, message: &str, fix: &str) -> Error {
    Error::host(format!("{program} on PATH"), message, fix)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn installed(podman: bool, toolbox: bool) -> Installed {
        Installed {
            podman: podman.then(|| "/usr/bin/podman".into()),
            toolbox: toolbox.then(|| "/usr/bin/toolbox".into()),
            ..Default::default()
        }
    }

    #[test]
    fn auto_prefers_toolbx_with_podman() {
        let chosen = choose(ManagerChoice::Auto, EngineKind::Podman, &installed(true, true), None).unwrap();
        assert_eq!(chosen.kind(), ManagerKind::Toolbox);
    }

    #[test]
    fn auto_falls_back_to_native() {
        for (engine, tools) in
            [(EngineKind::Docker, installed(true, true)), (EngineKind::Podman, installed(true, false))]
        {
            assert_eq!(choose(ManagerChoice::Auto, engine, &tools, None).unwrap().kind(), ManagerKind::Native);
        }
    }

    #[test]
    fn explicit_choices_say_what_is_missing() {
        let error = choose(ManagerChoice::Toolbox, EngineKind::Podman, &installed(true, false), None).err().unwrap();
        assert!(error.to_string().contains("toolbox is not installed"), "{error}");
        let error = choose(ManagerChoice::Toolbox, EngineKind::Docker, &installed(true, true), None).err().unwrap();
        assert!(matches!(error, Error::Usage(_)), "{error}");
        let error = choose(ManagerChoice::Distrobox, EngineKind::Podman, &installed(true, true), None).err().unwrap();
        assert!(error.to_string().contains("distrobox is not installed"), "{error}");
    }
}
