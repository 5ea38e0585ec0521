//! The top of the command line: the parser, the global options, the commands, and the run of the
//! one parsed. Each command's own arguments live beside it in `crate::commands` (cargo's
//! `commands/*.rs`); parsed once here, everything downstream reads typed options.

use std::path::PathBuf;
use std::sync::Arc;

use clap::builder::PossibleValue;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

use crate::commands::bench::BenchSubcommand;
use crate::commands::rccl::RcclCommand;
use crate::commands::{
    agent, bench, build, cluster, completions, detect, doctor, enter, launch, list, logs, model, plan, rccl, refresh,
    rm, rollback, router, status, stop, verify,
};
use crate::container_engine::kind::EngineChoice;
use crate::error::{Error, Result};
use crate::node::local::LocalNode;
use crate::output::Output;
use crate::reporter::Reporter;
use crate::settings::Settings;

/// Toolboxes for AMD Strix Halo nodes (gfx1151) and the cluster they make: refresh, check and
/// verify every node, then serve a model across them with vLLM or llama.cpp behind one
/// OpenAI-compatible endpoint.
///
/// On a node: `strix-toolbox doctor` says what it has and lacks, `refresh` pulls the image and
/// (re)creates the toolbox with /dev/kfd, /dev/dri, /dev/infiniband, the right groups and memlock,
/// and `enter` gets you into it. Across nodes: `strix-toolbox cluster --help`.
#[derive(Debug, Parser)]
#[command(name = "strix-toolbox", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalOptions,

    #[command(subcommand)]
    pub command: Command,
}

/// Options every command accepts.
#[derive(Debug, Clone, Args)]
pub struct GlobalOptions {
    /// Read the node's devices, sysfs, /etc/group and /proc from this directory instead of /.
    #[arg(long, global = true, env = "STRIX_HOST_ROOT", value_name = "DIR", default_value = "/")]
    pub host_root: PathBuf,

    /// Container engine: podman when installed or CONTAINER_HOST is set, else docker. (It was
    /// `--engine` and `STRIX_ENGINE`; `--engine` now names the serving engine.)
    #[arg(
        long,
        global = true,
        env = "STRIX_CONTAINER_ENGINE",
        value_name = "ENGINE",
        value_enum,
        default_value_t = EngineChoice::Auto
    )]
    pub container_engine: EngineChoice,

    /// Print machine-readable JSON on stdout instead of text.
    #[arg(long, global = true)]
    pub json: bool,

    /// Never use colour (also honoured: the NO_COLOR environment variable).
    #[arg(long, global = true)]
    pub no_color: bool,
}

impl GlobalOptions {
    /// The global flags, resolved once against the environment; progress goes to `reporter`.
    pub fn settings(&self, reporter: Arc<dyn Reporter>) -> Settings {
        Settings::resolve(self.host_root.clone(), self.container_engine, reporter)
    }
}

/// The container engine's old spelling, `--engine auto|podman|docker` or `STRIX_ENGINE`, as a
/// usage error that says what it is now: `--engine` names the serving engine (vllm, llama.cpp),
/// and a leftover would otherwise read as a wrong serving engine or be silently ignored. Arguments
/// after `--` are the serving engine's own and are not looked at.
pub fn renamed_spelling(args: &[std::ffi::OsString], env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if let Some(value) = env("STRIX_ENGINE") {
        return Some(format!(
            "STRIX_ENGINE={value}: the container engine's variable is now STRIX_CONTAINER_ENGINE (and the flag \
             --container-engine); unset STRIX_ENGINE"
        ));
    }
    let words: Vec<&str> = args.iter().skip(1).map(|a| a.to_str().unwrap_or_default()).collect();
    let words = &words[..words.iter().position(|w| *w == "--").unwrap_or(words.len())];
    for (index, word) in words.iter().enumerate() {
        let value = match word.strip_prefix("--engine") {
            Some("") => words.get(index + 1).copied().unwrap_or_default(),
            Some(rest) => rest.strip_prefix('=').unwrap_or_default(),
            None => continue,
        };
        if ["auto", "podman", "docker"].contains(&value) {
            return Some(format!(
                "--engine {value}: the container engine is now chosen with --container-engine {value} (or \
                 STRIX_CONTAINER_ENGINE); --engine names the serving engine, vllm or llama.cpp"
            ));
        }
    }
    None
}

