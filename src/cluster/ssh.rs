//! The transport: the system's OpenSSH, so users' `~/.ssh/config`, agent, known_hosts, ProxyJump
//! and their own ControlMaster settings keep working. One master connection per node (our own
//! ControlPath in a private directory), reused by every command; batch mode always, so a node
//! never prompts for a password or a host key: it fails, named, with the reason and the fix.
//!
//! The remote side is a shell, so every argument is quoted for it ([`quote`]); nothing is ever
//! concatenated unquoted.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::error::{Error, Result};

#[derive(Debug, Clone)]
pub struct SshOptions {
    /// `ssh -F FILE`; None: the user's ~/.ssh/config.
    pub config_file: Option<PathBuf>,
    /// How long a node may take to accept the connection.
    pub connect_timeout: Duration,
}

/// What a command printed and how it ended (None: killed by a signal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteOutput {
    pub status: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// An open master connection to one node.
pub struct NodeSession {
    destination: String,
    options: SshOptions,
    /// Holds the master's control socket; removed with the session.
    control_dir: tempfile::TempDir,
}

/// ssh's exit status for its own failures (a remote command's own status passes through).
const SSH_FAILED: i32 = 255;

impl NodeSession {
    /// Open the master connection (ssh authenticates, then backgrounds itself with `-f`).
    pub async fn connect(destination: &str, options: &SshOptions) -> Result<NodeSession> {
        super::nodes::validate_destination(destination)?;
        // Short: a unix socket path holds ~108 bytes.
        let control_dir = tempfile::Builder::new()
            .prefix("strix-ssh-")
            .tempdir_in(std::env::temp_dir())
            .map_err(|e| Error::Failed(format!("cannot create a directory for ssh's control socket: {e}")))?;
        let session = NodeSession { destination: destination.to_string(), options: options.clone(), control_dir };
        let mut master = session.ssh();
        // ControlPersist: the master outlives this command, and leaves by itself once idle, even
        // if we die before closing it.
        master.args(["-o", "ControlMaster=yes", "-o", "ControlPersist=60", "-f", "-N", "--", destination]);
        let limit = options.connect_timeout + Duration::from_secs(5);
        let output = tokio::time::timeout(limit, master.stdin(Stdio::null()).output())
            .await
            .map_err(|_| connect_error(destination, &format!("no answer within {} s", limit.as_secs())))?
            .map_err(|e| Error::Failed(format!("cannot run ssh (is OpenSSH installed?): {e}")))?;
        if !output.status.success() {
            return Err(connect_error(destination, &String::from_utf8_lossy(&output.stderr)));
        }
        Ok(session)
    }

    /// Run `argv` on the node, each argument quoted for its shell; `stdin` is fed to it.
    pub async fn run(&self, argv: &[String], stdin: Option<Vec<u8>>) -> Result<RemoteOutput> {
        let mut command = self.ssh();
        command.args(["-o", "ControlMaster=no", "-T", "--", &self.destination, &command_line(argv)]);
        command.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|e| Error::Failed(format!("cannot run ssh: {e}")))?;
        if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
            // A command that stops reading early is its own failure, reported by its status.
            let _ = pipe.write_all(&bytes).await;
            drop(pipe);
        }
        let output = child
            .wait_with_output()
            .await
            .map_err(|e| Error::Failed(format!("ssh to {} failed: {e}", self.destination)))?;
        let status = output.status.code();
        if status == Some(SSH_FAILED) && self.master_is_gone().await {
            return Err(connect_error(&self.destination, &String::from_utf8_lossy(&output.stderr)));
        }
        Ok(RemoteOutput { status, stdout: output.stdout, stderr: output.stderr })
    }

    /// End the master connection.
    pub async fn close(self) {
        let mut exit = self.ssh();
        exit.args(["-O", "exit", "--", &self.destination]).stdin(Stdio::null()).stdout(Stdio::null());
        let _ = tokio::time::timeout(Duration::from_secs(5), exit.stderr(Stdio::null()).status()).await;
    }

    /// True when the master connection no longer answers (a 255 was ssh's, not the command's).
    async fn master_is_gone(&self) -> bool {
        let mut check = self.ssh();
        check.args(["-O", "check", "--", &self.destination]).stdin(Stdio::null());
        let status = check.stdout(Stdio::null()).stderr(Stdio::null()).status().await;
        !status.is_ok_and(|s| s.success())
    }

    /// `ssh` with what every call shares: the config file, batch mode, our control socket.
    /// Its own process group: a Ctrl-C meant for us must not cut a node's phase short.
    fn ssh(&self) -> Command {
        let mut command = Command::new("ssh");
        if let Some(file) = &self.options.config_file {
            command.arg("-F").arg(file);
        }
        let timeout = self.options.connect_timeout.as_secs().max(1);
        command
            .args(["-o", "BatchMode=yes", "-o", &format!("ConnectTimeout={timeout}")])
            .args(["-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"])
            .arg("-o")
            .arg(format!("ControlPath={}", self.control_dir.path().join("cm").display()))
            .process_group(0)
            .kill_on_drop(true);
        command
    }
}

