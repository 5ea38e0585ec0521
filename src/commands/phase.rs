//! `phase swap|finish|abort|undo NAME` (hidden): one step of a cluster refresh on this node.

use crate::cli::PhaseArgs;
use crate::error::Result;
use crate::ops::phase::run_phase;
use crate::settings::Settings;

pub async fn run(args: &PhaseArgs, settings: &Settings) -> Result<i32> {
    let report = run_phase(settings, args.phase, &args.name, args.keep, args.image_id.as_deref()).await?;
    if settings.ui.json {
        settings.ui.print_json(&report);
    } else {
        let done = if report.changed { "done" } else { "nothing to do" };
        settings.ui.status(&format!("{:?} {}: {done}", report.phase, report.name));
        for warning in &report.warnings {
            settings.ui.warn(warning);
        }
    }
    Ok(0)
}
