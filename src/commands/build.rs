//! `build --rccl FILE`: overlay a gfx1151 RCCL on an image through the engine's build API.

use crate::cli::BuildArgs;
use crate::error::Result;
use crate::ops::build::BuildOutcome;
use crate::ops::build::{build, BuildOptions};
use crate::output::{Output, Render};
use crate::settings::Settings;

pub async fn run(args: &BuildArgs, settings: &Settings, out: &Output) -> Result<i32> {
    let options = BuildOptions {
        rccl: args.rccl.clone(),
        base: args.base.clone(),
        tags: std::iter::once(args.tag.clone()).chain(args.also_tag.iter().cloned()).collect(),
        push: args.push,
        rccl_source: args.rccl_source.clone(),
        source: args.source.clone(),
        revision: args.revision.clone(),
    };
    out.report(&build(settings, &options).await?);
    Ok(0)
}

impl Render for BuildOutcome {
    fn render(&self, out: &Output) {
        out.line(&self.image_id);
        for tag in &self.tags {
            out.line(&format!("  tagged  {tag}"));
        }
        for tag in &self.pushed {
            out.line(&format!("  pushed  {tag}"));
        }
        out.line(&format!("  rccl    {} ({})", self.rccl_sha256, self.gfx_targets.join(",")));
        out.status(&format!("built in {:.1} s", self.build_seconds));
    }
}
