//! `cluster init|doctor|refresh|status|verify|plan|launch|stop|logs|bench|disconnect|install|model|metrics|top|keys`:
//! the whole cluster from one machine, over ssh. One file per subcommand, each with its renderer;
//! here the dispatch and the cluster's settings (its nodes, from --nodes or the cluster file).

mod bench;
mod disconnect;
mod doctor;
pub(super) mod init;
mod install;
mod keys;
mod launch;
mod logs;
mod metrics;
mod model;
mod plan;
mod refresh;
mod status;
mod stop;
mod top;
mod verify;
mod watch;

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::{ClusterArgs, ClusterCommand};
use crate::cluster::nodes::{parse_node_list, ClusterFile};
use crate::cluster::ClusterSettings;
use crate::error::{Error, Result};
use crate::node::ssh::SshOptions;
use crate::output::Output;
use crate::settings::Settings;

pub async fn run(args: &ClusterArgs, settings: &Settings, out: &Output) -> Result<i32> {
    if let ClusterCommand::Init = args.command {
        return init::run(args, settings, out);
    }
    let cluster = cluster_settings(args, settings)?;
    match &args.command {
        ClusterCommand::Init => unreachable!("handled above"),
        ClusterCommand::Doctor(toolbox) => doctor::run(&cluster, toolbox, out).await,
        ClusterCommand::Status(toolbox) => status::run(&cluster, toolbox, settings, out).await,
        ClusterCommand::Verify(toolbox) => verify::run(&cluster, toolbox, out).await,
        ClusterCommand::Plan(plan) => plan::run(&cluster, plan, settings, out).await,
        ClusterCommand::Launch(launch) => launch::run(&cluster, launch, settings, out).await,
        ClusterCommand::Stop(args) => stop::run(&cluster, args, out).await,
        ClusterCommand::Logs(logs) => logs::run(cluster, logs, out).await,
        ClusterCommand::Bench(bench) => bench::run(cluster, bench, settings, out).await,
        ClusterCommand::Disconnect => disconnect::run(&cluster, out).await,
        ClusterCommand::Install => install::run(&cluster, out).await,
        ClusterCommand::Model(command) => model::run(&cluster, command, out).await,
        ClusterCommand::Refresh(refresh) => refresh::run(&cluster, refresh, args, settings, out).await,
        ClusterCommand::Watch(watch) => watch::run(&cluster, args, watch, settings, out).await,
        ClusterCommand::Metrics(metrics) => metrics::run(&cluster, metrics, out).await,
        ClusterCommand::Top(top) => top::run(&cluster, top, out).await,
        ClusterCommand::Keys(command) => keys::run(&cluster, command, out).await,
    }
}

/// The cluster file, when the nodes come from it (not --nodes).
fn cluster_args_file(args: &ClusterArgs, settings: &Settings) -> Result<Option<ClusterFile>> {
    match &args.nodes {
        Some(_) => Ok(None),
        None => ClusterFile::read(&cluster_file_path(args, settings)?).map(Some),
    }
}

/// The nodes that did not answer, each with why, as the reports say it.
fn said(unreachable: Vec<(String, Error)>) -> Vec<(String, String)> {
    unreachable.into_iter().map(|(node, error)| (node, error.to_string())).collect()
}

/// The cluster file's path: --cluster, else the XDG default.
fn cluster_file_path(args: &ClusterArgs, settings: &Settings) -> Result<PathBuf> {
    args.cluster.clone().or_else(|| settings.paths.cluster_file()).ok_or_else(|| {
        Error::Usage("no cluster file location: neither --cluster, XDG_CONFIG_HOME nor HOME is set".into())
    })
}

/// How long a node's ssh master waits for the next cluster command, unless told otherwise.
const DEFAULT_SSH_PERSIST: u64 = 60;

/// Nodes from --nodes, else the cluster file; ssh config and persistence from the flags (or the
/// environment), else the file's.
fn cluster_settings(args: &ClusterArgs, settings: &Settings) -> Result<ClusterSettings> {
    let (nodes, file_ssh_config, file_ssh_persist) = match &args.nodes {
        Some(list) => (parse_node_list(list)?, None, None),
        None => {
            let file = ClusterFile::read(&cluster_file_path(args, settings)?)?;
            (file.nodes, file.ssh_config, file.ssh_persist)
        }
    };
    let ssh = SshOptions {
        config_file: args.ssh_config.clone().or(file_ssh_config),
        connect_timeout: Duration::from_secs(args.connect_timeout),
        runtime_dir: settings.paths.runtime_path().to_path_buf(),
        persist: Duration::from_secs(args.ssh_persist.or(file_ssh_persist).unwrap_or(DEFAULT_SSH_PERSIST)),
    };
    Ok(ClusterSettings { nodes, ssh, reporter: settings.reporter.clone() })
}
