//! `strix-toolbox router` (hidden): the cluster's endpoint on the cluster's head, as a launch
//! starts it (see `router::daemon`). Its lines go to its log (`router/router.log`).

use crate::cli::RouterArgs;
use crate::error::Result;
use crate::router::daemon::serve;
use crate::router::routes::RouterFiles;
use crate::settings::Settings;

pub async fn run(args: &RouterArgs, settings: &Settings) -> Result<i32> {
    serve(&RouterFiles::of(&settings.paths)?, args.listen, settings.reporter.clone()).await?;
    Ok(0)
}
