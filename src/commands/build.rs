//! `build --rccl FILE`: overlay a gfx1151 RCCL on an image through the engine's build API.
//! The artifact is inspected first; a rejected one never reaches the engine.

use crate::build::{self, BuildOutcome, BuildRequest, Provenance};
use crate::cli::{BuildArgs, GlobalOptions};
use crate::engine;
use crate::error::Result;
use crate::rccl;
use crate::ui::Ui;

pub async fn run(global: &GlobalOptions, args: &BuildArgs, ui: &Ui) -> Result<i32> {
    let mut tags = vec![args.tag.clone()];
    tags.extend(args.also_tag.iter().cloned());
    build::check_references(&args.base, &tags)?;

    let report = rccl::inspect_artifact(&args.rccl)?;
    report.ensure_gfx1151()?;
    ui.status(&format!(
        "{}: sha256 {}, {} bytes, targets {}",
        args.rccl.display(),
        report.sha256,
        report.size,
        report.gfx_targets.join(", ")
    ));

    let provenance =
        Provenance::new(args.source.as_deref(), args.revision.as_deref(), args.rccl_source.as_deref(), &args.rccl);
    let request = BuildRequest::new(&report, &provenance, &args.base, &tags, args.push)?;

    let connection = engine::connect(global.engine).await?;
    let progress = ui.progress();
    let outcome = build::build_image(connection.engine(), &report, &request, &progress).await?;
    print_outcome(&outcome, ui);
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
