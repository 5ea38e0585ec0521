//! Running other programs (toolbox, distrobox, the podman CLI): argv vectors only, never a shell.
//! Each child gets `SHELL` (see login_shell): Toolbx will not run without it.

use std::process::Stdio;

use tokio::process::Command;

use crate::error::{Error, Result};
use crate::login_shell::login_shell;

/// Which podman a child's own podman calls reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodmanTarget {
    /// As configured, `CONTAINER_HOST` included: `podman exec -it` follows it like our API calls.
    AsConfigured,
    /// The local podman. Toolbx and Distrobox are host tools: under `CONTAINER_HOST` their podman
    /// calls turn remote, and remote podman lacks `system migrate`, which Toolbx runs on first use.
    Local,
}

fn command(program: &str, args: &[String], target: PodmanTarget) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    command.args(args).env("SHELL", login_shell());
    if target == PodmanTarget::Local {
        command.env_remove("CONTAINER_HOST");
    }
    command
}

/// Run `argv`, capturing output; a non-zero exit is an error carrying its stderr.
/// The child is killed if the future is dropped (e.g. on Ctrl-C).
pub async fn run_captured(argv: &[String], target: PodmanTarget) -> Result<String> {
    let (program, args) = argv.split_first().ok_or_else(|| Error::Failed("internal: empty command line".into()))?;
    let output = Command::from(command(program, args, target))
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| Error::Command { program: program.clone(), message: format!("cannot run it: {e}") })?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let detail = if stderr.trim().is_empty() { stdout.trim() } else { stderr.trim() };
    Err(Error::Command { program: argv.join(" "), message: format!("{} ({detail})", output.status) })
}

/// Replace this process with `argv` (interactive shells: the terminal belongs to the child).
pub fn exec_replace(argv: &[String], target: PodmanTarget) -> Error {
    use std::os::unix::process::CommandExt;
    let Some((program, args)) = argv.split_first() else {
        return Error::Failed("internal: empty command line".into());
    };
    let error = command(program, args, target).exec();
    Error::Command { program: program.clone(), message: format!("cannot run it: {error}") }
}
