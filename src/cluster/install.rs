//! `cluster install`: copy this strix-toolbox to `~/.local/bin` on every node that lacks it or runs
//! another version; the copy is checked by its sha256 before it replaces anything.

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::remote::{argv, RemoteNode, VERSION};
use super::{close_all, connect_all, in_cluster_order, ClusterSettings};
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstallAction {
    Installed,
    UpToDate,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInstall {
    pub node: String,
    pub action: InstallAction,
    /// Where the node's strix-toolbox is now.
    pub path: Option<String>,
    /// The version it had before (None: none).
    pub previous_version: Option<String>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallReport {
    pub version: String,
    /// sha256 of the binary copied.
    pub sha256: String,
    pub nodes: Vec<NodeInstall>,
}

impl InstallReport {
    pub fn exit_code(&self) -> i32 {
        i32::from(self.nodes.iter().any(|n| n.action == InstallAction::Failed))
    }
}

pub async fn cluster_install(settings: &ClusterSettings) -> Result<InstallReport> {
    let exe =
        std::env::current_exe().map_err(|e| Error::Failed(format!("cannot tell where this strix-toolbox is: {e}")))?;
    let binary = std::fs::read(&exe).map_err(|e| Error::read(&exe, e))?;
    let sha256 = format!("{:x}", Sha256::digest(&binary));

    let (connected, unreachable) = connect_all(settings).await;
    let mut nodes: Vec<NodeInstall> =
        join_all(connected.iter().map(|remote| install_on(remote, &binary, &sha256))).await;
    nodes.extend(unreachable.into_iter().map(|(node, error)| NodeInstall {
        node,
        action: InstallAction::Failed,
        path: None,
        previous_version: None,
        error: Some(error.to_string()),
    }));
    in_cluster_order(settings, &mut nodes, |n| &n.node);
    close_all(connected).await;
    Ok(InstallReport { version: VERSION.to_string(), sha256, nodes })
}

async fn install_on(remote: &RemoteNode, binary: &[u8], sha256: &str) -> NodeInstall {
    let mut report = NodeInstall {
        node: remote.name.clone(),
        action: InstallAction::UpToDate,
        path: remote.program().map(str::to_string),
        previous_version: remote.version().map(str::to_string),
        error: None,
    };
    if remote.require_ours().is_ok() {
        return report;
    }
    match copy_binary(remote, binary, sha256).await {
        Ok(path) => {
            report.action = InstallAction::Installed;
            report.path = Some(path);
        }
        Err(error) => {
            report.action = InstallAction::Failed;
            report.error = Some(error.to_string());
        }
    }
    report
}

/// Write under a temporary name, check its sha256 and that it runs, then rename it into place.
async fn copy_binary(remote: &RemoteNode, binary: &[u8], sha256: &str) -> Result<String> {
    let Some(home) = remote.home().await? else {
        return Err(Error::Failed(format!("node {} has no HOME to install into", remote.name)));
    };
    let path = format!("{}/.local/bin/strix-toolbox", home.trim_end_matches('/'));
    let temp = format!("{path}.strix-new");
    let dir = path.rsplit_once('/').map_or(".", |(dir, _)| dir).to_string();
    let step = |what: &str, output: super::ssh::RemoteOutput| {
        if output.status == Some(0) {
            Ok(output)
        } else {
            Err(Error::Failed(format!(
                "node {}: {what} failed: {}",
                remote.name,
                String::from_utf8_lossy(&output.stderr).trim()
            )))
        }
    };
    step("mkdir", remote.run(&argv(&["mkdir", "-p", &dir]), None).await?)?;
    let of = format!("of={temp}");
    step("copying the binary", remote.run(&argv(&["dd", &of, "bs=1M", "status=none"]), Some(binary.to_vec())).await?)?;
    let remove_temp = argv(&["rm", "-f", &temp]);
    let cleanup = || remote.run(&remove_temp, None);
    let sum = step("sha256sum", remote.run(&argv(&["sha256sum", &temp]), None).await?)?;
    let copied = String::from_utf8_lossy(&sum.stdout).split_whitespace().next().unwrap_or_default().to_string();
    if copied != sha256 {
        let _ = cleanup().await;
        return Err(Error::Failed(format!(
            "node {}: the copy's sha256 is {copied}, not {sha256}; nothing was replaced. Fix: check the node's \
             disk space and rerun `strix-toolbox cluster install`",
            remote.name
        )));
    }
    step("chmod", remote.run(&argv(&["chmod", "0755", &temp]), None).await?)?;
    let version = remote.run(&[temp.clone(), "--version".into()], None).await?;
    if version.status != Some(0) {
        let _ = cleanup().await;
        return Err(Error::Failed(format!(
            "node {}: the copied strix-toolbox does not run there ({}); nothing was replaced. Fix: build it for \
             the node's architecture and C library",
            remote.name,
            String::from_utf8_lossy(&version.stderr).trim()
        )));
    }
    step("rename", remote.run(&argv(&["mv", "-f", &temp, &path]), None).await?)?;
    Ok(path)
}
