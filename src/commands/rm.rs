//! `rm NAME`: remove a toolbox strix-toolbox manages (and only those).

use crate::cli::RmArgs;
use crate::error::Result;
use crate::ops::remove::remove;
use crate::settings::Settings;

pub async fn run(args: &RmArgs, settings: &Settings) -> Result<i32> {
    let report = remove(settings, &args.name, args.force).await?;
    if settings.ui.json {
        settings.ui.print_json(&report);
    } else {
        settings.ui.status(&format!("removed {}", report.name));
    }
    Ok(0)
}
