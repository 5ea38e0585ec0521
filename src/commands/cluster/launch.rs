//! `cluster launch MODEL`: the launch on every node, all or nothing (rendered as `launch` renders).

use crate::cli::LaunchArgs;
use crate::cluster::{with_our_nodes, ClusterSettings};
use crate::error::Result;
use crate::output::Output;

pub(super) async fn run(cluster: &ClusterSettings, launch: &LaunchArgs, out: &Output) -> Result<i32> {
    with_our_nodes(cluster, "nothing was started", async |nodes| crate::commands::launch::run(launch, nodes, out).await)
        .await
}
