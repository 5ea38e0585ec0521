//! A node as the head sees it: its ssh session, and one channel to the node's own strix-toolbox
//! (`agent`), opened with the session and carrying every typed call of the cluster command. The
//! usual cost is one round trip: ssh connects, the node's strix-toolbox says hello with its
//! version, and the head compares it in the same exchange.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::oneshot;

use super::ssh::{NodeSession, RemoteOutput, SshOptions};
use crate::error::{Error, Result};
use crate::node::call::{Exec, NodeCall};
use crate::node::wire::{line, Hello, Outcome, Request, Response, PROTOCOL};
use crate::node::{Node, NodeCalls};

/// This program's version: every node must run the same.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// How the node starts its strix-toolbox: the copy `cluster install` manages in ~/.local/bin,
/// else the one on PATH. A constant script for the node's shell (which expands `$HOME`), never
/// built from data: the arguments follow it as positional parameters, each quoted.
const FIND_PROGRAM: &str = r#"p="$HOME/.local/bin/strix-toolbox"; [ -x "$p" ] || p=strix-toolbox; exec "$p" "$@""#;

/// What puts this strix-toolbox on a node.
const INSTALL_FIX: &str = "`strix-toolbox cluster install` copies this one to every node";
/// The shell's exit code for "command not found".
const NOT_FOUND: i32 = 127;
/// The most of a channel's stderr kept for an error message.
const STDERR_KEPT: usize = 16 << 10;

/// A connected node.
pub struct RemoteNode {
    pub name: String,
    session: NodeSession,
    agent: Agent,
}

/// The node's strix-toolbox, as the head found it.
enum Agent {
    /// This version, its channel open.
    Ready(Box<Channel>),
    /// None on the node (not in ~/.local/bin, not on PATH).
    Missing,
    /// Another version.
    OtherVersion(String),
    /// Present, but its channel would not open.
    Broken { message: String, fix: String },
}

impl RemoteNode {
    /// Connect and open the channel to the node's strix-toolbox. An unreachable node is an error;
    /// a node without this version of strix-toolbox is connected, and says so on its first call.
    pub async fn connect(name: &str, ssh: &SshOptions) -> Result<RemoteNode> {
        let session = NodeSession::connect(name, ssh).await?;
        let limit = ssh.connect_timeout * 2 + Duration::from_secs(20);
        let agent = Channel::open(&session, name, limit).await?;
        Ok(RemoteNode { name: name.to_string(), session, agent })
    }

    /// The node's strix-toolbox version (None: it has none).
    pub fn version(&self) -> Option<&str> {
        match &self.agent {
            Agent::Ready(channel) => Some(&channel.hello.version),
            Agent::OtherVersion(version) => Some(version),
            Agent::Missing | Agent::Broken { .. } => None,
        }
    }

    /// Where the node's strix-toolbox runs from, when it answered.
    pub fn program(&self) -> Option<&str> {
        self.ready_hello()?.program.as_deref()
    }

    fn ready_hello(&self) -> Option<&Hello> {
        match &self.agent {
            Agent::Ready(channel) => Some(&channel.hello),
            _ => None,
        }
    }

    /// The channel, refusing a node without strix-toolbox or with another version.
    fn node_error(&self, message: String, fix: &str) -> Error {
        Error::Node { node: self.name.clone(), message, fix: Some(fix.to_string()) }
    }

    pub fn require_ours(&self) -> Result<()> {
        self.channel().map(drop)
    }

    fn channel(&self) -> Result<&Channel> {
        match &self.agent {
            Agent::Ready(channel) => Ok(channel),
            Agent::OtherVersion(version) => Err(self.node_error(
                format!("node {} runs strix-toolbox {version}, this is {VERSION}: the nodes must agree", self.name),
                INSTALL_FIX,
            )),
            Agent::Missing => Err(self.node_error(
                format!("node {} has no strix-toolbox (not in ~/.local/bin, not on PATH)", self.name),
                INSTALL_FIX,
            )),
            Agent::Broken { message, fix } => Err(self.node_error(message.clone(), fix)),
        }
    }

    /// Run `argv` inside the node's toolbox `toolbox`, its output captured.
    pub async fn in_toolbox(&self, toolbox: &str, argv: &[String]) -> Result<RemoteOutput> {
        let report = self.call(Exec { toolbox: toolbox.to_string(), argv: argv.to_vec() }).await?;
        Ok(RemoteOutput {
            status: i32::try_from(report.exit_code).ok(),
            stdout: report.stdout.into_bytes(),
            stderr: report.stderr.into_bytes(),
        })
    }

