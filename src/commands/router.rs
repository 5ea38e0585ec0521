//! `strix-toolbox router --listen ADDRESS:PORT --dir DIR` (hidden): the cluster's endpoint on the
//! cluster's head, as a launch starts it (see `router::daemon`), its routes, keys and key in DIR
//! (the launch's own: this process may not see the node as it does, under another `--host-root`).
//! The services registered to start on demand it starts and stops with the cluster's launch and
//! stop, run from here (`cluster::on_demand`), with this node's own Hub token and settings, if
//! any. Its lines go to its log (`DIR/router.log`).

use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;

use super::secrets::hf_token;

use crate::cluster::on_demand::starter::ClusterStarter;
use crate::error::Result;
use crate::model::hub_env::forwarded_hub_env;
use crate::router::daemon::serve;
use crate::router::routes::RouterFiles;
use crate::settings::Settings;

/// The router's address and files.
#[derive(Debug, Clone, Args)]
pub struct RouterArgs {
    /// Where it listens.
    #[arg(long, value_name = "ADDRESS:PORT")]
    pub listen: std::net::SocketAddr,

    /// The directory of its routes file and key file (the launch that starts it names its own).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
}

pub async fn run(args: &RouterArgs, settings: &Settings) -> Result<i32> {
    let files = RouterFiles::in_dir(&args.dir);
    let starter =
        ClusterStarter::new(settings.clone(), files.clone(), hf_token(None)?, forwarded_hub_env(std::env::vars()));
    serve(&files, args.listen, settings.reporter.clone(), Some(Arc::new(starter))).await?;
    Ok(0)
}
