//! `cluster init`: write the cluster file from --nodes (and --ssh-config).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::cluster_file_path;
use crate::cluster::nodes::{parse_node_list, ClusterFile};
use crate::commands::cluster::ClusterArgs;
use crate::error::{Error, Result};
use crate::output::{Output, Render};
use crate::settings::Settings;

/// What `cluster init` wrote.
#[derive(Serialize, Deserialize)]
pub(in crate::commands) struct Initialized {
    path: PathBuf,
    cluster: ClusterFile,
}

impl Render for Initialized {
    fn render(&self, out: &Output) {
        let nodes = &self.cluster.nodes;
        out.status(&format!("wrote {} with {} node(s): {}", self.path.display(), nodes.len(), nodes.join(", ")));
    }
}

pub(super) fn run(args: &ClusterArgs, settings: &Settings, out: &Output) -> Result<i32> {
    let list = args
        .nodes
        .as_deref()
        .ok_or_else(|| Error::Usage("`cluster init` needs --nodes NODE,NODE,... (the head first)".into()))?;
    let mut cluster = ClusterFile::new(parse_node_list(list)?, args.ssh_config.clone())?;
    cluster.ssh_persist = args.ssh_persist;
    let path = cluster_file_path(args, settings)?;
    cluster.write(&path)?;
    out.report(&Initialized { path, cluster });
    Ok(0)
}
