//! One file per verb: each parses its arguments, calls one operation (`crate::ops`) and renders
//! its report as text or `--json`. Returns the process exit code.

mod agent;
mod bench;
mod build;
mod canary;
mod cluster;
mod completions;
mod detect;
mod doctor;
mod enter;
#[cfg(test)]
mod json_doc;
mod launch;
mod list;
mod logs;
mod measured;
mod model;
mod plan;
mod rccl;
mod refresh;
mod rm;
mod rollback;
mod router;
mod secrets;
mod status;
mod stop;
mod verify;

use std::sync::Arc;

use crate::cli::{BenchSubcommand, Command, GlobalOptions, RcclCommand};
use crate::error::{Error, Result};
use crate::node::local::LocalNode;
use crate::output::Output;
use crate::reporter::Reporter;
use crate::settings::Settings;

/// The global flags, resolved once against the environment; progress goes to `reporter`.
pub fn settings(global: &GlobalOptions, reporter: Arc<dyn Reporter>) -> Settings {
    Settings::resolve(global.host_root.clone(), global.container_engine, reporter)
}

/// A failure as the user sees it (an error object too under `--json`); its exit code.
pub fn failed(error: &Error, out: &Output) -> i32 {
    if out.json() {
        out.print_json(&error.json_object());
    }
    out.error(error);
    error.exit_code()
}

/// A usage error found before the command line was parsed; its exit code (2).
pub fn usage_error(message: String, out: &Output) -> i32 {
    failed(&Error::Usage(message), out)
}

/// A command line clap refused, as the `--json` error object every usage error is.
pub fn print_usage_error(message: &str, out: &Output) {
    out.print_json(&Error::Usage(message.to_string()).json_object());
}

/// Run the parsed command, its output through `out`; Ok carries the exit code.
pub fn run(command: Command, settings: &Settings, out: &Output) -> Result<i32> {
    match command {
        // Pure, synchronous commands need no runtime.
        Command::Detect => detect::run(settings, out),
        Command::Doctor => doctor::run(settings, out),
        Command::Completions(args) => completions::run(&args, out),
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
