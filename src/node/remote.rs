//! A node as the head sees it: its ssh session, and one channel to the node's own strix-toolbox
//! (`agent`), opened with the session and carrying every typed call of the cluster command. The
//! usual cost is one round trip: ssh connects, the node's strix-toolbox says hello with its
//! version and protocol, and the head compares them in the same exchange (its own hello goes
//! out at once, ahead of its first call).
//!
//! The head never waits on a node for ever: an answer that cannot be read fails its call (or,
//! when it names no call, every call) with the node's name, a line longer than the protocol's
//! limit ends the channel, and a channel that ends fails every call waiting on it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncBufRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::oneshot;

use super::ssh::{NodeSession, RemoteOutput, SshOptions};
use crate::error::{last_line, Error, Result};
use crate::node::call::NodeCall;
use crate::node::wire::{
    line, read_line, HeadHello, Hello, LineError, Outcome, Request, Response, LINE_LIMIT, PROTOCOL,
};
use crate::node::Node;

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
        let mut session = NodeSession::connect(name, ssh).await?;
        let limit = ssh.login_limit();
        // Over a reused master the hello needs no login: one that does not come within the
        // connect timeout is a connection that died unseen (a node unplugged), and a new login
        // then fails as fast as a first one would.
        let hello_limit = if session.reused() { ssh.connect_timeout.max(Duration::from_secs(1)) } else { limit };
        let mut agent = Channel::open(&session, name, hello_limit).await;
        if session.reused() && !vouched_for(&session, &agent) {
            // Rebooted, other host keys, or a master that no longer carries a channel: no call
            // goes over it. The new master's login checks the host key as a first one does.
            if let Ok(Agent::Ready(channel)) = agent {
                channel.close().await;
            }
            session.replace_master().await?;
            agent = Channel::open(&session, name, limit).await;
        }
        let agent = agent?;
        session.record_identity(match &agent {
            Agent::Ready(channel) => channel.hello.identity.as_ref(),
            _ => None,
        });
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
            Some(Ok(Outcome::Ok(value))) => Ok(value),
            Some(Ok(Outcome::Error(error))) => Err(Error::from_remote(&self.name, error.into_report())),
            Some(Err(why)) => Err(unreadable_answer(&self.name, &why)),
            None => Err(channel.lost(&self.session, &self.name).await),
        }
    }
}

/// A reused master may carry calls: this strix-toolbox answered over it, and the node says of
/// itself what it said when the master was opened.
fn vouched_for(session: &NodeSession, agent: &Result<Agent>) -> bool {
    let Ok(Agent::Ready(channel)) = agent else { return false };
    match (&channel.hello.identity, session.recorded_identity()) {
        (Some(now), Some(then)) => now.vouches_for_reuse(&then),
        _ => false,
    }
}

/// A node's answer that could not be read, as the call's error.
fn unreadable_answer(node: &str, why: &str) -> Error {
    Error::Node {
        node: node.to_string(),
        message: format!("node {node}: {why}"),
        fix: Some(format!("{INSTALL_FIX}; `strix-toolbox status` on the node says whether it works")),
    }
}

/// `sh -c FIND_PROGRAM strix-toolbox ARGS…`: the node's strix-toolbox with `args`.
fn strix_argv(args: &[&str]) -> Vec<String> {
    let mut argv = argv(&["sh", "-c", FIND_PROGRAM, "strix-toolbox"]);
    argv.extend(args.iter().map(|arg| arg.to_string()));
    argv
}

/// A call's answer as the channel delivers it: the node's outcome, or why its answer could not be
/// read.
type Delivered = std::result::Result<Outcome, String>;

/// The calls waiting for their answers, until the channel ends (then no call waits again).
#[derive(Default)]
struct Waiting {
    calls: HashMap<u64, oneshot::Sender<Delivered>>,
    ended: bool,
}

/// The open channel to a node's `strix-toolbox agent`.
struct Channel {
    hello: Hello,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    waiting: Arc<Mutex<Waiting>>,
    next_id: AtomicU64,
    child: tokio::sync::Mutex<Child>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Channel {
    /// Start `agent` and read its hello (bounded by `limit`); what the node has when it does not
    /// answer.
    async fn open(session: &NodeSession, node: &str, limit: Duration) -> Result<Agent> {
        let mut child = session.spawn(&strix_argv(&["agent"]))?;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(Error::Internal("the ssh channel has no pipes".into()));
        };
        let kept = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn(keep_tail(stderr, kept.clone()));
        // The head's hello goes ahead of everything, read by the node once it has said its own.
        let head_hello =
            line(&HeadHello::here()).map_err(|e| Error::Internal(format!("cannot encode the hello: {e}")))?;
        let _ = stdin.write_all(head_hello.as_bytes()).await;
        let mut lines = BufReader::new(stdout);
        let first = match tokio::time::timeout(limit, read_line(&mut lines, LINE_LIMIT)).await {
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
                    "node {node}: its strix-toolbox {VERSION} speaks protocol {}, this one (strix-toolbox {VERSION}) \
                     protocol {PROTOCOL}: two builds of one version",
                    hello.protocol
                ),
                fix: INSTALL_FIX.into(),
            });
        }
        let waiting: Arc<Mutex<Waiting>> = Arc::default();
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
    async fn ask(&self, call: NodeCall) -> Option<Delivered> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let text = line(&Request { id, call }).ok()?;
        if text.len() > LINE_LIMIT {
            return Some(Err(format!("the call is over the protocol's limit of {} MiB", LINE_LIMIT >> 20)));
        }
        let (answer, answered) = oneshot::channel();
        {
            let mut waiting = self.waiting.lock().ok()?;
            if waiting.ended {
                return None;
            }
            waiting.calls.insert(id, answer);
        }
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

