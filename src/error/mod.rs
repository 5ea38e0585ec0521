//! One error type for the whole program. Each variant is a kind of failure (usage, host, engine,
//! registry, command, node, verification, interrupted, nodes...) carrying what failed, why and,
//! where there is one, the fix: exit codes, `--json` error objects and the cluster's
//! all-or-nothing decisions tell failures apart by kind, never by their text.
//!
//! Display renders `MESSAGE. Fix: FIX`; [`Error::report`] gives the same as a serializable
//! [`ErrorReport`], and [`Error::from_remote`] turns a node's report back into an error.

mod multi;
mod report;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use multi::MultiError;
#[cfg(test)]
pub use report::ErrorObject;
pub use report::{ErrorReport, NodeErrorReport};

/// Exit code for a failure (something did not work).
pub const EXIT_FAILURE: i32 = 1;
/// Exit code for a usage error (the command line was wrong).
pub const EXIT_USAGE: i32 = 2;
/// Exit code after Ctrl-C (128 + SIGINT), as shells report a process SIGINT ended.
pub const EXIT_INTERRUPTED: i32 = 130;
/// Exit code after SIGTERM (128 + SIGTERM).
pub const EXIT_TERMINATED: i32 = 143;

/// The signal that stopped an operation: it decides the exit code (130 or 143).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Signal {
    /// SIGINT: Ctrl-C at the terminal.
    Interrupt,
    /// SIGTERM: `kill`, `systemctl stop`, a container engine stopping us.
    Terminate,
}

impl Signal {
    pub fn exit_code(self) -> i32 {
        match self {
            Signal::Interrupt => EXIT_INTERRUPTED,
            Signal::Terminate => EXIT_TERMINATED,
        }
    }

    /// How the message says what stopped us.
    pub fn stopped(self) -> &'static str {
        match self {
            Signal::Interrupt => "interrupted",
            Signal::Terminate => "interrupted by SIGTERM",
        }
    }
}

/// What kind of failure an error is: the name `--json` error objects carry (`"kind": "container-engine"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// The command line asked for something that cannot be (exit 2).
    Usage,
    /// A host fact could not be read, or says this host cannot do what was asked.
    Host,
    /// The container engine failed an operation or cannot be reached (read under its old name,
    /// "engine", too: a node on the previous release says so).
    #[serde(alias = "engine")]
    ContainerEngine,
    /// A registry refused a pull or push, or an image lacks what the registry should give it.
    Registry,
    /// An external program (toolbox, distrobox, a credential helper, ssh) failed.
    Command,
    /// A node could not be reached or used (ssh, its strix-toolbox).
    Node,
    /// A toolbox does not pass its checks.
    Verification,
    /// Ctrl-C or SIGTERM stopped the operation, after its cleanup (exit 130 or 143).
    Interrupted,
    /// Several nodes failed, each for its own reason.
    Nodes,
    /// An RCCL artifact cannot be used: unreadable, damaged, or not for gfx1151.
    Artifact,
    /// A toolbox is not in a state that allows the operation: missing, not ours, running, busy.
    Toolbox,
    /// A bug: a state the program should never reach.
    Internal,
}

impl ErrorKind {
    const ALL: [ErrorKind; 12] = [
        ErrorKind::Usage,
        ErrorKind::Host,
        ErrorKind::ContainerEngine,
        ErrorKind::Registry,
        ErrorKind::Command,
        ErrorKind::Node,
        ErrorKind::Verification,
        ErrorKind::Interrupted,
        ErrorKind::Nodes,
        ErrorKind::Artifact,
        ErrorKind::Toolbox,
        ErrorKind::Internal,
    ];

