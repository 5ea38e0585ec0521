//! The error object: what `--json` prints for a failed command (`{"error": {...}}`) and what a
//! node's strix-toolbox sends back over ssh, so the cluster keeps each node's kind of failure.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{fix_suffix, Error, ErrorKind, EXIT_FAILURE};

/// `{"error": REPORT}`: stdout of a command that failed under `--json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorObject {
    pub error: ErrorReport,
}

/// An error as data. `message` followed by `. Fix: FIX` (when there is a fix) is the error's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReport {
    pub kind: ErrorKind,
    /// What failed and why.
    pub message: String,
    /// What to do about it, when known.
    #[serde(default)]
    pub fix: Option<String>,
    /// For kind `nodes`: each node's failure.
    #[serde(default)]
    pub nodes: Vec<NodeErrorReport>,
}

/// One node's failure inside a `nodes` report: `{"node": "strix-b", "kind": ..., "message": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeErrorReport {
    pub node: String,
    #[serde(flatten)]
    pub error: ErrorReport,
}

impl ErrorReport {
    /// The exit code the failure this report describes would give (see [`Error::exit_code`]);
    /// an interruption counts as Ctrl-C, since a report does not say which signal came.
    pub fn exit_code(&self) -> i32 {
        match self.kind {
            ErrorKind::Nodes => common_exit_code(self.nodes.iter().map(|node| node.error.exit_code())),
            kind => kind.exit_code(),
        }
    }
}

impl fmt::Display for ErrorReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.message, fix_suffix(&self.fix))
    }
}

/// The code every failure shares, else 1 (a mix of failures is a failure).
pub(super) fn common_exit_code(mut codes: impl Iterator<Item = i32>) -> i32 {
    match codes.next() {
        Some(first) if codes.all(|code| code == first) => first,
        _ => EXIT_FAILURE,
    }
}

/// `MESSAGE. Fix: FIX` → (MESSAGE, Some(FIX)) at the last `. Fix: `; text without one stays whole.
pub(super) fn split_fix(text: &str) -> (&str, Option<&str>) {
    const MARK: &str = ". Fix: ";
    match text.rfind(MARK) {
        Some(at) => (&text[..at], Some(&text[at + MARK.len()..])),
        None => (text, None),
    }
}

impl Error {
    /// What `--json` prints for this error: `{"error": REPORT}`.
    pub fn json_object(&self) -> ErrorObject {
        ErrorObject { error: self.report() }
    }

    /// This error as data: its kind, its message and fix apart, and each node's failure.
    pub fn report(&self) -> ErrorReport {
        let text = self.to_string();
        let fix = self.fix().map(str::to_string);
        let message = match &fix {
            Some(fix) => text.strip_suffix(&format!(". Fix: {fix}")).map_or_else(|| text.clone(), str::to_string),
            None => text,
        };
        ErrorReport { kind: self.kind(), message, fix, nodes: self.node_reports() }
    }

    fn node_reports(&self) -> Vec<NodeErrorReport> {
        match self {
            Error::Nodes(nodes) => nodes
                .failures
                .iter()
                .map(|failure| NodeErrorReport { node: failure.node.clone(), error: failure.error.report() })
                .collect(),
            Error::Remote { report, .. } => report.nodes.clone(),
            Error::Context { source, .. } => source.node_reports(),
            _ => Vec::new(),
        }
    }
}
