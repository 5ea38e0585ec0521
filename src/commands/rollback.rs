//! `rollback [NAME]`: recreate the toolbox from the pinned image before the one it runs.

use crate::error::Result;
use crate::ops::rollback::rollback;
use crate::output::Output;
use crate::serving::engine::EngineRef;
use crate::settings::Settings;
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct RollbackArgs {
    /// Toolbox name (default: vllm).
    #[arg(env = "TOOLBOX_NAME")]
    pub name: Option<String>,

    /// Print the plan; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub async fn run(args: &RollbackArgs, settings: &Settings, out: &Output) -> Result<i32> {
    out.report(
        &rollback(
            settings,
            args.name.as_deref().unwrap_or(EngineRef::default().profile().toolbox.default_toolbox),
            args.dry_run,
        )
        .await?,
    );
    Ok(0)
}