/// Hand each answer to the call waiting for it. An answer that cannot be read fails its call;
/// one that names no call, a line over the limit, or the end of the channel end it: every call
/// waiting then fails (and asks why it ended), and no call waits on it again.
async fn deliver(mut lines: impl AsyncBufRead + Unpin, waiting: Arc<Mutex<Waiting>>) {
    let failed_all = loop {
        let text = match read_line(&mut lines, LINE_LIMIT).await {
            Ok(Some(text)) => text,
            Ok(None) => break None,
            Err(LineError::TooLong) => break Some(format!("it sent {}: the channel was closed", LineError::TooLong)),
            Err(error) => break Some(format!("its answers cannot be read ({error})")),
        };
        let (id, delivered) = match serde_json::from_str::<Response>(&text) {
            Ok(response) => (response.id, Ok(response.outcome)),
            Err(error) => match serde_json::from_str::<serde_json::Value>(&text).ok().and_then(|v| v["id"].as_u64()) {
                Some(id) => (id, Err(format!("its answer to call {id} is not one this strix-toolbox reads ({error})"))),
                None => break Some(format!("it sent a line that is no answer ({error}): {}", clipped(&text))),
            },
        };
        let waiter = waiting.lock().ok().and_then(|mut waiting| waiting.calls.remove(&id));
        if let Some(waiter) = waiter {
            let _ = waiter.send(delivered);
        }
    };
    if let Ok(mut waiting) = waiting.lock() {
        waiting.ended = true;
        for (_, waiter) in waiting.calls.drain() {
            if let Some(why) = &failed_all {
                let _ = waiter.send(Err(why.clone()));
            }
        }
    }
}

/// The start of a line, for an error message.
fn clipped(text: &str) -> String {
    let start: String = text.chars().take(120).collect();
    if start.len() < text.len() {
        format!("{start}…")
    } else {
        start
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

pub fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;
    use crate::node::wire::{WireError, LINE_LIMIT};

    /// Calls 1 to `count` waiting on a channel whose lines `deliver` reads from the returned writer.
    fn channel(count: u64) -> (tokio::io::DuplexStream, Arc<Mutex<Waiting>>, Vec<oneshot::Receiver<Delivered>>) {
        let (node, head) = tokio::io::duplex(1 << 16);
        let waiting: Arc<Mutex<Waiting>> = Arc::default();
        let mut answers = Vec::new();
        for id in 1..=count {
            let (answer, answered) = oneshot::channel();
            waiting.lock().unwrap().calls.insert(id, answer);
            answers.push(answered);
        }
        tokio::spawn(deliver(BufReader::new(head), waiting.clone()));
        (node, waiting, answers)
    }

    fn response(id: u64, outcome: Outcome) -> String {
        line(&Response { id, outcome }).unwrap()
    }

    #[tokio::test]
    async fn an_answer_that_cannot_be_read_fails_its_call_and_the_others_still_come() {
        let (mut node, _, mut answers) = channel(3);
        let unknown_kind = WireError { kind: "quota".into(), message: "full".into(), fix: None, nodes: vec![] };
        node.write_all(b"{\"id\": 2, \"outcome\": {\"maybe\": 1}}\n").await.unwrap();
        node.write_all(response(3, Outcome::Error(unknown_kind)).as_bytes()).await.unwrap();
        node.write_all(response(1, Outcome::Ok(serde_json::json!({"a": 1}))).as_bytes()).await.unwrap();
        let third = answers.pop().unwrap().await.unwrap();
        let Ok(Outcome::Error(error)) = third else { panic!("{third:?}") };
        assert_eq!(error.into_report().kind, crate::error::ErrorKind::Node, "an unknown kind is the node's failure");
        let second = answers.pop().unwrap().await.unwrap().unwrap_err();
        assert!(second.contains("its answer to call 2 is not one this strix-toolbox reads"), "{second}");
        assert!(matches!(answers.pop().unwrap().await.unwrap(), Ok(Outcome::Ok(_))));
        let error = unreadable_answer("strix-b", &second).to_string();
        assert!(error.starts_with("node strix-b: its answer to call 2") && error.contains("Fix:"), "{error}");
    }

    #[tokio::test]
    async fn a_line_that_names_no_call_fails_every_waiting_call_and_no_call_waits_again() {
        let (mut node, waiting, answers) = channel(2);
        node.write_all(b"Welcome to the node!\n").await.unwrap();
        for answered in answers {
            let why = answered.await.unwrap().unwrap_err();
            assert!(why.contains("a line that is no answer") && why.contains("Welcome to the node!"), "{why}");
        }
        assert!(waiting.lock().unwrap().ended);
    }

    #[tokio::test]
    async fn a_line_over_the_limit_ends_the_channel() {
        let (mut node, _, answers) = channel(1);
        let writing = tokio::spawn(async move {
            let _ = node.write_all(&vec![b'{'; LINE_LIMIT + 1]).await;
            let _ = node.write_all(b"\n").await;
            node
        });
        let why = answers.into_iter().next().unwrap().await.unwrap().unwrap_err();
        assert!(why.contains("a line of more than 64 MiB"), "{why}");
        drop(writing.await);
    }

    #[tokio::test]
    async fn a_channel_that_ends_fails_every_waiting_call() {
        let (node, waiting, answers) = channel(2);
        drop(node);
        for answered in answers {
            assert!(answered.await.is_err(), "the call is told the channel ended (then asks why)");
        }
        assert!(waiting.lock().unwrap().ended, "a later call does not wait");
    }
}
