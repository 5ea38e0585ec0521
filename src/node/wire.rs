//! The node protocol: how calls travel between the head and a node's `strix-toolbox agent`, one
//! JSON value per line over the ssh channel's stdin and stdout. Its messages are its own, apart
//! from what commands print: both sides say first which protocol they speak (the node's
//! [`Hello`], the head's [`HeadHello`], each sent at once, so no round trip waits for them);
//! then each [`Request`] carries an id, and its [`Response`] comes back with that id, in
//! whatever order the calls finish, so one channel carries every call of a cluster command,
//! concurrent ones too. A node's error travels as a [`WireError`], whose kind is a name: one this
//! side does not know reads as a failure of the node, never as a reply that cannot be read.
//!
//! No line is longer than [`LINE_LIMIT`], on either side: a node that sends more is cut off, and
//! an answer that would be longer is sent as an error.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use super::call::NodeCall;
use super::identity::NodeIdentity;
use crate::error::{ErrorKind, ErrorReport, NodeErrorReport};
use crate::paths::Paths;

/// The protocol this build speaks; bumped whenever a message, a call or a reply changes shape.
/// Both sides must speak the same: their strix-toolbox versions are the same too, so a mismatch
/// means two builds of one version.
pub const PROTOCOL: u32 = 5;

/// The longest line either side sends or reads: an exec's captured output (8 MiB a stream) fits
/// with room for JSON's escapes.
pub const LINE_LIMIT: usize = 64 << 20;

/// The node's first line: who answers, and the protocol it speaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// `strix-toolbox`'s version on the node.
    pub version: String,
    pub protocol: u32,
    /// Where it runs from.
    pub program: Option<String>,
    /// The node's `$HOME`, where `cluster install` puts the binary.
    pub home: Option<String>,
    /// Its boot and sshd host keys: the head reuses a persistent ssh master only while they stay
    /// what they were when the master was opened (protocol 3).
    #[serde(default)]
    pub identity: Option<NodeIdentity>,
}

impl Hello {
    pub fn here(paths: &Paths, identity: Option<NodeIdentity>) -> Hello {
        Hello {
            version: env!("CARGO_PKG_VERSION").to_string(),
            protocol: PROTOCOL,
            program: std::env::current_exe().ok().map(|path| path.display().to_string()),
            home: paths.home().map(|home| home.display().to_string()),
            identity,
        }
    }
}

/// The head's first line: the protocol its requests are in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeadHello {
    pub head: HeadSpeaks,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadSpeaks {
    /// `strix-toolbox`'s version on the head.
    pub version: String,
    pub protocol: u32,
}

impl HeadHello {
    pub fn here() -> HeadHello {
        HeadHello { head: HeadSpeaks { version: env!("CARGO_PKG_VERSION").to_string(), protocol: PROTOCOL } }
    }
}

/// One call from the head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    pub call: NodeCall,
}

/// Its answer: the call's report, or the node's error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub id: u64,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Ok(serde_json::Value),
    Error(WireError),
}

/// A node's error as it travels: its kind by name, what failed, the fix, and for a failure of
/// several nodes each node's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireError {
    pub kind: String,
    pub message: String,
    #[serde(default)]
    pub fix: Option<String>,
    #[serde(default)]
    pub nodes: Vec<WireNodeError>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireNodeError {
    pub node: String,
    #[serde(flatten)]
    pub error: WireError,
}

impl From<&ErrorReport> for WireError {
    fn from(report: &ErrorReport) -> WireError {
        WireError {
            kind: report.kind.as_str().to_string(),
            message: report.message.clone(),
            fix: report.fix.clone(),
            nodes: report
                .nodes
                .iter()
                .map(|node| WireNodeError { node: node.node.clone(), error: WireError::from(&node.error) })
                .collect(),
        }
    }
}

