//! `cluster stop [NAME] [--all]`: a service (or every one) stopped on every node, its route
//! dropped at the cluster's head (an unreachable node is named; the others still stop).

use super::said;
use crate::cluster::{with_nodes, ClusterSettings};
use crate::commands::stop::StopArgs;
use crate::error::Result;
use crate::output::Output;

pub(super) async fn run(cluster: &ClusterSettings, args: &StopArgs, out: &Output) -> Result<i32> {
    let target = crate::commands::stop::target(args)?;
    with_nodes(cluster, async |nodes, unreachable| {
        // The router runs on the cluster's head: its first node, when it answered.
        let head_answered = !unreachable.iter().any(|(node, _)| Some(node) == cluster.nodes.first());
        let router = nodes.first().copied().filter(|_| head_answered);
        crate::commands::stop::run(&target, nodes, router, said(unreachable), out).await
    })
    .await
}
