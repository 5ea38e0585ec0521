//! How calls travel between the head and a node's `strix-toolbox agent`: one JSON value per line
//! over the ssh channel's stdin and stdout. The node speaks first ([`Hello`], so the versions are
//! compared in the same exchange that opens the channel); then each [`Request`] carries an id,
//! and its [`Response`] comes back with that id, in whatever order the calls finish, so one
//! channel carries every call of a cluster command, concurrent ones too.

use serde::{Deserialize, Serialize};

use super::call::NodeCall;
use crate::error::ErrorReport;
use crate::paths::Paths;

/// Bumped when a message changes shape; the version check makes a mismatch rare, this makes it
/// exact.
pub const PROTOCOL: u32 = 1;

/// The node's first line: who answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// `strix-toolbox`'s version on the node.
    pub version: String,
    pub protocol: u32,
    /// Where it runs from.
    pub program: Option<String>,
    /// The node's `$HOME`, where `cluster install` puts the binary.
    pub home: Option<String>,
}

impl Hello {
    pub fn here(paths: &Paths) -> Hello {
        Hello {
            version: env!("CARGO_PKG_VERSION").to_string(),
            protocol: PROTOCOL,
            program: std::env::current_exe().ok().map(|path| path.display().to_string()),
            home: paths.home().map(|home| home.display().to_string()),
        }
    }
}

/// One call from the head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    pub call: NodeCall,
}

/// Its answer: the call's report, or the node's typed error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub id: u64,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Ok(serde_json::Value),
    Error(ErrorReport),
}

/// `value` as one line of the wire (a trailing newline; JSON never holds a raw one).
pub fn line<T: Serialize>(value: &T) -> serde_json::Result<String> {
    let mut text = serde_json::to_string(value)?;
    text.push('\n');
    Ok(text)
}
