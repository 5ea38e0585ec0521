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
pub(super) mod refresh;
mod status;
mod stop;
mod top;
mod verify;
mod watch;

use crate::commands::arg_values::{bounded, MAX_SSH_PERSIST};
use crate::commands::bench::BenchArgs;
use crate::commands::cluster::keys::KeysCommand;
use crate::commands::cluster::logs::ClusterLogsArgs;
use crate::commands::cluster::metrics::ClusterMetricsArgs;
use crate::commands::cluster::refresh::ClusterRefreshArgs;
use crate::commands::cluster::status::StatusArgs;
use crate::commands::cluster::top::TopArgs;
use crate::commands::cluster::watch::WatchArgs;
use crate::commands::launch::LaunchArgs;
use crate::commands::model::ModelCommand;
use crate::commands::plan::PlanArgs;
use crate::commands::stop::StopArgs;
use crate::serving::engine::EngineRef;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

use crate::cluster::nodes::{parse_node_list, ClusterFile};
use crate::cluster::ClusterSettings;
use crate::error::{Error, Result};
use crate::node::ssh::SshOptions;
use crate::output::Output;
use crate::settings::Settings;

/// Which nodes, and how ssh reaches them.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// The nodes, head first: ssh destinations (host, user@host, or a ~/.ssh/config alias).
    #[arg(long, global = true, value_name = "NODE,NODE,...")]
    pub nodes: Option<String>,

    /// The cluster file [default: $XDG_CONFIG_HOME/strix-toolbox/cluster.toml].
    #[arg(long, global = true, env = "STRIX_CLUSTER", value_name = "FILE")]
    pub cluster: Option<PathBuf>,

    /// An ssh config file to use instead of ~/.ssh/config (like `ssh -F`).
    #[arg(long, global = true, value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,

    /// Seconds to wait for each node's ssh connection.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 10, value_parser = bounded::<u64>(1, 3600))]
    pub connect_timeout: u64,

    /// Seconds each node's ssh connection stays up after the command, for the next cluster
    /// command to reuse without a new ssh login (checked first: a node that rebooted or changed
    /// its host key gets a new connection); 0 closes them when the command ends. `cluster
    /// disconnect` closes them now [default: the cluster file's `ssh_persist`, else 60].
    #[arg(
        long,
        global = true,
        env = "STRIX_SSH_PERSIST",
        value_name = "SECONDS",
        value_parser = bounded::<u64>(0, MAX_SSH_PERSIST)
    )]
    pub ssh_persist: Option<u64>,

    #[command(subcommand)]
    pub command: ClusterCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ClusterCommand {
    /// Write the cluster file from --nodes (and --ssh-config).
    Init,
    /// `doctor` on every node, plus what only a cluster can check: RoCE ports, one subnet, one MTU,
    /// jumbo frames end to end, the same kernel parameters, image and RCCL everywhere.
    Doctor(ToolboxArgs),
    /// Refresh every node to one image digest, all or nothing; with 2+ nodes the head fetches the
    /// image from upstream once and the other nodes get it from the head over the cluster link.
    Refresh(ClusterRefreshArgs),
    /// Per node: reachable, strix-toolbox version, toolbox, pin, image digest and RCCL; every
    /// service (its engine and model, nodes, layout, since when, its health at its engine and
    /// through the router); the router (its address, pid and routes).
    Status(StatusArgs),
    /// `verify` on every node, then proof between every pair that the data plane uses RDMA:
    /// perftest latency and bandwidth, and an RCCL all-reduce whose log says RoCE or sockets.
    Verify(ToolboxArgs),
    /// Copy this strix-toolbox to ~/.local/bin on every node that lacks it or runs another version.
    Install,
    /// Close the ssh connections earlier cluster commands left up for reuse (--ssh-persist), one
    /// per node; nothing to close is no failure.
    Disconnect,
    /// Plan MODEL across every node without downloading it: its shape read on the head (from the
    /// Hub by range reads, or its files), each node's GPU memory, every layout with its weights,
    /// KV cache and longest context per node or the rule it breaks, the one chosen and why.
    Plan(PlanArgs),
    /// Serve MODEL as the service NAME across every node (or those `--on` names), all or nothing:
    /// vLLM (its own executor, or Ray's; tensor parallel over RoCE, pipeline parallel over TCP),
    /// or llama.cpp with the layers split over rpc-server on every worker (a GGUF); every process
    /// on the cluster link; routed by the cluster's one OpenAI-compatible endpoint (the router on
    /// the cluster's head) once it answers. Several services share the cluster, each by its name.
    Launch(LaunchArgs),
    /// Stop a service (its engine's server, then everything else its launch started) on every node
    /// and drop its route; the others keep serving (an unreachable node is named; the others
    /// still stop).
    Stop(StopArgs),
    /// The logs of a service on every node, each line with its node.
    Logs(ClusterLogsArgs),
    /// Models in the nodes' Hugging Face caches: pull one onto every node (from the Hub once, by
    /// the head; the others get it over the cluster link), list what each node holds.
    #[command(subcommand)]
    Model(ModelCommand),
    /// `bench` against a service of the cluster, through its endpoint, the requests sent from the
    /// cluster's head (which reaches it on the cluster link); the result is kept on this machine.
    Bench(BenchArgs),
    /// Keep the services serving: every --interval, a one-token completion at each service's
    /// engine, its progress counters, each rank's process, each node's reachability and boot id;
    /// a service stalled (requests running, no token for --stall), failing (--failures probes in
    /// a row), with a rank gone or a node rebooted is relaunched whole from its record (its
    /// nodes' logs saved first, their memory free), at most --max-restarts in --window, then
    /// given up (`cluster status` says why) and --on-give-up run. In the foreground until Ctrl-C
    /// (exit 130), or --install as a systemd user service. Never starts what has no record; a
    /// `cluster stop` or `launch --replace` is no failure.
    Watch(WatchArgs),
    /// The cluster's metrics in Prometheus's text format: every node's GPU memory, busy share,
    /// power, temperature and RDMA port counters, and every service's engine `/metrics` (scraped
    /// by its node), labelled with `node`, `service` and `model`; what could not be read is said
    /// (`strix_node_up`/`strix_engine_up` 0, `strix_scrape_error` with why). Printed once, or
    /// served with --listen.
    Metrics(ClusterMetricsArgs),
    /// Keys per user at the cluster's endpoint: each with the models it may use and its requests
    /// and tokens a minute. The router answers 401 to no key or an unknown one, 403 to a model
    /// the key may not use, 429 (with Retry-After) past its rates; a change counts from the next
    /// second, without a restart. The endpoint's own key (--api-key-file) keeps every model.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// A live view of the cluster, refreshed every --interval: per node its GPU memory, busy share,
    /// power, temperature and RDMA link bytes per second; per service its tokens per second,
    /// requests running and waiting, and KV cache in use. Ctrl-C ends it.
    Top(TopArgs),
}

/// Which toolbox: `--name`, else the engine's.
#[derive(Debug, Clone, Args)]
pub struct ToolboxArgs {
    /// The toolbox [default: the engine's: vllm, or llama].
    #[arg(long, env = "TOOLBOX_NAME")]
    pub name: Option<String>,

    /// The serving engine whose toolbox it is.
    #[arg(long, value_enum, value_name = "ENGINE", default_value_t = EngineRef::default())]
    pub engine: EngineRef,
}

impl ToolboxArgs {
    pub fn toolbox(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.engine.profile().toolbox.default_toolbox.to_string())
    }
}

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
