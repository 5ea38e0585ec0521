//! One file per verb. Each takes typed options and returns the process exit code.

mod build;
mod completions;
mod detect;
mod doctor;
mod enter;
mod list;
mod rccl;
mod refresh;
mod rm;
mod rollback;

use crate::cli::{Cli, Command, RcclCommand};
use crate::error::{Error, Result};
use crate::ui::Ui;

/// Run the parsed command line; Ok carries the exit code.
pub fn run(cli: Cli, ui: Ui) -> Result<i32> {
    let global = cli.global;
    match cli.command {
        // Pure, synchronous commands need no runtime.
        Command::Detect => detect::run(&global, &ui),
        Command::Doctor => doctor::run(&global, &ui),
        Command::Rccl(RcclCommand::Inspect(args)) => rccl::inspect(&args, &ui),
        Command::Completions(args) => completions::run(&args),
        command => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| Error::Failed(format!("cannot start the async runtime: {e}")))?;
            runtime.block_on(async move {
                match command {
                    Command::Refresh(args) => refresh::run(&global, &args, &ui).await,
                    Command::Enter(args) => enter::run(&global, &args, &ui).await,
                    Command::List => list::run(&global, &ui).await,
                    Command::Rm(args) => rm::run(&global, &args, &ui).await,
                    Command::Rollback(args) => rollback::run(&global, &args, &ui).await,
                    Command::Build(args) => build::run(&global, &args, &ui).await,
                    Command::Detect | Command::Doctor | Command::Rccl(_) | Command::Completions(_) => {
                        unreachable!("handled above")
                    }
                }
            })
        }
    }
}
