//! `completions SHELL`: print a completion script for bash, zsh, fish, elvish or PowerShell.

use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs};
use crate::error::Result;

pub fn run(args: &CompletionsArgs) -> Result<i32> {
    let mut command = Cli::command();
    clap_complete::generate(args.shell, &mut command, "strix-toolbox", &mut std::io::stdout());
    Ok(0)
}
