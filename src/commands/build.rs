//! `build --rccl FILE`: overlay a gfx1151 RCCL on an image through the engine's build API.

use crate::cli::BuildArgs;
use crate::error::Result;
use crate::image::build::BuildOutcome;
use crate::ops::build::{build, BuildOptions};
use crate::output::Ui;
use crate::settings::Settings;

pub async fn run(args: &BuildArgs, settings: &Settings) -> Result<i32> {
    let options = BuildOptions {
        rccl: args.rccl.clone(),
        base: args.base.clone(),
        tags: std::iter::once(args.tag.clone()).chain(args.also_tag.iter().cloned()).collect(),
        push: args.push,
        rccl_source: args.rccl_source.clone(),
        source: args.source.clone(),
        revision: args.revision.clone(),
    };
    let outcome = build(settings, &options).await?;
    print_outcome(&outcome, &settings.ui);
    Ok(0)
}

fn print_outcome(outcome: &BuildOutcome, ui: &Ui) {
    if ui.json {
        ui.print_json(outcome);
        return;
    }
    println!("{}", outcome.image_id);
    for tag in &outcome.tags {
        println!("  tagged  {tag}");
    }
    for tag in &outcome.pushed {
        println!("  pushed  {tag}");
    }
    println!("  rccl    {} ({})", outcome.rccl_sha256, outcome.gfx_targets.join(","));
    ui.status(&format!("built in {:.1} s", outcome.build_seconds));
}
