//! Commands on a node through the system's OpenSSH client, so that what the user set up for `ssh`
//! (~/.ssh/config or `-F FILE`, the agent, known_hosts, ProxyJump) works unchanged. One master
//! connection per node (ControlMaster) carries every command; `BatchMode=yes` always, so ssh never
//! waits on a password or host-key prompt, and its failures are turned into errors that name the
//! node, the reason and the fix.
//!
//! Why not the `openssh` crate: it always passes `StrictHostKeyChecking` on the command line (its
//! default accepts any new host key, overriding a stricter ~/.ssh/config), keeps an orphaned
//! master alive forever (`ControlPersist=yes`), and reports remote exits 127 and 255 as errors.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::identity::NodeIdentity;
use super::ssh_persist::MasterHome;
use crate::error::{last_line, Error, Result};
use crate::paths::{private_dir, Paths};

/// How long a command's own master outlives its last command when nothing closes it: bounds
/// what a crashed run leaves behind. A command after that opens a new master by itself
/// (`ControlMaster=auto`).
const CONTROL_PERSIST_SECONDS: u64 = 300;
/// Keepalives on the master: a node that dies mid-command fails it in ~45 s instead of hanging.
const SERVER_ALIVE: [&str; 4] = ["-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3"];

/// How to reach the nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshOptions {
    /// `ssh -F FILE`: this config file instead of ~/.ssh/config.
    pub config_file: Option<PathBuf>,
    /// ssh's `ConnectTimeout` (whole seconds, at least 1): how soon a node that does not answer fails.
    pub connect_timeout: Duration,
    /// The private runtime directory the masters' control sockets go in ([`Paths::runtime_path`]).
    pub runtime_dir: PathBuf,
    /// How long a master stays up after the command that opened it, for the next command to
    /// reuse ([`ssh_persist`](super::ssh_persist)); zero: each command opens and closes its own.
    pub persist: Duration,
}

impl SshOptions {
    /// How long a login may take: ConnectTimeout bounds the TCP connect and the banner; this
    /// bounds key exchange and login too (and the node's hello after them).
    pub fn login_limit(&self) -> Duration {
        self.connect_timeout.saturating_mul(2).saturating_add(Duration::from_secs(20))
    }
}

impl Default for SshOptions {
    fn default() -> Self {
        SshOptions {
            config_file: None,
            connect_timeout: Duration::from_secs(10),
            runtime_dir: Paths::of_this_process().runtime_path().to_path_buf(),
            persist: Duration::ZERO,
        }
    }
}

/// What a remote command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteOutput {
    /// The remote exit code; `None` when the local ssh client was killed by a signal.
    pub status: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl RemoteOutput {
    pub fn success(&self) -> bool {
        self.status == Some(0)
    }
}

/// An open master connection to one node. A command's own master closes when the session is
/// dropped (`close` does the same without blocking the runtime); a persistent one stays up.
#[derive(Debug)]
pub struct NodeSession {
    destination: String,
    options: SshOptions,
    master: Master,
    control_path: PathBuf,
}

/// Whose master a session rides on.
#[derive(Debug)]
enum Master {
    /// This command's own, in a private (0700) temporary directory with its log; closed with
    /// the session (the directory is held for its drop, which removes it).
    Own { _control_dir: tempfile::TempDir },
    /// Shared by the commands of the next `persist` seconds; `reused` when an earlier command
    /// opened it (what the node says over it is then checked before any call). A new one is
    /// `locked` until what the node says over it is recorded: another command never takes it
    /// for one whose node said nothing yet.
    Persistent { home: MasterHome, reused: bool, locked: Option<std::fs::File> },
    /// None to close (a session made up by a unit test).
    #[cfg(test)]
    Nothing,
}