/// `--container-engine`: the domain's choice, spelled for the command line here so clap stays in
/// this module.
impl ValueEnum for EngineChoice {
    fn value_variants<'a>() -> &'a [Self] {
        &[EngineChoice::Auto, EngineChoice::Podman, EngineChoice::Docker]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            EngineChoice::Auto => PossibleValue::new("auto").help(
                "podman when installed or CONTAINER_HOST is set, else docker when installed or DOCKER_HOST is set",
            ),
            EngineChoice::Podman => PossibleValue::new("podman"),
            EngineChoice::Docker => PossibleValue::new("docker"),
        })
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Report what this node has: GPU, RDMA ports, groups, memlock, kernel parameters, container flags.
    Detect,
    /// Check this node against what the cluster needs; each problem comes with its fix.
    Doctor,
    /// Pull (or build) the image and create or update the toolbox, atomically.
    Refresh(refresh::RefreshArgs),
    /// Open a shell in the toolbox, or run CMD in it and pass its output and exit code through.
    Enter(enter::EnterArgs),
    /// Prove from inside the toolbox that it works: devices open, memlock, groups, NCCL environment,
    /// every RCCL copy carries gfx1151, and (where the image has the tools) ROCm, RDMA and torch.
    Verify(verify::VerifyArgs),
    /// List the toolboxes strix-toolbox manages.
    List,
    /// This node's strix-toolbox version, engine and toolboxes (what `cluster status` reads).
    Status,
    /// Remove a managed toolbox.
    Rm(rm::RmArgs),
    /// Recreate a toolbox from its previous pinned image.
    Rollback(rollback::RollbackArgs),
    /// Plan MODEL on this node without downloading it: its shape from its headers, the GPU's memory
    /// (its GTT less what is in use less a reserve), the context that fits and the engine's flags.
    Plan(plan::PlanArgs),
    /// Serve MODEL from this node's toolbox (`vllm serve`, or `llama-server` for a GGUF), detached,
    /// as the service NAME, until it answers at the OpenAI-compatible endpoint (the router here,
    /// which sends each request to the service its `model` names; `cluster launch` serves across
    /// the cluster's nodes).
    Launch(launch::LaunchArgs),
    /// Stop a service `launch` started here (its engine's processes; Ray when a cluster launch
    /// started it), and its route.
    Stop(stop::StopArgs),
    /// The logs of a service `launch` started here (the engine's processes, and Ray's).
    Logs(logs::LogsArgs),
    /// Measure what `launch` serves here as `vllm bench serve` does (TTFT, TPOT, ITL, E2EL, output
    /// tokens/s at each concurrency level), keep the result, and with --gate check its answers token
    /// for token against the model's reference; `bench history`, `bench compare A B`.
    Bench(bench::BenchCommand),
    /// Build the image with a custom RCCL through the engine's build API.
    Build(build::BuildArgs),
    /// Work with RCCL artifacts.
    #[command(subcommand)]
    Rccl(RcclCommand),
    /// Models in this node's Hugging Face cache: pull one (with huggingface_hub in the toolbox,
    /// every file checked against its hash), list what is there.
    #[command(subcommand)]
    Model(model::ModelCommand),
    /// The whole cluster from one machine, over ssh: doctor, refresh, verify, install, launch and
    /// stop a model, its logs and status, models in every cache.
    Cluster(cluster::ClusterArgs),
    /// Print a shell completion script.
    Completions(completions::CompletionsArgs),
    /// Answer a cluster head's calls, one JSON line each, on stdin and stdout (the head starts this
    /// over ssh on every node, once per cluster command).
    #[command(hide = true)]
    Agent,
    /// The cluster's endpoint: route each request to the service its `model` names, as the routes
    /// file in DIR says, until no route is left (a launch starts this on the cluster's head,
    /// detached).
    #[command(hide = true)]
    Router(router::RouterArgs),
}

