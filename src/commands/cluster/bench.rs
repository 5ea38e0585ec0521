//! `cluster bench`: `bench` against what the cluster serves, its requests sent from the head.

use crate::cli::BenchArgs;
use crate::cluster::{with_our_nodes, ClusterSettings};
use crate::error::{Error, Result};
use crate::output::Output;
use crate::settings::Settings;

pub(super) async fn run(
    mut cluster: ClusterSettings,
    bench: &BenchArgs,
    settings: &Settings,
    out: &Output,
) -> Result<i32> {
    if bench.endpoint.is_some() {
        return Err(Error::Usage(
            "cluster bench measures what the cluster serves; for another endpoint use `strix-toolbox bench --endpoint URL`"
                .into(),
        ));
    }
    // The head reaches the endpoint on the cluster link; the other nodes have no part.
    cluster.nodes.truncate(1);
    with_our_nodes(&cluster, "nothing was measured", async |nodes| {
        crate::commands::bench::run(bench, nodes[0], &settings.paths, out).await
    })
    .await
}