impl NodeSession {
    /// Open the master connection to `destination` (`host`, `user@host` or a `Host` alias), or
    /// with `persist`, take the one an earlier command left running when it still answers.
    pub async fn connect(destination: &str, options: &SshOptions) -> Result<NodeSession> {
        validate_destination(destination)?;
        let parent = &options.runtime_dir;
        private_dir(parent)?;
        if !options.persist.is_zero() {
            return NodeSession::connect_persistent(destination, options).await;
        }
        let control_dir =
            tempfile::Builder::new().prefix("ssh-").tempdir_in(parent).map_err(|e| control_dir_error(parent, e))?;
        let session = NodeSession {
            destination: destination.to_string(),
            options: options.clone(),
            control_path: control_dir.path().join("master"),
            master: Master::Own { _control_dir: control_dir },
        };
        session.start_master().await?;
        Ok(session)
    }

    async fn connect_persistent(destination: &str, options: &SshOptions) -> Result<NodeSession> {
        let home = MasterHome::of(&options.runtime_dir, destination, options.config_file.as_deref());
        home.prepare()?;
        let lock = home.lock(options.login_limit()).await?;
        let control_path = home.control_path();
        // The mux protocol's alive check: no `ssh -O check` process.
        let reused = super::ssh_mux::alive(&control_path);
        let locked = (!reused).then_some(lock);
        let session = NodeSession {
            destination: destination.to_string(),
            options: options.clone(),
            control_path,
            master: Master::Persistent { home, reused, locked },
        };
        if !reused {
            session.start_persistent_master().await?;
        }
        Ok(session)
    }

    /// A persistent master that an earlier command opened.
    pub fn reused(&self) -> bool {
        matches!(self.master, Master::Persistent { reused: true, .. })
    }

    /// Close a reused master (the node is not what it was when it was opened, or the master no
    /// longer carries a channel) and open a new one: its login verifies the host key against
    /// known_hosts again, exactly as a first connection does.
    pub async fn replace_master(&mut self) -> Result<()> {
        let Master::Persistent { home, reused, locked } = &mut self.master else {
            return Ok(());
        };
        *reused = false;
        *locked = Some(home.lock(self.options.login_limit()).await?);
        super::ssh_mux::terminate(&self.control_path);
        self.start_persistent_master().await
    }

    /// What the node said over this persistent master when it was opened.
    pub fn recorded_identity(&self) -> Option<NodeIdentity> {
        match &self.master {
            Master::Persistent { home, .. } => home.recorded_identity(),
            _ => None,
        }
    }

    /// Keep what the node says over a persistent master just opened, for the next command
    /// (which may take the master from then on).
    pub fn record_identity(&mut self, identity: Option<&NodeIdentity>) {
        if let Master::Persistent { home, reused: false, locked } = &mut self.master {
            home.record_identity(identity);
            locked.take();
        }
    }

    /// A new persistent master, nothing of the last one kept (its caller holds the lock).
    async fn start_persistent_master(&self) -> Result<()> {
        if let Master::Persistent { home, .. } = &self.master {
            home.forget_identity();
            home.remove_socket();
            let _ = std::fs::remove_file(home.log_path());
        }
        self.start_master().await
    }

    /// The destination this session was opened to.
    pub fn destination(&self) -> &str {
        &self.destination
    }

    /// The master's control socket (it exists while the master runs).
    pub fn control_path(&self) -> &Path {
        &self.control_path
    }

