//! `completions SHELL`: print a completion script for bash, zsh, fish, elvish or PowerShell.

use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs};
use crate::error::Result;
use crate::output::Output;

pub fn run(args: &CompletionsArgs, out: &Output) -> Result<i32> {
    let mut command = Cli::command();
    // Into memory first: clap_complete panics when its writer fails (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "strix-toolbox", &mut script);
    out.write(&script);
    Ok(0)
}
