//! `strix-toolbox router --listen ADDRESS:PORT --dir DIR` (hidden): the cluster's endpoint on the
//! cluster's head, as a launch starts it (see `router::daemon`), its routes and key in DIR (the
//! launch's own: this process may not see the node as it does, under another `--host-root`).
//! Its lines go to its log (`DIR/router.log`).

use crate::cli::RouterArgs;
use crate::error::Result;
use crate::router::daemon::serve;
use crate::router::routes::RouterFiles;
use crate::settings::Settings;

pub async fn run(args: &RouterArgs, settings: &Settings) -> Result<i32> {
    serve(&RouterFiles::in_dir(&args.dir), args.listen, settings.reporter.clone()).await?;
    Ok(0)
}
