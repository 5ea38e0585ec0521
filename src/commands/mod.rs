//! One file per verb: each parses its arguments, calls one operation (`crate::ops`) and renders
//! its report as text or `--json`. Returns the process exit code.

mod agent;
mod build;
mod cluster;
mod completions;
mod detect;
mod doctor;
mod enter;
mod launch;
mod list;
mod logs;
mod rccl;
mod refresh;
mod rm;
mod rollback;
mod status;
mod stop;
mod verify;

use crate::cli::{Command, GlobalOptions, RcclCommand};
use crate::error::{Error, Result};
use crate::node::local::LocalNode;
use crate::settings::Settings;

/// The global flags, resolved once against the environment and the terminal.
pub fn settings(global: &GlobalOptions) -> Settings {
    Settings::resolve(global.host_root.clone(), global.engine, global.json, global.no_color)
}

/// Run the parsed command; Ok carries the exit code.
pub fn run(command: Command, settings: &Settings) -> Result<i32> {
    match command {
        // Pure, synchronous commands need no runtime.
        Command::Detect => detect::run(settings),
        Command::Doctor => doctor::run(settings),
        Command::Completions(args) => completions::run(&args),
        command => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| Error::Failed(format!("cannot start the async runtime: {e}")))?;
            runtime.block_on(async move {
                match command {
                    Command::Refresh(args) => refresh::run(&args, settings).await,
                    Command::Enter(args) => enter::run(&args, settings).await,
                    Command::Verify(args) => verify::run(&args, settings).await,
                    Command::List => list::run(settings).await,
                    Command::Status => status::run(settings).await,
                    Command::Rm(args) => rm::run(&args, settings).await,
                    Command::Rollback(args) => rollback::run(&args, settings).await,
                    Command::Launch(args) => {
                        let here = LocalNode::new(settings);
                        launch::run(&args, &[&here], &settings.ui).await
                    }
                    Command::Stop(args) => {
                        let here = LocalNode::new(settings);
                        stop::run(&args.name, &[&here], Vec::new(), &settings.ui).await
                    }
                    Command::Logs(args) => {
                        let here = LocalNode::new(settings);
                        logs::run(&args.name, &[&here], args.lines, args.follow, &settings.ui).await
                    }
                    Command::Build(args) => build::run(&args, settings).await,
                    Command::Cluster(args) => cluster::run(&args, settings).await,
                    Command::Agent => agent::run(settings).await,
                    Command::Rccl(RcclCommand::Inspect(args)) => rccl::inspect(&args, settings).await,
                    Command::Detect | Command::Doctor | Command::Completions(_) => {
                        unreachable!("handled above")
                    }
                }
            })
        }
    }
}