    /// Run `argv` on the node. Each element reaches the remote program unchanged: all are quoted
    /// for the remote login shell (which must be a POSIX shell: sh, bash, dash, zsh). `stdin`,
    /// when given, is the command's whole input. A non-zero remote exit is not an error here (see
    /// `status`); failing to reach the node is. Dropping the future kills the local ssh client.
    pub async fn run(&self, argv: &[String], stdin: Option<Vec<u8>>) -> Result<RemoteOutput> {
        let mut command = self.remote_command(argv)?;
        command.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        let mut child = command.spawn().map_err(ssh_not_runnable)?;
        let input = child.stdin.take();
        let feed = async move {
            if let (Some(mut pipe), Some(bytes)) = (input, stdin) {
                // A remote command that stops reading closes the pipe; its exit status tells.
                let _ = pipe.write_all(&bytes).await;
            }
        };
        let (_, output) = tokio::join!(feed, child.wait_with_output());
        let output = output.map_err(ssh_not_runnable)?;
        let status = output.status.code();
        if let Some(error) = self.channel_failure(status, &String::from_utf8_lossy(&output.stderr)).await {
            return Err(error);
        }
        Ok(RemoteOutput { status, stdout: output.stdout, stderr: without_client_notices(output.stderr) })
    }

    /// Start `argv` on the node with stdin, stdout and stderr piped: a long-lived channel over the
    /// master connection (the node's `strix-toolbox serve`). Dropping the child kills the local
    /// ssh client, which closes the channel; [`NodeSession::channel_failure`] explains its end.
    pub fn spawn(&self, argv: &[String]) -> Result<tokio::process::Child> {
        let mut command = self.remote_command(argv)?;
        command.stdin(Stdio::piped());
        command.spawn().map_err(ssh_not_runnable)
    }

    /// `ssh … NODE 'ARGV…'` through the master, stdout and stderr piped, killed when dropped.
    fn remote_command(&self, argv: &[String]) -> Result<tokio::process::Command> {
        let command_line = remote_command_line(argv)?;
        let mut command = self.ssh_command();
        command
            .args(["-o", "ControlMaster=auto", "-T", "--"])
            .arg(&self.destination)
            .arg(&command_line)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        Ok(command)
    }

    /// Why a remote command ended with `status`: ssh's own failure, explained (None when it was
    /// the remote program's exit, however it went).
    pub async fn channel_failure(&self, status: Option<i32>, stderr: &str) -> Option<Error> {
        if status != Some(SSH_FAILED) {
            return None;
        }
        if let Some(failure) = classify(stderr) {
            return Some(self.failure_error(failure, stderr));
        }
        // A mux client whose connection died exits 255 without a word; a live master means
        // the remote command itself exited 255.
        if !self.master_alive() {
            return Some(self.failure_error(SshFailure::ConnectionLost, "the connection closed during the command"));
        }
        None
    }

    /// The master still runs.
    fn master_alive(&self) -> bool {
        super::ssh_mux::alive(&self.control_path)
    }

    /// End the session: a command's own master closes, a persistent one stays up for the next.
    pub async fn close(self) {
        drop(self);
    }

    /// `ssh -f -N -M`: returns once authenticated, leaving the master in the background.
    async fn start_master(&self) -> Result<()> {
        let log = self.control_path.with_file_name("master.log");
        let mut command = self.ssh_command();
        command
            .arg("-E")
            .arg(&log)
            .args(["-M", "-f", "-N", "--"])
            .arg(&self.destination)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let limit = self.options.login_limit();
        let status = match tokio::time::timeout(limit, command.status()).await {
            Ok(status) => status.map_err(ssh_not_runnable)?,
            Err(_) => {
                return Err(self.node_error(
                    format!(
                        "cannot reach node {}: the ssh login did not finish within {} s",
                        self.destination,
                        limit.as_secs()
                    ),
                    format!(
                        "run `{}` to see where it stops (a slow or hung sshd, an agent asking for confirmation)",
                        self.ssh_hint("", "true")
                    ),
                ))
            }
        };
        if status.success() {
            return Ok(());
        }
        let stderr = std::fs::read_to_string(&log).unwrap_or_default();
        Err(match classify(&stderr) {
            Some(failure) => self.failure_error(failure, &stderr),
            None => self.node_error(
                format!(
                    "cannot reach node {}: ssh failed ({status}): {}",
                    self.destination,
                    last_line(&stderr).unwrap_or("no message")
                ),
                format!("run `{}` to see why", self.ssh_hint("-v", "true")),
            ),
        })
    }

