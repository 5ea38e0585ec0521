//! `enter [NAME] [-- CMD...]`: a shell in the toolbox, or CMD with its output and exit code.

use crate::cli::{EnterArgs, GlobalOptions};
use crate::engine::{self, ContainerInfo, Engine};
use crate::engine_probe::Installed;
use crate::error::{Error, Result};
use crate::labels;
use crate::login_shell::login_shell;
use crate::manager::{self, ManagerKind};
use crate::process::exec_replace;
use crate::reference::validate_container_name;
use crate::ui::Ui;

/// The toolbox `enter`, `rm` and `rollback` act on when no name is given.
pub const DEFAULT_TOOLBOX: &str = "vllm";

pub async fn run(global: &GlobalOptions, args: &EnterArgs, _ui: &Ui) -> Result<i32> {
    let name = args.name.as_deref().unwrap_or(DEFAULT_TOOLBOX);
    validate_container_name(name)?;
    let connection = engine::connect(global.engine).await?;
    let engine = connection.engine();
    let container = find_toolbox(engine, name).await?;

    if args.command.is_empty() {
        let kind = manager_of(&container);
        let mut shell = login_shell();
        if kind == ManagerKind::Native {
            if !container.running {
                engine.container_start(name).await?;
            }
            shell = shell_that_runs_in(engine, name, &shell).await?;
        }
        let manager = manager::for_existing(kind, &Installed::find());
        let argv = manager.enter_argv(engine.kind(), name, &shell);
        let child_env = manager.child_env(engine.kind());
        // The shell replaces this process: stop any engine service we started first.
        drop(connection);
        return Err(exec_replace(&argv, &child_env));
    }

    if !container.running {
        engine.container_start(name).await?;
    }
    // Toolbx and Distrobox containers run as root and create the invoking user inside (same
    // uid); commands run as that user, as `toolbox run` does. Native ones already run as us.
    let user = match manager_of(&container) {
        ManagerKind::Native => None,
        ManagerKind::Toolbox | ManagerKind::Distrobox => {
            // SAFETY: getuid/getgid have no preconditions and cannot fail.
            Some(unsafe { format!("{}:{}", libc::getuid(), libc::getgid()) })
        }
    };
    let outcome = engine.exec(name, &args.command, &[], user.as_deref()).await?;
    Ok(outcome.exit_code.clamp(0, 255) as i32)
}

/// The user's own shell when the image has it (as Toolbx does), else bash, else sh: each is asked
/// to run `exit 0` in the container, which costs one API exec apiece.
async fn shell_that_runs_in(engine: &dyn Engine, name: &str, login_shell: &str) -> Result<String> {
    let mut candidates = vec![login_shell];
    for fallback in ["/bin/bash", "/bin/sh"] {
        if !candidates.contains(&fallback) {
            candidates.push(fallback);
        }
    }
    for shell in candidates {
        let probe = [shell.to_string(), "-c".into(), "exit 0".into()];
        if matches!(engine.exec(name, &probe, &[], None).await, Ok(outcome) if outcome.exit_code == 0) {
            return Ok(shell.to_string());
        }
    }
    Err(Error::Failed(format!(
        "toolbox {name} has no shell to enter (tried {login_shell}, /bin/bash, /bin/sh). Fix: `strix-toolbox enter \
         {name} -- COMMAND` runs a command without one; recreate it from a complete image with `strix-toolbox \
         refresh --force`"
    )))
}

/// The container named `name`, or an error that says how to make it.
pub async fn find_toolbox(engine: &dyn Engine, name: &str) -> Result<ContainerInfo> {
    engine.container_inspect(name).await?.ok_or_else(|| {
        Error::Failed(format!(
            "no toolbox named {name} in {} ({}). Fix: `strix-toolbox refresh` creates it; `strix-toolbox list` shows \
             what exists",
            engine.kind().program(),
            engine.endpoint()
        ))
    })
}

/// Which manager made a container (native when it carries no label of ours).
pub fn manager_of(container: &ContainerInfo) -> ManagerKind {
    container.labels.get(labels::MANAGER).and_then(|k| ManagerKind::parse(k)).unwrap_or(ManagerKind::Native)
}
