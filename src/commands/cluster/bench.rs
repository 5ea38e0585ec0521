//! `cluster bench [--model NAME]`: `bench` against a service of the cluster through its endpoint,
//! the requests sent from the cluster's head (where the router runs).

use crate::cluster::{with_our_nodes, ClusterSettings};
use crate::commands::bench::BenchArgs;
use crate::error::{Error, Result};
use crate::output::Output;
use crate::settings::Settings;

pub(super) async fn run(cluster: ClusterSettings, bench: &BenchArgs, settings: &Settings, out: &Output) -> Result<i32> {
    if bench.endpoint.is_some() {
        return Err(Error::Usage(
            "cluster bench measures what the cluster serves; for another endpoint use `strix-toolbox bench --endpoint URL`"
                .into(),
        ));
    }
    // Every node says what it serves; the head sends the requests to the router on it.
    with_our_nodes(&cluster, "nothing was measured", async |nodes| {
        crate::commands::bench::run(bench, nodes, &settings.paths, out).await
    })
    .await
}