    /// The node's `$HOME` (where `cluster install` puts the binary): from its strix-toolbox's
    /// hello, else asked.
    pub async fn home(&self) -> Result<Option<String>> {
        if let Some(home) = self.ready_hello().and_then(|hello| hello.home.as_ref()) {
            return Ok(Some(home.clone()));
        }
        let output = self.run(&argv(&["printenv", "HOME"]), None).await?;
        let home = String::from_utf8_lossy(&output.stdout).trim().to_string();
        Ok((!home.is_empty()).then_some(home))
    }

    /// Run any argv on the node (each argument quoted for its shell): for what needs no
    /// strix-toolbox there, like installing it.
    pub async fn run(&self, argv: &[String], stdin: Option<Vec<u8>>) -> Result<RemoteOutput> {
        self.session.run(argv, stdin).await
    }

    /// Close the channel (the node finishes what it was asked, then its strix-toolbox exits) and
    /// the session.
    pub async fn close(self) {
        if let Agent::Ready(channel) = self.agent {
            channel.close().await;
        }
        self.session.close().await;
    }
}

#[async_trait]
impl Node for RemoteNode {
    fn name(&self) -> &str {
        &self.name
    }

    /// Over the channel: the node's report, or its typed error.
    async fn ask(&self, call: NodeCall) -> Result<serde_json::Value> {
        let channel = self.channel()?;
        match channel.ask(call).await {
            Some(Outcome::Ok(value)) => Ok(value),
            Some(Outcome::Error(report)) => Err(Error::from_remote(&self.name, report)),
            None => Err(channel.lost(&self.session, &self.name).await),
        }
    }
}

/// `sh -c FIND_PROGRAM strix-toolbox ARGS…`: the node's strix-toolbox with `args`.
fn strix_argv(args: &[&str]) -> Vec<String> {
    let mut argv = argv(&["sh", "-c", FIND_PROGRAM, "strix-toolbox"]);
    argv.extend(args.iter().map(|arg| arg.to_string()));
    argv
}

/// The open channel to a node's `strix-toolbox agent`.
struct Channel {
    hello: Hello,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    waiting: Arc<Mutex<HashMap<u64, oneshot::Sender<Outcome>>>>,
    next_id: AtomicU64,
    child: tokio::sync::Mutex<Child>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Channel {
    /// Start `agent` and read its hello (bounded by `limit`); what the node has when it does not
    /// answer.
    async fn open(session: &NodeSession, node: &str, limit: Duration) -> Result<Agent> {
        let mut child = session.spawn(&strix_argv(&["agent"]))?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(Error::Internal("the ssh channel has no pipes".into()));
        };
        let kept = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn(keep_tail(stderr, kept.clone()));
        let mut lines = BufReader::new(stdout).lines();
        let first = match tokio::time::timeout(limit, lines.next_line()).await {
            Ok(Ok(Some(text))) => serde_json::from_str::<Hello>(&text).ok(),
            Ok(_) => None,
            Err(_) => {
                return Err(Error::Node {
                    node: node.to_string(),
                    message: format!("node {node}: its strix-toolbox did not answer within {} s", limit.as_secs()),
                    fix: Some("run `strix-toolbox status` on the node to see where it hangs".into()),
                })
            }
        };
        let Some(hello) = first else {
            let status =
                tokio::time::timeout(limit, child.wait()).await.ok().and_then(|s| s.ok()).and_then(|s| s.code());
            let said = String::from_utf8_lossy(&kept.lock().map(|k| k.clone()).unwrap_or_default()).into_owned();
            if let Some(error) = session.channel_failure(status, &said).await {
                return Err(error);
            }
            return Ok(match status {
                Some(NOT_FOUND) => Agent::Missing,
                // An older strix-toolbox has no `agent`: its version says what it is.
                _ => match installed_version(session).await {
                    Some(version) if version != VERSION => Agent::OtherVersion(version),
                    _ => Agent::Broken {
                        message: format!(
                            "node {node}: its strix-toolbox would not answer ({}): {}",
                            status.map_or("killed".to_string(), |code| format!("exit {code}")),
                            last_line(&said).unwrap_or("no message")
                        ),
                        fix: "run `strix-toolbox status` on the node".into(),
                    },
                },
            });
        };
        if hello.version != VERSION {
            drop(stdin);
            let _ = tokio::time::timeout(limit, child.wait()).await;
            return Ok(Agent::OtherVersion(hello.version));
        }
        if hello.protocol != PROTOCOL {
            return Ok(Agent::Broken {
                message: format!(
                    "node {node}: its strix-toolbox {VERSION} speaks protocol {}, this one {PROTOCOL}: two builds of \
                     one version",
                    hello.protocol
                ),
                fix: INSTALL_FIX.into(),
            });
        }
        let waiting: Arc<Mutex<HashMap<u64, oneshot::Sender<Outcome>>>> = Arc::default();
        tokio::spawn(deliver(lines, waiting.clone()));
        Ok(Agent::Ready(Box::new(Channel {
            hello,
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            waiting,
            next_id: AtomicU64::new(1),
            child: tokio::sync::Mutex::new(child),
            stderr: kept,
        })))
    }

