//! `cluster logs`: the logs of what launches started on every node (or one), each line with its node.

use crate::cluster::{with_nodes, ClusterSettings};
use crate::commands::logs::LogsArgs;
use crate::error::{Error, Result};
use crate::output::Output;
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct ClusterLogsArgs {
    #[command(flatten)]
    pub logs: LogsArgs,

    /// Only this node's logs.
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
}

pub(super) async fn run(mut cluster: ClusterSettings, logs: &ClusterLogsArgs, out: &Output) -> Result<i32> {
    if let Some(node) = &logs.node {
        if !cluster.nodes.contains(node) {
            return Err(Error::Usage(format!(
                "--node {node}: not a node of this cluster ({})",
                cluster.nodes.join(", ")
            )));
        }
        cluster.nodes.retain(|n| n == node);
    }
    with_nodes(&cluster, async |nodes, unreachable| {
        for (node, error) in &unreachable {
            out.warn(&format!("{node}: {error}"));
        }
        let code =
            crate::commands::logs::run(logs.logs.name.as_ref(), nodes, logs.logs.lines, logs.logs.follow, out).await?;
        Ok(code.max(i32::from(!unreachable.is_empty())))
    })
    .await
}
