//! strix-toolbox on a node, over its ssh session: found (`~/.local/bin`, where `cluster install`
//! puts it, else PATH), its version checked against ours, and run with `--json` so the head reads
//! back the node's typed report.

use serde::de::DeserializeOwned;

use super::ssh::{NodeSession, RemoteOutput, SshOptions};
use crate::error::{Error, Result};

/// This program's version: every node must run the same.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
const PROGRAM: &str = "strix-toolbox";

/// A connected node and what it has installed.
pub struct RemoteNode {
    pub name: String,
    session: NodeSession,
    /// The node's `$HOME`.
    pub home: String,
    /// The strix-toolbox it runs, and its version; None when it has none.
    pub installed: Option<(String, String)>,
}

impl RemoteNode {
    /// Connect and look for strix-toolbox (no version requirement yet: see [`RemoteNode::require_ours`]).
    pub async fn connect(name: &str, ssh: &SshOptions) -> Result<RemoteNode> {
        let session = NodeSession::connect(name, ssh).await?;
        let home = text(&session.run(&argv(&["printenv", "HOME"]), None).await?.stdout).trim().to_string();
        let mut node = RemoteNode { name: name.to_string(), session, home, installed: None };
        node.installed = node.find_program().await?;
        Ok(node)
    }

    /// Where `cluster install` puts the binary.
    pub fn install_path(&self) -> String {
        format!("{}/.local/bin/{PROGRAM}", self.home.trim_end_matches('/'))
    }

    /// `~/.local/bin/strix-toolbox` first (the copy `cluster install` manages; non-interactive ssh
    /// sessions often lack it on PATH), else `strix-toolbox` on PATH.
    async fn find_program(&self) -> Result<Option<(String, String)>> {
        let mut candidates = Vec::new();
        if !self.home.is_empty() {
            candidates.push(self.install_path());
        }
        candidates.push(PROGRAM.to_string());
        for program in candidates {
            let output = self.session.run(&[program.clone(), "--version".into()], None).await?;
            if output.status == Some(0) {
                // `strix-toolbox 0.1.0`
                let version = text(&output.stdout).split_whitespace().nth(1).unwrap_or_default().to_string();
                return Ok(Some((program, version)));
            }
        }
        Ok(None)
    }

    /// The program, refusing a node without strix-toolbox or with another version.
    pub fn require_ours(&self) -> Result<&str> {
        match &self.installed {
            Some((program, version)) if version == VERSION => Ok(program),
            Some((program, version)) => Err(Error::Failed(format!(
                "node {} runs strix-toolbox {version} ({program}), this is {VERSION}: the nodes must agree. Fix: \
                 `strix-toolbox cluster install` copies this one to every node",
                self.name
            ))),
            None => Err(Error::Failed(format!(
                "node {} has no strix-toolbox (not in ~/.local/bin, not on PATH). Fix: `strix-toolbox cluster \
                 install` copies this one to every node",
                self.name
            ))),
        }
    }

    /// Run `strix-toolbox --json ARGS…` on the node and read its report. `accept_failure` takes a
    /// report that comes with exit 1 (doctor's failed checks) as a report.
    pub async fn strix<T: DeserializeOwned>(&self, args: &[String], accept_failure: bool) -> Result<T> {
        let program = self.require_ours()?.to_string();
        let mut command = vec![program, "--json".to_string()];
        command.extend(args.iter().cloned());
        let output = self.session.run(&command, None).await?;
        let parsed = serde_json::from_slice::<T>(&output.stdout);
        match (output.status, parsed) {
            (Some(0), Ok(report)) => Ok(report),
            (Some(1), Ok(report)) if accept_failure => Ok(report),
            (status, parsed) => Err(Error::Failed(format!(
                "node {}: `strix-toolbox {}` failed{}: {}",
                self.name,
                args.join(" "),
                status.map_or(String::new(), |code| format!(" (exit {code})")),
                remote_error(&output, parsed.err())
            ))),
        }
    }

    /// Run `argv` inside the node's toolbox `toolbox` (`strix-toolbox enter TOOLBOX -- ARGV`).
    pub async fn in_toolbox(&self, toolbox: &str, argv: &[String]) -> Result<RemoteOutput> {
        let mut command = vec![self.require_ours()?.to_string(), "enter".into(), toolbox.into(), "--".into()];
        command.extend(argv.iter().cloned());
        self.session.run(&command, None).await
    }

    /// Run any argv on the node (each argument quoted for its shell).
    pub async fn run(&self, argv: &[String], stdin: Option<Vec<u8>>) -> Result<RemoteOutput> {
        self.session.run(argv, stdin).await
    }

    pub async fn close(self) {
        self.session.close().await;
    }
}

/// What the node said about its failure: its own `error:` line, else its output.
fn remote_error(output: &RemoteOutput, parse_error: Option<serde_json::Error>) -> String {
    let stderr = text(&output.stderr);
    let said = stderr.lines().rev().find(|l| !l.trim().is_empty()).map(|l| l.trim_start_matches("error: ").to_string());
    match (said, parse_error) {
        (Some(line), _) => line,
        (None, Some(error)) => format!("its output is not a report ({error})"),
        (None, None) => "no output".into(),
    }
}

pub fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