    /// Send `call` and wait for its answer; None when the channel ended first.
    async fn ask(&self, call: NodeCall) -> Option<Outcome> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let text = line(&Request { id, call }).ok()?;
        let (answer, answered) = oneshot::channel();
        self.waiting.lock().ok()?.insert(id, answer);
        {
            let mut stdin = self.stdin.lock().await;
            let pipe = stdin.as_mut()?;
            if pipe.write_all(text.as_bytes()).await.is_err() || pipe.flush().await.is_err() {
                return None;
            }
        }
        answered.await.ok()
    }

    /// Why the channel ended under a call: ssh's failure explained, else the node's last words.
    async fn lost(&self, session: &NodeSession, node: &str) -> Error {
        let status = {
            let mut child = self.child.lock().await;
            tokio::time::timeout(Duration::from_secs(5), child.wait()).await.ok().and_then(|s| s.ok())
        };
        let said = String::from_utf8_lossy(&self.stderr.lock().map(|k| k.clone()).unwrap_or_default()).into_owned();
        if let Some(error) = session.channel_failure(status.and_then(|s| s.code()), &said).await {
            return error;
        }
        Error::Node {
            node: node.to_string(),
            message: format!(
                "node {node}: its strix-toolbox stopped answering ({}): {}",
                status.map_or("still running".to_string(), |s| s.to_string()),
                last_line(&said).unwrap_or("no message")
            ),
            fix: Some("check the node (`strix-toolbox status` there), then run again".into()),
        }
    }

    /// End of input for the node: it finishes what it was asked and exits (bounded).
    async fn close(self) {
        self.stdin.lock().await.take();
        let mut child = self.child.lock().await;
        if tokio::time::timeout(Duration::from_secs(10), child.wait()).await.is_err() {
            let _ = child.kill().await;
        }
    }
}

/// Hand each answer to the call waiting for it; at the end of the channel, drop every waiter
/// (their calls then ask why it ended).
async fn deliver(
    mut lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    waiting: Arc<Mutex<HashMap<u64, oneshot::Sender<Outcome>>>>,
) {
    while let Ok(Some(text)) = lines.next_line().await {
        let Ok(response) = serde_json::from_str::<Response>(&text) else { continue };
        let waiter = waiting.lock().ok().and_then(|mut waiting| waiting.remove(&response.id));
        if let Some(waiter) = waiter {
            let _ = waiter.send(response.outcome);
        }
    }
    if let Ok(mut waiting) = waiting.lock() {
        waiting.clear();
    }
}

/// Keep the last [`STDERR_KEPT`] bytes the channel printed on stderr.
async fn keep_tail(mut stderr: tokio::process::ChildStderr, kept: Arc<Mutex<Vec<u8>>>) {
    let mut buffer = [0u8; 4096];
    while let Ok(read) = stderr.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        if let Ok(mut kept) = kept.lock() {
            kept.extend_from_slice(&buffer[..read]);
            let excess = kept.len().saturating_sub(STDERR_KEPT);
            kept.drain(..excess);
        }
    }
}

/// `strix-toolbox --version` on the node → `0.1.0`; None when it does not run.
async fn installed_version(session: &NodeSession) -> Option<String> {
    let output = session.run(&strix_argv(&["--version"]), None).await.ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    output.success().then(|| text.split_whitespace().nth(1).unwrap_or_default().to_string())
}

fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|line| !line.is_empty())
}

pub fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}
