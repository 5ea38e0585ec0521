//! `enter [NAME] [-- CMD...]`: a shell in the toolbox, or CMD with its output and exit code.

use crate::error::Result;
use crate::manager::process::exec_replace;
use crate::ops::enter::{enter, Entry};
use crate::output::Output;
use crate::serving::engine::EngineRef;
use crate::settings::Settings;
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct EnterArgs {
    /// Toolbox name (default: vllm).
    #[arg(env = "TOOLBOX_NAME")]
    pub name: Option<String>,

    /// Command to run instead of an interactive shell.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub async fn run(args: &EnterArgs, settings: &Settings, out: &Output) -> Result<i32> {
    let name = args.name.as_deref().unwrap_or(EngineRef::default().profile().toolbox.default_toolbox);
    match enter(settings, name, &args.command, out).await? {
        Entry::Ran(code) => Ok(code),
        // The shell replaces this process; exec_replace returns only on failure.
        Entry::Interactive { argv, env } => Err(exec_replace(&argv, &env)),
    }
}
