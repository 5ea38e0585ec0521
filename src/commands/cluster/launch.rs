//! `cluster launch MODEL`: the launch on every node, all or nothing (rendered as `launch` renders),
//! by the model's recipe when `cluster plan MODEL --try` kept one.

use crate::cluster::recipe::book::RecipeBook;
use crate::cluster::{with_our_nodes, ClusterSettings};
use crate::commands::launch::LaunchArgs;
use crate::error::Result;
use crate::output::Output;
use crate::settings::Settings;

pub(super) async fn run(
    cluster: &ClusterSettings,
    launch: &LaunchArgs,
    settings: &Settings,
    out: &Output,
) -> Result<i32> {
    let recipes = RecipeBook::open(&settings.paths).ok().map(|book| book.dir().to_path_buf());
    with_our_nodes(cluster, "nothing was started", async |nodes| {
        crate::commands::launch::run(launch, nodes, recipes.clone(), Some(&cluster.ssh), out).await
    })
    .await
}