/// The remote command line: every argument quoted.
pub fn command_line(argv: &[String]) -> String {
    argv.iter().map(|arg| quote(arg)).collect::<Vec<_>>().join(" ")
}

/// One word for a POSIX shell, whatever it holds: single quotes, and `'\''` for a quote inside.
pub fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// Why ssh could not reach `node`, from its stderr, with the fix.
pub fn connect_error(node: &str, stderr: &str) -> Error {
    let said = stderr.lines().map(str::trim).filter(|l| !l.is_empty()).last().unwrap_or("no reason given");
    let has = |text: &str| stderr.contains(text);
    let (why, fix) = if has("REMOTE HOST IDENTIFICATION HAS CHANGED") {
        (
            "its host key changed since it was recorded in known_hosts".to_string(),
            format!("if the node was reinstalled, `ssh-keygen -R {}` and connect once with `ssh {node}`", host(node)),
        )
    } else if has("Host key verification failed") || has("No ED25519 host key is known") || has("host key is known") {
        (
            "its host key is not in known_hosts, and strix-toolbox never answers a host-key prompt".to_string(),
            format!("connect once with `ssh {node}` and check the key it shows"),
        )
    } else if has("Permission denied") {
        (
            "it refused the key (strix-toolbox never asks for a password)".to_string(),
            format!("install your key there (`ssh-copy-id {node}`) or load it in your agent (`ssh-add`)"),
        )
    } else if has("Could not resolve hostname") || has("Name or service not known") {
        ("its name does not resolve".to_string(), format!("check the name, or add `Host {node}` to your ssh config"))
    } else if has("Connection refused") {
        ("nothing listens for ssh there".to_string(), "start sshd on the node, or check the port".to_string())
    } else if has("timed out") || has("No route to host") || has("Network is unreachable") || has("no answer") {
        (
            "it does not answer (down, or not reachable from here)".to_string(),
            format!("check that {node} is up and that `ssh {node}` works"),
        )
    } else {
        (format!("ssh failed: {said}"), format!("run `ssh {node} true` to see why"))
    };
    Error::Failed(format!("node {node} is unreachable: {why} ({said}). Fix: {fix}"))
}

/// `user@host` → `host` (what known_hosts records).
fn host(destination: &str) -> &str {
    destination.rsplit_once('@').map_or(destination, |(_, host)| host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_anything_a_shell_would_interpret() {
        assert_eq!(quote(""), "''");
        assert_eq!(quote("plain"), "'plain'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        let argv: Vec<String> = ["printf", "%s", "a b", "$HOME", "`id`", "x;y", "'\"", "line\nbreak", "*"]
            .into_iter()
            .map(str::to_string)
            .collect();
        let line = command_line(&argv);
        // A real shell gives every word back, byte for byte.
        let output = std::process::Command::new("sh").args(["-c", &format!("printf '%s\\0' {line}")]).output().unwrap();
        let words: Vec<String> = output
            .stdout
            .split(|b| *b == 0)
            .filter(|w| !w.is_empty())
            .map(|w| String::from_utf8_lossy(w).into())
            .collect();
        assert_eq!(words, argv);
    }

    #[test]
    fn every_failure_names_the_node_the_reason_and_the_fix() {
        let cases = [
            ("@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\nHost key verification failed.", "ssh-keygen -R 10.0.0.2"),
            ("No ED25519 host key is known for node2 and you have requested strict checking.\nHost key verification failed.", "connect once"),
            ("root@10.0.0.2: Permission denied (publickey).", "ssh-copy-id"),
            ("ssh: Could not resolve hostname nodex: Name or service not known", "does not resolve"),
            ("ssh: connect to host 10.0.0.2 port 22: Connection refused", "start sshd"),
            ("ssh: connect to host 10.0.0.2 port 22: Connection timed out", "is up"),
            ("kex_exchange_identification: read: Connection reset by peer", "ssh root@10.0.0.2 true"),
        ];
        for (stderr, expected) in cases {
            let message = connect_error("root@10.0.0.2", stderr).to_string();
            assert!(message.starts_with("node root@10.0.0.2 is unreachable"), "{message}");
            assert!(message.contains(expected) && message.contains("Fix:"), "{stderr}\n→ {message}");
        }
    }
}