    /// `ssh` with what every invocation for this node shares.
    fn ssh_command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new("ssh");
        command.args(self.common_args());
        // Its own process group: the terminal's Ctrl-C is ours to handle (a cluster refresh lets
        // the running phase finish on every node, then undoes it), not ssh's to cut short.
        command.process_group(0);
        command
    }

    fn common_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        if let Some(file) = &self.options.config_file {
            args.push("-F".into());
            args.push(file.into());
        }
        let seconds = self.options.connect_timeout.as_secs_f64().ceil().max(1.0) as u64;
        let persist = match self.master {
            Master::Persistent { .. } => self.options.persist.as_secs().max(1),
            _ => CONTROL_PERSIST_SECONDS,
        };
        for option in
            ["BatchMode=yes".to_string(), format!("ConnectTimeout={seconds}"), format!("ControlPersist={persist}")]
        {
            args.push("-o".into());
            args.push(option.into());
        }
        args.extend(SERVER_ALIVE.iter().map(OsString::from));
        args.push("-S".into());
        args.push(escape_percent(self.control_path.as_os_str()));
        args
    }

    /// How the user runs the same ssh by hand (`ssh [-F FILE] [FLAGS] NODE [COMMAND]`), for the
    /// fixes in error messages.
    fn ssh_hint(&self, flags: &str, command: &str) -> String {
        let mut words = vec!["ssh".to_string()];
        if let Some(file) = &self.options.config_file {
            words.push(format!("-F {}", file.display()));
        }
        words.extend([flags.to_string(), self.destination.clone(), command.to_string()]);
        words.retain(|word| !word.is_empty());
        words.join(" ")
    }

    /// A failure reaching this node, with its fix.
    fn node_error(&self, message: String, fix: String) -> Error {
        Error::Node { node: self.destination.clone(), message, fix: Some(fix) }
    }

    fn failure_error(&self, failure: SshFailure, stderr: &str) -> Error {
        let node = &self.destination;
        let said = failure.evidence(stderr);
        let (login, resolve) = (self.ssh_hint("", "true"), self.ssh_hint("-G", "| grep ^hostname"));
        let (message, fix) = match failure {
            SshFailure::Unreachable => (
                format!("cannot reach node {node}: it is down or unreachable ({said})"),
                format!(
                    "check that it is powered on and on the network, and that its address is right (`{resolve}` \
                     shows the address ssh uses)"
                ),
            ),
            SshFailure::Refused => (
                format!("node {node} refused the ssh connection ({said}): no sshd listens there"),
                "start sshd on the node (`systemctl enable --now ssh`), or check the port and address in your ssh \
                 config"
                    .to_string(),
            ),
            SshFailure::UnknownName => (
                format!("cannot resolve node {node} ({said})"),
                format!(
                    "check the name, or give it an address (a `Host {node}` entry with `HostName` in ~/.ssh/config, \
                     or /etc/hosts)"
                ),
            ),
            SshFailure::PermissionDenied => (
                format!("node {node} refused our ssh key ({said})"),
                format!(
                    "install your public key on it (`ssh-copy-id {node}`), or load the right key into ssh-agent \
                     (`ssh-add`); batch mode never asks for a password"
                ),
            ),
            SshFailure::HostKeyChanged => (
                format!(
                    "node {node}'s host key has CHANGED since it was recorded in known_hosts: the node was \
                     reinstalled, or someone is intercepting the connection"
                ),
                format!(
                    "if you know why it changed, remove the old key (`{}`) and accept the new one after checking its \
                     fingerprint (`{login}`)",
                    suggested_keygen(stderr).unwrap_or_else(|| format!("ssh-keygen -R {node}"))
                ),
            ),
            SshFailure::HostKeyUnknown => (
                format!("node {node}'s host key is not in known_hosts, and batch mode cannot ask ({said})"),
                format!(
                    "connect once by hand and accept the key after checking its fingerprint (`{login}`), or set \
                     `StrictHostKeyChecking accept-new` for it in your ssh config"
                ),
            ),
            SshFailure::ConnectionLost => (
                format!("lost the ssh connection to node {node} ({said})"),
                "check that the node is up and its sshd running (its log says why it closed the connection), then \
                 run again"
                    .to_string(),
            ),
        };
        self.node_error(message, fix)
    }
}

