//! Running other programs (toolbox, distrobox, the podman CLI): argv vectors only, never a shell.

use std::process::Stdio;

use tokio::process::Command;

use crate::error::{Error, Result};

/// Run `argv`, capturing output; a non-zero exit is an error carrying its stderr.
/// The child is killed if the future is dropped (e.g. on Ctrl-C).
pub async fn run_captured(argv: &[String]) -> Result<String> {
    let (program, args) = argv.split_first().ok_or_else(|| Error::Failed("internal: empty command line".into()))?;
    let output = Command::new(program)
        .args(args)
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
pub fn exec_replace(argv: &[String]) -> Error {
    use std::os::unix::process::CommandExt;
    let Some((program, args)) = argv.split_first() else {
        return Error::Failed("internal: empty command line".into());
    };
    let error = std::process::Command::new(program).args(args).exec();
    Error::Command { program: program.clone(), message: format!("cannot run it: {error}") }
}
