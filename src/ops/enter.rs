//! `enter [NAME] [-- CMD...]`: what it takes to get into a toolbox. A command runs through the
//! engine's API; an interactive shell is a program that takes over the terminal, which the
//! command then executes (after this operation has let go of the engine).

use crate::container_engine::{ContainerEngine, ExecIo, ExecSink};
use crate::error::{Error, Result};
use crate::image::reference::validate_container_name;
use crate::manager::login_shell::login_shell;
use crate::manager::process::ChildEnv;
use crate::manager::{self, ManagerKind};
use crate::settings::Settings;
use crate::toolbox::running::find_toolbox;

/// How to enter.
pub enum Entry {
    /// Replace this process with `argv` (toolbox enter, distrobox enter, podman/docker exec -it).
    Interactive { argv: Vec<String>, env: ChildEnv },
    /// The command ran; its exit code.
    Ran(i32),
}

/// Enter toolbox `name`: a command's output goes to `output` as it arrives.
pub async fn enter(settings: &Settings, name: &str, command: &[String], output: &dyn ExecSink) -> Result<Entry> {
    validate_container_name(name)?;
    let connection = settings.connect().await?;
    let engine = connection.engine();
    let container = find_toolbox(engine, name).await?;
    let kind = ManagerKind::of(&container);
    // For a shell, Toolbx and Distrobox start (and on first start set up) their own containers.
    let starts_itself = command.is_empty() && kind != ManagerKind::Native;
    if !container.running && !starts_itself {
        engine.container_start(name).await?;
    }

    if command.is_empty() {
        let mut shell = login_shell();
        if kind == ManagerKind::Native {
            shell = shell_that_runs_in(engine, name, &shell).await?;
        }
        let manager = manager::for_existing(kind, &settings.installed, settings.paths.home());
        let argv = manager.enter_argv(engine.kind(), name, &shell);
        return Ok(Entry::Interactive { argv, env: manager.child_env(engine.kind()) });
    }

    let user = kind.exec_user();
    let outcome = engine.exec(name, command, &[], user.as_deref(), ExecIo::PassThrough(output)).await?;
    Ok(Entry::Ran(outcome.exit_code.clamp(0, 255) as i32))
}

/// The user's own shell when the image has it (as Toolbx does), else bash, else sh: each is asked
/// to run `exit 0` in the container, which costs one API exec apiece.
async fn shell_that_runs_in(engine: &dyn ContainerEngine, name: &str, login_shell: &str) -> Result<String> {
    let mut candidates = vec![login_shell];
    for fallback in ["/bin/bash", "/bin/sh"] {
        if !candidates.contains(&fallback) {
            candidates.push(fallback);
        }
    }
    for shell in candidates {
        let probe = [shell.to_string(), "-c".into(), "exit 0".into()];
        if matches!(engine.exec(name, &probe, &[], None, ExecIo::Capture).await, Ok(outcome) if outcome.exit_code == 0)
        {
            return Ok(shell.to_string());
        }
    }
    Err(Error::toolbox(
        name,
        format!("toolbox {name} has no shell to enter (tried {login_shell}, /bin/bash, /bin/sh)"),
        format!(
            "`strix-toolbox enter {name} -- COMMAND` runs a command without one; recreate it from a complete image \
             with `strix-toolbox refresh --force`"
        ),
    ))
}