/// Run the parsed command, its output through `out`; Ok carries the exit code.
pub fn run(command: Command, settings: &Settings, out: &Output) -> Result<i32> {
    match command {
        // Pure, synchronous commands need no runtime.
        Command::Detect => detect::run(settings, out),
        Command::Doctor => doctor::run(settings, out),
        Command::Completions(args) => completions::run(&args, Cli::command(), out),
        Command::Rccl(RcclCommand::Log(args)) => rccl::log(&args, out),
        // The store alone: no runtime either.
        Command::Bench(bench) if bench.command.is_some() => match &bench.command {
            Some(BenchSubcommand::History(args)) => bench::history(args, &settings.paths, out),
            Some(BenchSubcommand::Compare(args)) => bench::compare_results(args, &settings.paths, out),
            None => unreachable!("matched on a subcommand"),
        },
        command => {
            let runtime =
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(|e| {
                    Error::host(
                        "threads",
                        format!("cannot start the async runtime: {e}"),
                        "check the process and thread limits (`ulimit -u`)",
                    )
                })?;
            runtime.block_on(async move {
                match command {
                    Command::Refresh(args) => refresh::run(&args, &LocalNode::new(settings), out).await,
                    Command::Enter(args) => enter::run(&args, settings, out).await,
                    Command::Verify(args) => verify::run(&args, settings, out).await,
                    Command::List => list::run(settings, out).await,
                    Command::Status => status::run(settings, out).await,
                    Command::Rm(args) => rm::run(&args, settings, out).await,
                    Command::Rollback(args) => rollback::run(&args, settings, out).await,
                    Command::Plan(args) => plan::run(&args, &[&LocalNode::new(settings)], out).await,
                    Command::Launch(args) if !args.on.is_empty() => Err(Error::Usage(
                        "--on names nodes of a cluster: `strix-toolbox cluster launch MODEL --on NODE,…`".into(),
                    )),
                    Command::Launch(args) => launch::run(&args, &[&LocalNode::new(settings)], None, None, out).await,
                    Command::Stop(args) => {
                        let node = LocalNode::new(settings);
                        stop::run(&stop::target(&args)?, &[&node], Some(&node), Vec::new(), out).await
                    }
                    Command::Logs(args) => {
                        let node = LocalNode::new(settings);
                        logs::run(args.name.as_ref(), &[&node], args.lines, args.follow, out).await
                    }
                    Command::Model(command) => {
                        let request = model::ModelRequest::parse(&command)?;
                        model::run(&request, &[&LocalNode::new(settings)], Vec::new(), out).await
                    }
                    Command::Bench(bench) => {
                        bench::run(&bench.run, &[&LocalNode::new(settings)], &settings.paths, out).await
                    }
                    Command::Build(args) => build::run(&args, settings, out).await,
                    Command::Cluster(args) => cluster::run(&args, settings, out).await,
                    Command::Agent => agent::run(settings).await,
                    Command::Router(args) => router::run(&args, settings).await,
                    Command::Rccl(RcclCommand::Inspect(args)) => rccl::inspect(&args, settings, out).await,
                    Command::Detect
                    | Command::Doctor
                    | Command::Completions(_)
                    | Command::Rccl(RcclCommand::Log(_)) => {
                        unreachable!("handled above")
                    }
                }
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(args: &[&str], env: &[(&str, &str)]) -> Option<String> {
        let args: Vec<std::ffi::OsString> =
            std::iter::once("strix-toolbox").chain(args.iter().copied()).map(Into::into).collect();
        renamed_spelling(&args, &|name| env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn the_container_engines_old_spelling_says_what_it_is_now() {
        assert!(said(&["--engine", "docker", "detect"], &[]).unwrap().contains("--container-engine docker"));
        assert!(said(&["refresh", "--engine=podman"], &[]).unwrap().contains("--container-engine podman"));
        assert!(said(&["list"], &[("STRIX_ENGINE", "docker")]).unwrap().contains("STRIX_CONTAINER_ENGINE"));
        assert_eq!(said(&["launch", "m.gguf", "--engine", "llama.cpp"], &[]), None);
        assert_eq!(said(&["launch", "m", "--", "--engine", "docker"], &[]), None, "vLLM's own arguments");
        assert_eq!(said(&["--container-engine", "docker", "list"], &[]), None);
    }
}
