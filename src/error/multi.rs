//! Per-node failures as one error (youki's `MultiError`): each entry names its node and keeps
//! its full error, so the cluster can tell an unreachable node from a refused image, and the
//! exit code from an interrupted run, instead of joining messages with "; ".

use std::fmt;

use super::report::common_exit_code;
use super::Error;

/// Why several nodes failed one operation.
#[derive(Debug)]
pub struct MultiError {
    /// What the nodes were doing and what it means for the whole, e.g. "cluster refresh stopped
    /// before any node swapped".
    pub summary: String,
    pub failures: Vec<NodeError>,
    /// What was done about it, or what to do next: "Every node is as it was (...)."
    pub outcome: Option<String>,
}

/// One node's failure.
#[derive(Debug)]
pub struct NodeError {
    pub node: String,
    pub error: Error,
}

impl MultiError {
    pub fn new(summary: impl Into<String>) -> MultiError {
        MultiError { summary: summary.into(), failures: Vec::new(), outcome: None }
    }

    /// `node`'s failure of the step `summary`, alone, as an error.
    pub fn one(summary: impl Into<String>, node: impl Into<String>, error: Error) -> Error {
        let mut failed = MultiError::new(summary);
        failed.push(node, error);
        failed.into()
    }

    /// Add `node`'s failure.
    pub fn push(&mut self, node: impl Into<String>, error: Error) {
        self.failures.push(NodeError { node: node.into(), error });
    }

    /// Say what was done about the failures (the cleanup), or what to do next.
    pub fn with_outcome(mut self, outcome: impl Into<String>) -> MultiError {
        self.outcome = Some(outcome.into());
        self
    }

    pub fn is_empty(&self) -> bool {
        self.failures.is_empty()
    }

    /// The exit code the nodes' failures share (all interrupted by Ctrl-C: 130), else 1.
    pub fn exit_code(&self) -> i32 {
        common_exit_code(self.failures.iter().map(|failure| failure.error.exit_code()))
    }
}

/// One failure on the summary's line (`SUMMARY: NODE: ERROR. OUTCOME`); several, one a line.
impl fmt::Display for MultiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.summary)?;
        match self.failures.as_slice() {
            [] => {}
            [only] => write!(f, ": {}", only)?,
            several => {
                write!(f, ":")?;
                for failure in several {
                    write!(f, "\n  {failure}")?;
                }
            }
        }
        match (&self.outcome, self.failures.len()) {
            (Some(outcome), 0 | 1) => write!(f, ". {outcome}"),
            (Some(outcome), _) => write!(f, "\n{outcome}"),
            (None, _) => Ok(()),
        }
    }
}

impl std::error::Error for MultiError {}

/// `NODE: ERROR`, the node named once: an error that already begins with it (a node's own
/// error, `node NODE: …`) is not prefixed again.
impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.error.to_string();
        let named = [format!("node {}: ", self.node), format!("{}: ", self.node)];
        match named.iter().find_map(|prefix| text.strip_prefix(prefix.as_str())) {
            Some(rest) => write!(f, "{}: {rest}", self.node),
            None => write!(f, "{}: {text}", self.node),
        }
    }
}
