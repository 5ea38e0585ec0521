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
    /// The node's `$HOME`, when it had to be asked (strix-toolbox not on PATH in this version).
    pub home: Option<String>,
    /// The strix-toolbox it runs, and its version; None when it has none.
    pub installed: Option<(String, String)>,
}

impl RemoteNode {
    /// Connect and look for strix-toolbox (no version requirement yet: see [`RemoteNode::require_ours`]).
    pub async fn connect(name: &str, ssh: &SshOptions) -> Result<RemoteNode> {
        let session = NodeSession::connect(name, ssh).await?;
        let mut node = RemoteNode { name: name.to_string(), session, home: None, installed: None };
        node.installed = node.find_program().await?;
        Ok(node)
    }

    /// Where `cluster install` puts the binary (None: the node has no HOME, or it was not asked).
    pub fn install_path(&self) -> Option<String> {
        self.home.as_ref().map(|home| format!("{}/.local/bin/{PROGRAM}", home.trim_end_matches('/')))
    }

    /// `strix-toolbox` on PATH when it is this version (one round trip: the usual case); else
    /// `~/.local/bin/strix-toolbox`, the copy `cluster install` manages (non-interactive ssh
    /// sessions often lack ~/.local/bin on PATH); else whatever PATH has.
    async fn find_program(&mut self) -> Result<Option<(String, String)>> {
        let on_path = self.version_of(PROGRAM).await?;
        if on_path.as_deref() == Some(VERSION) {
            return Ok(Some((PROGRAM.to_string(), VERSION.to_string())));
        }
        let home = text(&self.session.run(&argv(&["printenv", "HOME"]), None).await?.stdout).trim().to_string();
        self.home = (!home.is_empty()).then_some(home);
        if let Some(path) = self.install_path() {
            if let Some(version) = self.version_of(&path).await? {
                return Ok(Some((path, version)));
            }
        }
        Ok(on_path.map(|version| (PROGRAM.to_string(), version)))
    }

    /// `PROGRAM --version` → `0.1.0` (`strix-toolbox 0.1.0`); None when it does not run.
    async fn version_of(&self, program: &str) -> Result<Option<String>> {
        let output = self.session.run(&[program.to_string(), "--version".into()], None).await?;
        Ok((output.status == Some(0))
            .then(|| text(&output.stdout).split_whitespace().nth(1).unwrap_or_default().to_string()))
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

    /// `netdev` as the node's kernel has it (address, prefix, MTU): `ip -j -4 addr show dev NETDEV`.
    pub async fn link(&self, netdev: &str) -> Result<Option<super::facts::RoceLink>> {
        let output = self.session.run(&argv(&["ip", "-j", "-4", "addr", "show", "dev", netdev]), None).await?;
        Ok(super::facts::RoceLink::from_ip_json(netdev, &output.stdout))
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
