//! `rollback [NAME]`: recreate the toolbox from the pinned image before the one it runs.

use crate::cli::RollbackArgs;
use crate::error::Result;
use crate::ops::rollback::rollback;
use crate::output::Output;
use crate::serving::engine::EngineRef;
use crate::settings::Settings;

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