impl WireError {
    /// The error as this side reports it; a kind this side does not know (a newer node's) is
    /// a failure of the node.
    pub fn into_report(self) -> ErrorReport {
        ErrorReport {
            kind: ErrorKind::parse(&self.kind).unwrap_or(ErrorKind::Node),
            message: self.message,
            fix: self.fix,
            nodes: self
                .nodes
                .into_iter()
                .map(|node| NodeErrorReport { node: node.node, error: node.error.into_report() })
                .collect(),
        }
    }
}

/// `value` as one line of the wire (a trailing newline; JSON never holds a raw one).
pub fn line<T: Serialize>(value: &T) -> serde_json::Result<String> {
    let mut text = serde_json::to_string(value)?;
    text.push('\n');
    Ok(text)
}

/// Why a line could not be read.
#[derive(Debug)]
pub enum LineError {
    /// Longer than [`LINE_LIMIT`] (the rest of it was read and dropped).
    TooLong,
    /// Not UTF-8, or the stream failed.
    Unreadable(std::io::Error),
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::TooLong => write!(f, "a line of more than {} MiB", LINE_LIMIT >> 20),
            LineError::Unreadable(error) => write!(f, "{error}"),
        }
    }
}

/// The next line (without its newline), at most `limit` bytes; None at the end of the stream.
pub async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R, limit: usize) -> Result<Option<String>, LineError> {
    let mut bytes = Vec::new();
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await.map_err(LineError::Unreadable)?;
        if available.is_empty() {
            if bytes.is_empty() && !too_long {
                return Ok(None);
            }
            break;
        }
        let (taken, ended) = match available.iter().position(|byte| *byte == b'\n') {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        if !too_long {
            bytes.extend_from_slice(&available[..taken]);
            too_long = bytes.len() > limit + usize::from(ended);
        }
        reader.consume(taken);
        if ended {
            break;
        }
    }
    if too_long {
        return Err(LineError::TooLong);
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|e| LineError::Unreadable(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_read_whole_and_cut_off_past_the_limit() {
        let input = format!("short\n{}\nnext\nlast", "x".repeat(40));
        let mut reader = tokio::io::BufReader::with_capacity(8, input.as_bytes());
        assert_eq!(read_line(&mut reader, 10).await.unwrap().as_deref(), Some("short"));
        assert!(matches!(read_line(&mut reader, 10).await, Err(LineError::TooLong)));
        assert_eq!(read_line(&mut reader, 10).await.unwrap().as_deref(), Some("next"), "the long line is skipped");
        assert_eq!(read_line(&mut reader, 10).await.unwrap().as_deref(), Some("last"));
        assert_eq!(read_line(&mut reader, 10).await.unwrap(), None);
        let mut exact = tokio::io::BufReader::new("0123456789\n".as_bytes());
        assert_eq!(read_line(&mut exact, 10).await.unwrap().as_deref(), Some("0123456789"));
    }

    #[test]
    fn an_error_kind_this_side_does_not_know_is_a_failure_of_the_node() {
        let text = r#"{"kind":"quota","message":"disk quota","fix":"free some","nodes":[]}"#;
        let report = serde_json::from_str::<WireError>(text).unwrap().into_report();
        assert_eq!(
            (report.kind, report.message.as_str(), report.fix.as_deref()),
            (ErrorKind::Node, "disk quota", Some("free some"))
        );
        let known = WireError::from(&crate::error::Error::Usage("bad".into()).report());
        assert_eq!((known.kind.as_str(), known.clone().into_report().kind), ("usage", ErrorKind::Usage));
    }

    #[test]
    fn the_head_s_hello_is_not_a_request() {
        let hello = line(&HeadHello::here()).unwrap();
        assert!(serde_json::from_str::<Request>(&hello).is_err(), "{hello}");
        let request = line(&Request { id: 1, call: crate::node::call::StatusCall {}.into() }).unwrap();
        assert!(serde_json::from_str::<HeadHello>(&request).is_err(), "{request}");
    }
}
