//! One error type for the whole program; each variant says what failed, why, and how to fix it.

use std::path::PathBuf;

/// Exit code for a failure (something did not work).
pub const EXIT_FAILURE: i32 = 1;
/// Exit code for a usage error (the command line was wrong).
pub const EXIT_USAGE: i32 = 2;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The user asked for something that cannot be: bad channel, name, reference...
    #[error("{0}")]
    Usage(String),

    /// A file on the host (or in an artifact) could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The container engine refused or failed an operation.
    #[error("{engine}: {action} failed: {message}")]
    Engine { engine: &'static str, action: String, message: String },

    /// An external program (toolbox, distrobox, podman CLI) failed.
    #[error("`{program}` failed: {message}")]
    Command { program: String, message: String },

    /// Anything else, already phrased as "what failed: why. Fix: what to do".
    #[error("{0}")]
    Failed(String),
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => EXIT_USAGE,
            _ => EXIT_FAILURE,
        }
    }

    pub fn read(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Read { path: path.into(), source }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error as it travels from a node to the head, its kind kept.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ErrorReport {
    pub kind: String,
    pub message: String,
}

impl Error {
    pub fn report(&self) -> ErrorReport {
        ErrorReport { kind: "failed".into(), message: self.to_string() }
    }

    /// The error node `node` answered with.
    pub fn from_remote(node: &str, report: ErrorReport) -> Error {
        Error::Failed(format!("node {node}: {}", report.message))
    }
}
