//! `cluster disconnect`: close the ssh masters that earlier cluster commands left up for reuse
//! (`--ssh-persist`), asked over each control socket in the mux protocol (no `ssh -O exit`), and
//! remove what they kept (socket, log, the node's recorded identity). No node is contacted.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::ClusterSettings;
use crate::error::Result;
use crate::node::ssh_mux;
use crate::node::ssh_persist::MasterHome;
use crate::paths::private_dir;

/// How long a master that agreed to exit may take to remove its socket.
const EXIT_LIMIT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisconnectReport {
    pub nodes: Vec<NodeDisconnect>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeDisconnect {
    pub node: String,
    /// A master was up and is closed now (false: none was up).
    pub closed: bool,
}

impl DisconnectReport {
    pub fn closed(&self) -> usize {
        self.nodes.iter().filter(|node| node.closed).count()
    }
}

pub async fn cluster_disconnect(settings: &ClusterSettings) -> Result<DisconnectReport> {
    private_dir(&settings.ssh.runtime_dir)?;
    let mut nodes = Vec::new();
    for node in &settings.nodes {
        let home = MasterHome::of(&settings.ssh.runtime_dir, node, settings.ssh.config_file.as_deref());
        let closed = home.exists() && close(&home).await;
        home.remove();
        nodes.push(NodeDisconnect { node: node.clone(), closed });
    }
    Ok(DisconnectReport { nodes })
}

/// Ask the master to exit and wait (bounded) until it no longer answers; true when one was up
/// and is gone. A master may exit before its reply to the request is sent, so its reply does not
/// decide.
async fn close(home: &MasterHome) -> bool {
    let socket = home.control_path();
    if !ssh_mux::alive(&socket) {
        return false;
    }
    ssh_mux::terminate(&socket);
    let started = Instant::now();
    while ssh_mux::alive(&socket) && started.elapsed() < EXIT_LIMIT {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    !ssh_mux::alive(&socket)
}