impl Drop for NodeSession {
    fn drop(&mut self) {
        if let Master::Own { .. } = self.master {
            super::ssh_mux::terminate(&self.control_path);
        }
    }
}

/// ssh's own exit code for "ssh failed"; a remote command can also exit 255.
const SSH_FAILED: i32 = 255;

/// Why ssh could not reach a node, as ssh's messages tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SshFailure {
    /// Timed out, no route, network unreachable: the node is down or cut off.
    Unreachable,
    /// The address answered, but nothing listens on the ssh port.
    Refused,
    /// The name does not resolve.
    UnknownName,
    /// The node refused every key we offered.
    PermissionDenied,
    /// known_hosts holds a different key for the node.
    HostKeyChanged,
    /// known_hosts holds no key for the node, and batch mode cannot ask.
    HostKeyUnknown,
    /// The connection broke: closed or reset by the node, keepalives unanswered, master gone.
    ConnectionLost,
}

/// Message fragments (lowercase) that identify each failure, in order of precedence: a changed
/// host key also says "Host key verification failed".
const SIGNATURES: &[(SshFailure, &[&str])] = &[
    (SshFailure::HostKeyChanged, &["remote host identification has changed"]),
    (SshFailure::HostKeyUnknown, &["host key verification failed", "host key is known for"]),
    (SshFailure::PermissionDenied, &["permission denied ("]),
    (
        SshFailure::UnknownName,
        &["could not resolve hostname", "name or service not known", "temporary failure in name resolution"],
    ),
    (SshFailure::Refused, &["connection refused"]),
    (
        SshFailure::Unreachable,
        &["timed out", "no route to host", "network is unreachable", "host is down", "host is unreachable"],
    ),
    (
        SshFailure::ConnectionLost,
        &[
            "closed by remote host",
            "connection closed by",
            "connection reset",
            "not responding",
            "broken pipe",
            "read from master failed",
            "kex_exchange_identification",
        ],
    ),
];

/// What ssh's stderr says went wrong, if it is one of the failures we can explain.
pub fn classify(stderr: &str) -> Option<SshFailure> {
    let text = stderr.to_lowercase();
    SIGNATURES
        .iter()
        .find(|(_, fragments)| fragments.iter().any(|fragment| text.contains(fragment)))
        .map(|(failure, _)| *failure)
}

impl SshFailure {
    /// The line of ssh's stderr that shows this failure.
    fn evidence<'a>(&self, stderr: &'a str) -> &'a str {
        let fragments = SIGNATURES.iter().find(|(failure, _)| failure == self).map_or(&[][..], |(_, f)| *f);
        stderr
            .lines()
            .map(|line| line.trim().trim_start_matches("ssh: "))
            .find(|line| fragments.iter().any(|fragment| line.to_lowercase().contains(fragment)))
            .or_else(|| last_line(stderr))
            .unwrap_or("ssh gave no details")
    }
}

/// The `ssh-keygen -f FILE -R HOST` line ssh prints with a changed host key: it names the right
/// known_hosts file and the host as recorded (not the alias).
fn suggested_keygen(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .map(str::trim)
        .find(|line| line.starts_with("ssh-keygen ") && line.contains(" -R "))
        .map(String::from)
}

/// What the ssh client itself prints before a session: past sshd's `MaxSessions` (10) on the
/// master, a command falls back to a connection of its own and says so; a new master records the
/// host key. Dropped, so that stderr is the remote command's.
const CLIENT_NOTICES: &[&str] = &["mux_client_", "ControlSocket ", "Warning: Permanently added "];

