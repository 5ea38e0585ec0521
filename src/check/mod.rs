//! One vocabulary for every check strix-toolbox makes (doctor on the host, verify inside a
//! toolbox, the cluster's cross-node checks): what was checked, how it came out, what fixes it.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    /// Information, never a failure: what could not be told, or a difference worth knowing.
    Info,
    /// Not checked, and the message says why (a tool the image lacks): never a pass.
    Skipped,
    Warn,
    Fail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// Short stable identifier, e.g. "gpu", "kernel:iommu", "rdma:rocep1s0f0/1".
    pub name: String,
    pub status: Status,
    pub message: String,
    /// The command or file that fixes it (None when passing).
    pub fix: Option<String>,
}

impl Check {
    pub fn new(name: impl Into<String>, status: Status, message: impl Into<String>, fix: Option<String>) -> Check {
        Check { name: name.into(), status, message: message.into(), fix }
    }
}