    /// Its name, as `--json` error objects and the node protocol carry it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Usage => "usage",
            ErrorKind::Host => "host",
            ErrorKind::ContainerEngine => "container-engine",
            ErrorKind::Registry => "registry",
            ErrorKind::Command => "command",
            ErrorKind::Node => "node",
            ErrorKind::Verification => "verification",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::Nodes => "nodes",
            ErrorKind::Artifact => "artifact",
            ErrorKind::Toolbox => "toolbox",
            ErrorKind::Internal => "internal",
        }
    }

    /// The kind named `name`; None for a name this build does not know.
    pub fn parse(name: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// The exit code of a failure of this kind, when its kind is all that is known (a node's
    /// report): an interruption counts as Ctrl-C.
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::Usage => EXIT_USAGE,
            ErrorKind::Interrupted => EXIT_INTERRUPTED,
            _ => EXIT_FAILURE,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The user asked for something that cannot be: bad channel, name, reference...
    #[error("{0}")]
    Usage(String),

    /// A host fact could not be read or is wrong: no GPU, a limited memlock, an unusable host
    /// root or lock directory. `what` names the fact or path.
    #[error("{message}{}", fix_suffix(.fix))]
    Host { what: String, message: String, fix: Option<String> },

    /// A file on this host could not be read (kind: host).
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The container engine refused or failed an operation.
    #[error("{engine}: {action} failed: {message}{}", fix_suffix(.fix))]
    ContainerEngine { engine: &'static str, action: String, message: String, fix: Option<String> },

    /// No container engine to talk to: its socket does not answer, its service does not start (kind: container-engine).
    #[error("{message}{}", fix_suffix(.fix))]
    ContainerEngineUnavailable { engine: &'static str, message: String, fix: Option<String> },

    /// A registry refused a pull, push or login, or an image lacks its registry digest.
    #[error("{message}{}", fix_suffix(.fix))]
    Registry { reference: String, message: String, fix: Option<String> },

    /// An external program (toolbox, distrobox, podman CLI, a credential helper, ssh) failed.
    #[error("`{program}` failed: {message}{}", fix_suffix(.fix))]
    Command { program: String, message: String, fix: Option<String> },

    /// A node could not be reached or used over ssh; the message names the node.
    #[error("{message}{}", fix_suffix(.fix))]
    Node { node: String, message: String, fix: Option<String> },

    /// A node's own strix-toolbox failed: its error object, kind kept, scoped to the node.
    #[error("node {node}: {report}")]
    Remote { node: String, report: ErrorReport },

    /// A toolbox failed its checks.
    #[error("{message}{}", fix_suffix(.fix))]
    Verification { message: String, fix: Option<String> },

    /// Ctrl-C or SIGTERM came during `during`; the work was undone before this was returned.
    #[error("{} during {during}; nothing was changed", .signal.stopped())]
    Interrupted { during: String, signal: Signal },

    /// Per-node failures, each naming its node and carrying its full error.
    #[error(transparent)]
    Nodes(#[from] MultiError),

    /// An artifact cannot be used: an RCCL library unreadable, damaged, or not for gfx1151; a
    /// model's header damaged.
    #[error("{message}{}", fix_suffix(.fix))]
    Artifact { path: PathBuf, message: String, fix: Option<String> },

    /// The toolbox `name` is not in a state that allows the operation.
    #[error("{message}{}", fix_suffix(.fix))]
    Toolbox { name: String, message: String, fix: Option<String> },

    /// Another error, with what was being done when it happened; its kind is the source's.
    #[error("{context}: {source}")]
    Context {
        context: String,
        #[source]
        source: Box<Error>,
    },

    /// A bug: a state the program should never reach.
    #[error("internal: {}. Fix: {}", .0, INTERNAL_FIX)]
    Internal(String),
}

/// `. Fix: FIX`, or nothing: how every variant with a fix ends its message.
fn fix_suffix(fix: &Option<String>) -> String {
    fix.as_ref().map_or(String::new(), |fix| format!(". Fix: {fix}"))
}

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Usage(_) => ErrorKind::Usage,
            Error::Host { .. } | Error::Read { .. } => ErrorKind::Host,
            Error::ContainerEngine { .. } | Error::ContainerEngineUnavailable { .. } => ErrorKind::ContainerEngine,
            Error::Registry { .. } => ErrorKind::Registry,
            Error::Command { .. } => ErrorKind::Command,
            Error::Node { .. } => ErrorKind::Node,
            Error::Remote { report, .. } => report.kind,
            Error::Verification { .. } => ErrorKind::Verification,
            Error::Interrupted { .. } => ErrorKind::Interrupted,
            Error::Nodes(_) => ErrorKind::Nodes,
            Error::Artifact { .. } => ErrorKind::Artifact,
            Error::Toolbox { .. } => ErrorKind::Toolbox,
            Error::Context { source, .. } => source.kind(),
            Error::Internal(_) => ErrorKind::Internal,
        }
    }

    /// The process exit code: 2 for usage, 130 after Ctrl-C, 143 after SIGTERM, else 1. Several
    /// nodes' failures give their common code (all interrupted: 130), or 1 when they differ.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Interrupted { signal, .. } => signal.exit_code(),
            Error::Nodes(nodes) => nodes.exit_code(),
            Error::Remote { report, .. } => report.exit_code(),
            Error::Context { source, .. } => source.exit_code(),
            other => other.kind().exit_code(),
        }
    }

    /// The fix this error carries, when it has one apart from its message.
    pub fn fix(&self) -> Option<&str> {
        match self {
            Error::Host { fix, .. }
            | Error::ContainerEngine { fix, .. }
            | Error::ContainerEngineUnavailable { fix, .. }
            | Error::Registry { fix, .. }
            | Error::Command { fix, .. }
            | Error::Node { fix, .. }
            | Error::Verification { fix, .. }
            | Error::Artifact { fix, .. }
            | Error::Toolbox { fix, .. } => fix.as_deref(),
            Error::Remote { report, .. } => report.fix.as_deref(),
            Error::Context { source, .. } => source.fix(),
            Error::Internal(_) => Some(INTERNAL_FIX),
            Error::Usage(text) => report::split_fix(text).1,
            Error::Read { .. } | Error::Interrupted { .. } | Error::Nodes(_) => None,
        }
    }

    /// A node's error object (from its `--json` output) as this side's error: scoped to the
    /// node, its kind, message and fix kept.
    pub fn from_remote(node: &str, report: ErrorReport) -> Error {
        Error::Remote { node: node.to_string(), report }
    }

    /// This error with what was being done when it happened in front; the kind stays.
    pub fn context(self, context: impl Into<String>) -> Error {
        Error::Context { context: context.into(), source: Box::new(self) }
    }

    pub fn read(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Read { path: path.into(), source }
    }

    /// A host fact that is wrong, with its fix.
    pub fn host(what: impl Into<String>, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Error::Host { what: what.into(), message: message.into(), fix: Some(fix.into()) }
    }

    /// An engine operation that failed, as the engine said it (no fix known).
    pub fn engine(engine: &'static str, action: impl Into<String>, message: impl Into<String>) -> Self {
        Error::ContainerEngine { engine, action: action.into(), message: message.into(), fix: None }
    }

    /// A toolbox whose state refuses the operation, with the fix.
    pub fn toolbox(name: impl Into<String>, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Error::Toolbox { name: name.into(), message: message.into(), fix: Some(fix.into()) }
    }

    /// An unusable artifact, with the fix.
    pub fn artifact(path: impl Into<PathBuf>, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Error::Artifact { path: path.into(), message: message.into(), fix: Some(fix.into()) }
    }
}

/// What to do about an [`Error::Internal`].
const INTERNAL_FIX: &str = "this is a bug in strix-toolbox; please report it";

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The last line with something on it of what a program printed, for an error message (None: it
/// printed nothing).
pub fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|line| !line.is_empty())
}

#[cfg(test)]
mod tests;
