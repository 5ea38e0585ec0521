//! `--on-give-up CMD`: word for a human once the watch stops restarting a service. The command is
//! the operator's own shell text, run as documented by `sh -c CMD` (the one place a shell reads a
//! string here: the operator wrote it, nothing of ours is put in it); what happened reaches it in
//! its environment (STRIX_WATCH_SERVICE, STRIX_WATCH_REASON), never spliced into the text. It
//! may take a minute; then it is killed, and the watch goes on either way.

use std::time::Duration;

use tokio::process::Command;

/// The longest an `--on-give-up` command may run.
pub const GIVE_UP_LIMIT: Duration = Duration::from_secs(60);

/// Run `command` for `service`, given up for `reason`: how it ended, for the event log.
pub async fn run_on_give_up(command: &str, service: &str, reason: &str) -> String {
    let child = Command::new("sh")
        .args(["-c", command])
        .env("STRIX_WATCH_SERVICE", service)
        .env("STRIX_WATCH_REASON", reason)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) => return format!("--on-give-up could not start sh: {error}"),
    };
    match tokio::time::timeout(GIVE_UP_LIMIT, child.wait()).await {
        Ok(Ok(status)) if status.success() => "--on-give-up ran".to_string(),
        Ok(Ok(status)) => format!("--on-give-up ended with {status}"),
        Ok(Err(error)) => format!("--on-give-up: {error}"),
        Err(_) => {
            let _ = child.kill().await;
            format!("--on-give-up still ran after {}s and was killed", GIVE_UP_LIMIT.as_secs())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_command_gets_the_service_and_the_reason_in_its_environment() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("said");
        let command = format!("printf '%s|%s' \"$STRIX_WATCH_SERVICE\" \"$STRIX_WATCH_REASON\" > '{}'", out.display());
        let reason = "stalled; it's \"quoted\" $HOME `x`";
        assert_eq!(run_on_give_up(&command, "tiny", reason).await, "--on-give-up ran");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), format!("tiny|{reason}"));
        assert_eq!(run_on_give_up("exit 3", "tiny", "r").await, "--on-give-up ended with exit status: 3");
    }
}
