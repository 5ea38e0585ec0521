//! `cluster stop`: stop what launches started on every node (an unreachable node is named).

use super::said;
use crate::cli::ToolboxArgs;
use crate::cluster::{with_nodes, ClusterSettings};
use crate::error::Result;
use crate::output::Output;

pub(super) async fn run(cluster: &ClusterSettings, toolbox: &ToolboxArgs, out: &Output) -> Result<i32> {
    with_nodes(cluster, async |nodes, unreachable| {
        crate::commands::stop::run(&toolbox.toolbox(), nodes, said(unreachable), out).await
    })
    .await
}
