//! `phase swap|finish|abort|undo NAME` (hidden): one step of a cluster refresh on this node.

use crate::cli::PhaseArgs;
use crate::error::Result;
use crate::ops::phase::{run_phase, PhaseReport};
use crate::output::{Output, Render};
use crate::settings::Settings;

pub async fn run(args: &PhaseArgs, settings: &Settings, out: &Output) -> Result<i32> {
    out.report(&run_phase(settings, args.phase, &args.name, args.keep, args.image_id.as_deref()).await?);
    Ok(0)
}

impl Render for PhaseReport {
    fn render(&self, out: &Output) {
        let done = if self.changed { "done" } else { "nothing to do" };
        out.status(&format!("{:?} {}: {done}", self.phase, self.name));
        for warning in &self.warnings {
            out.warn(warning);
        }
    }
}
