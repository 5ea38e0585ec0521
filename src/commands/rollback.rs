//! `rollback [NAME]`: recreate the toolbox from the pinned image before the one it runs.

use crate::cli::RollbackArgs;
use crate::error::Result;
use crate::ops::rollback::rollback;
use crate::ops::DEFAULT_TOOLBOX;
use crate::settings::Settings;

pub async fn run(args: &RollbackArgs, settings: &Settings) -> Result<i32> {
    let report = rollback(settings, args.name.as_deref().unwrap_or(DEFAULT_TOOLBOX), args.dry_run).await?;
    if settings.ui.json {
        settings.ui.print_json(&report);
    } else {
        super::refresh::print_report(&report, &settings.ui);
    }
    Ok(0)
}