fn without_client_notices(stderr: Vec<u8>) -> Vec<u8> {
    let mut start = 0;
    while let Some(line_end) = stderr[start..].iter().position(|byte| *byte == b'\n') {
        let line = &stderr[start..start + line_end];
        if !CLIENT_NOTICES.iter().any(|notice| line.starts_with(notice.as_bytes())) {
            break;
        }
        start += line_end + 1;
    }
    stderr[start..].to_vec()
}

/// Quote `arg` for a POSIX shell: a word the shell reads back as exactly `arg`. Plain words
/// stay readable; anything else goes in single quotes (where nothing is special), a `'` becomes
/// `'\''`. `=` and `~` count as special: `A=b` first on a line is an assignment, `~` expands.
pub fn shell_quote(arg: &str) -> String {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"_-./:,@+".contains(&b);
    if !arg.is_empty() && arg.bytes().all(plain) {
        return arg.to_string();
    }
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// The command line ssh hands the remote shell: every element of `argv` quoted.
pub fn remote_command_line(argv: &[String]) -> Result<String> {
    if argv.is_empty() {
        return Err(Error::Internal("an empty command for ssh".into()));
    }
    if let Some(arg) = argv.iter().find(|arg| arg.contains('\0')) {
        return Err(Error::Internal(format!("the remote argument {arg:?} holds a NUL byte")));
    }
    Ok(argv.iter().map(|arg| shell_quote(arg)).collect::<Vec<_>>().join(" "))
}

/// An ssh destination (`host`, `user@host`, a `Host` alias): never one ssh would read as an option
/// (`-oProxyCommand=…` would run a command here), or split (white space, control characters), nor
/// a comma (it separates `--nodes`). Refused before it reaches ssh or a cluster file.
pub fn validate_destination(destination: &str) -> Result<()> {
    let problem = if destination.is_empty() {
        "it is empty"
    } else if destination.starts_with('-') {
        "an ssh destination cannot start with '-'"
    } else if destination.chars().any(|c| c.is_whitespace() || c.is_control() || c == ',') {
        "it contains white space, a comma or a control character"
    } else {
        return Ok(());
    };
    Err(Error::Usage(format!(
        "invalid node {destination:?}: {problem}. Fix: give an ssh destination: host, user@host or a Host alias \
         from your ssh config"
    )))
}

/// ssh expands `%` tokens in ControlPath; a literal `%` is `%%`.
fn escape_percent(path: &OsStr) -> OsString {
    let mut bytes = Vec::with_capacity(path.len());
    for &byte in path.as_bytes() {
        bytes.push(byte);
        if byte == b'%' {
            bytes.push(b'%');
        }
    }
    OsString::from_vec(bytes)
}

fn control_dir_error(parent: &Path, error: std::io::Error) -> Error {
    Error::host(
        parent.display().to_string(),
        format!("cannot create a private directory for ssh's control socket in {}: {error}", parent.display()),
        "set XDG_RUNTIME_DIR to a writable directory",
    )
}

fn ssh_not_runnable(error: std::io::Error) -> Error {
    Error::Command {
        program: "ssh".into(),
        message: format!("cannot run it: {error}"),
        fix: Some("install the OpenSSH client (`apt install openssh-client`)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `sh -c` reads back from a quoted word (the word echoed through printf).
    fn through_sh(arg: &str) -> String {
        let script = format!("printf %s {}", shell_quote(arg));
        let output = std::process::Command::new("sh").args(["-c", &script]).output().expect("sh");
        assert!(output.status.success(), "sh -c {script:?} failed");
        String::from_utf8(output.stdout).expect("utf-8")
    }

    #[test]
    fn plain_words_stay_readable() {
        for word in ["podman", "--json", "/usr/bin/strix-toolbox", "repo@sha256:ab12", "a,b", "x+y", "host:5000"] {
            assert_eq!(shell_quote(word), word);
        }
    }

    #[test]
    fn everything_else_is_single_quoted() {
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
        assert_eq!(shell_quote("A=b"), "'A=b'");
        assert_eq!(shell_quote("~"), "'~'");
    }

    #[test]
    fn the_shell_reads_back_exactly_what_was_quoted() {
        for arg in [
            "",
            " ",
            "two words",
            "'",
            "''",
            "\"double\"",
            "it's \"mixed\"",
            "$HOME ${PATH} $(id) `id`",
            "back\\slash \\n",
            "line one\nline two\n",
            "\ttab",
            "*?[a-z] {a,b} ~root !x #c ; & | < > ( )",
            "A=b",
            "-n",
            "héllo ✓",
        ] {
            assert_eq!(through_sh(arg), arg, "quoted as {}", shell_quote(arg));
        }
    }

    #[test]
    fn a_command_line_quotes_every_element() {
        let argv: Vec<String> = ["printf", "%s|", "a b", "$x"].map(String::from).to_vec();
        assert_eq!(remote_command_line(&argv).expect("line"), "printf '%s|' 'a b' '$x'");
        assert!(remote_command_line(&[]).is_err());
        assert!(remote_command_line(&["a\0b".to_string()]).is_err());
    }

    #[test]
    fn destinations_that_ssh_would_misread_are_refused() {
        for bad in ["", "-oProxyCommand=sh", "two words", "node\n", "a,b"] {
            let error = validate_destination(bad).expect_err(bad);
            assert!(error.to_string().contains("Fix:"), "{error}");
        }
        for good in ["node1", "alice@10.0.0.2", "strix-b.local", "[fe80::1%eth0]"] {
            validate_destination(good).expect(good);
        }
    }

    /// ssh 9.2's stderr, recorded against a test node (tests/testsuite/support/cluster.rs).
    const CHANGED_HOST_KEY: &str = "\
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!
Someone could be eavesdropping on you right now (man-in-the-middle attack)!
It is also possible that a host key has just been changed.
The fingerprint for the ED25519 key sent by the remote host is
SHA256:JaJqIfa+g9PzaK63LDw7KQPJNEcEXqihti5VfEBVlIM.
Please contact your system administrator.
Add correct host key in /tmp/cl/known_hosts to get rid of this message.
Offending ED25519 key in /tmp/cl/known_hosts:1
  remove with:
  ssh-keygen -f \"/tmp/cl/known_hosts\" -R \"10.213.250.2\"
Host key for 10.213.250.2 has changed and you have requested strict checking.
Host key verification failed.
";

    const RECORDED: &[(&str, SshFailure)] = &[
        (CHANGED_HOST_KEY, SshFailure::HostKeyChanged),
        (
            "No ED25519 host key is known for 10.213.250.2 and you have requested strict checking.\n\
             Host key verification failed.\n",
            SshFailure::HostKeyUnknown,
        ),
        ("Host key verification failed.\n", SshFailure::HostKeyUnknown),
        ("root@10.213.250.2: Permission denied (publickey).\n", SshFailure::PermissionDenied),
        (
            "ssh: Could not resolve hostname nosuch-node.invalid: Temporary failure in name resolution\n",
            SshFailure::UnknownName,
        ),
        ("ssh: Could not resolve hostname strix-c: Name or service not known\n", SshFailure::UnknownName),
        ("ssh: connect to host 10.213.250.2 port 22: Connection refused\n", SshFailure::Refused),
        ("ssh: connect to host 10.213.250.2 port 22: Connection timed out\n", SshFailure::Unreachable),
        ("ssh: connect to host 10.213.250.2 port 22: No route to host\n", SshFailure::Unreachable),
        ("ssh: connect to host 10.213.250.2 port 22: Network is unreachable\n", SshFailure::Unreachable),
        ("Connection timed out during banner exchange\n", SshFailure::Unreachable),
        (
            "Warning: Permanently added '10.213.250.2' (ED25519) to the list of known hosts.\n\
             Connection to 10.213.250.2 closed by remote host.\n",
            SshFailure::ConnectionLost,
        ),
        ("kex_exchange_identification: read: Connection reset by peer\n", SshFailure::ConnectionLost),
        ("Timeout, server 10.213.250.2 not responding.\n", SshFailure::ConnectionLost),
    ];

    fn session(config_file: Option<&str>) -> NodeSession {
        NodeSession {
            destination: "strix-b".into(),
            options: SshOptions { config_file: config_file.map(PathBuf::from), ..SshOptions::default() },
            master: Master::Nothing,
            control_path: PathBuf::from("/run/strix-toolbox/ssh-x/master"),
        }
    }

    #[test]
    fn recorded_ssh_failures_are_classified() {
        for (stderr, expected) in RECORDED {
            assert_eq!(classify(stderr), Some(*expected), "{stderr}");
        }
        assert_eq!(classify(""), None);
        assert_eq!(classify("some remote program's own complaint\n"), None);
    }

    #[test]
    fn every_failure_names_the_node_the_reason_and_a_fix() {
        let node = session(None);
        for (stderr, failure) in RECORDED {
            let error = node.failure_error(*failure, stderr);
            assert!(matches!(&error, Error::Node { node, fix: Some(_), .. } if node == "strix-b"), "{error:?}");
            assert_eq!(error.kind(), crate::error::ErrorKind::Node);
            let message = error.to_string();
            assert!(message.contains("node strix-b"), "{message}");
            assert!(message.contains("Fix:"), "{message}");
            assert!(!message.contains("@@@"), "no banner in {message}");
        }
        let refused = node.failure_error(SshFailure::Refused, RECORDED[6].0).to_string();
        assert!(refused.contains("connect to host 10.213.250.2 port 22: Connection refused"), "{refused}");
    }

    #[test]
    fn a_changed_host_key_gets_the_ssh_keygen_line_ssh_suggested() {
        let message = session(Some("/tmp/cl/ssh_config")).failure_error(SshFailure::HostKeyChanged, CHANGED_HOST_KEY);
        let message = message.to_string();
        assert!(message.contains(r#"`ssh-keygen -f "/tmp/cl/known_hosts" -R "10.213.250.2"`"#), "{message}");
        assert!(message.contains("`ssh -F /tmp/cl/ssh_config strix-b true`"), "{message}");
        let without = session(None).failure_error(SshFailure::HostKeyChanged, "Host key verification failed.");
        assert!(without.to_string().contains("`ssh-keygen -R strix-b`"), "{without}");
    }

    #[test]
    fn client_notices_before_the_remote_stderr_are_dropped() {
        let stderr = "mux_client_request_session: session request failed: Session open refused by peer\n\
                      ControlSocket /run/x/master already exists, disabling multiplexing\n\
                      real error\nmux_client_ is the remote's words here\n";
        assert_eq!(
            without_client_notices(stderr.as_bytes().to_vec()),
            b"real error\nmux_client_ is the remote's words here\n"
        );
        assert_eq!(without_client_notices(b"no newline".to_vec()), b"no newline");
        assert_eq!(without_client_notices(Vec::new()), b"");
    }

    #[test]
    fn the_login_limit_never_overflows() {
        let huge = SshOptions { connect_timeout: Duration::MAX, ..SshOptions::default() };
        assert_eq!(huge.login_limit(), Duration::MAX);
        assert_eq!(SshOptions::default().login_limit(), Duration::from_secs(40));
    }

    #[test]
    fn percent_in_the_control_path_is_escaped() {
        assert_eq!(escape_percent(OsStr::new("/run/a%b/master")), OsString::from("/run/a%%b/master"));
    }
}
