//! `cluster plan MODEL`: the plan on every node, the shape read on the head (rendered as `plan`
//! renders).

use crate::cli::PlanArgs;
use crate::cluster::{with_our_nodes, ClusterSettings};
use crate::error::Result;
use crate::output::Output;

pub(super) async fn run(cluster: &ClusterSettings, plan: &PlanArgs, out: &Output) -> Result<i32> {
    with_our_nodes(cluster, "nothing was planned", async |nodes| crate::commands::plan::run(plan, nodes, out).await)
        .await
}
