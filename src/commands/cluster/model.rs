//! `cluster model pull|list`: models in the nodes' Hugging Face caches (rendered as `model` renders).

use super::said;
use crate::cluster::{with_nodes, with_our_nodes, ClusterSettings};
use crate::commands::model::ModelCommand;
use crate::commands::model::ModelRequest;
use crate::error::Result;
use crate::node::Node;
use crate::output::Output;

pub(super) async fn run(cluster: &ClusterSettings, command: &ModelCommand, out: &Output) -> Result<i32> {
    let request = ModelRequest::parse(command)?;
    let run =
        async |nodes: &[&dyn Node], unreachable| crate::commands::model::run(&request, nodes, unreachable, out).await;
    match &request {
        // A pull changes every node: all of them, or none.
        ModelRequest::Pull(_) => {
            with_our_nodes(cluster, "nothing was pulled", async |nodes| run(nodes, Vec::new()).await).await
        }
        ModelRequest::List(_) => {
            with_nodes(cluster, async |nodes, unreachable| run(nodes, said(unreachable)).await).await
        }
    }
}
