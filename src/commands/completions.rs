//! `completions SHELL`: print a completion script for bash, zsh, fish, elvish or PowerShell.

use clap::Args;

use crate::error::Result;
use crate::output::Output;

#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell to generate completions for.
    pub shell: clap_complete::Shell,
}

/// The script for `command`, the whole command line as `crate::cli` builds it.
pub fn run(args: &CompletionsArgs, mut command: clap::Command, out: &Output) -> Result<i32> {
    // Into memory first: clap_complete panics when its writer fails (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "strix-toolbox", &mut script);
    out.write(&script);
    Ok(0)
}
