//! Running other programs (toolbox, distrobox, the podman CLI): argv vectors only, never a shell.
//! Each child gets `SHELL` (see login_shell): Toolbx will not run without it.

use std::process::Stdio;

use tokio::process::Command;

use crate::error::{Error, Result};
use crate::manager::login_shell::login_shell;

/// What a child needs changed in our environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildEnv {
    /// Variables the child must not see.
    pub unset: Vec<&'static str>,
    /// Variables the child must see.
    pub set: Vec<(&'static str, String)>,
}

impl ChildEnv {
    /// For Toolbx and Distrobox, host tools driving the local podman CLI: under `CONTAINER_HOST`
    /// their podman calls turn remote, and remote podman lacks `system migrate`, which Toolbx runs
    /// on first use. (`podman exec -it` for native toolboxes follows CONTAINER_HOST like our API.)
    pub fn local_podman() -> ChildEnv {
        ChildEnv { unset: vec!["CONTAINER_HOST"], set: Vec::new() }
    }
}

fn command(program: &str, args: &[String], env: &ChildEnv) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    command.args(args).env("SHELL", login_shell());
    for name in &env.unset {
        command.env_remove(name);
    }
    command.envs(env.set.iter().map(|(k, v)| (k, v)));
    command
}

/// Run `argv`, capturing output; a non-zero exit is an error carrying its stderr.
/// The child is killed if the future is dropped (e.g. on Ctrl-C).
pub async fn run_captured(argv: &[String], env: &ChildEnv) -> Result<String> {
    let (program, args) = argv.split_first().ok_or_else(|| Error::Internal("an empty command line".into()))?;
    let output = Command::from(command(program, args, env))
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| not_runnable(program, &e))?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let detail = if stderr.trim().is_empty() { stdout.trim() } else { stderr.trim() };
    Err(Error::Command { program: argv.join(" "), message: format!("{} ({detail})", output.status), fix: None })
}

/// `program` could not be started at all.
fn not_runnable(program: &str, error: &std::io::Error) -> Error {
    let fix = (error.kind() == std::io::ErrorKind::NotFound).then(|| format!("install {program}, or put it on PATH"));
    Error::Command { program: program.to_string(), message: format!("cannot run it: {error}"), fix }
}

/// Replace this process with `argv` (interactive shells: the terminal belongs to the child).
pub fn exec_replace(argv: &[String], env: &ChildEnv) -> Error {
    use std::os::unix::process::CommandExt;
    let Some((program, args)) = argv.split_first() else {
        return Error::Internal("an empty command line".into());
    };
    let error = command(program, args, env).exec();
    not_runnable(program, &error)
}
