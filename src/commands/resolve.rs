//! `resolve REF` (hidden): pull REF and print the `repo@sha256:…` every node should refresh to.

use crate::cli::ResolveArgs;
use crate::error::Result;
use crate::ops::resolve::resolve;
use crate::settings::Settings;

pub async fn run(args: &ResolveArgs, settings: &Settings) -> Result<i32> {
    let report = resolve(settings, &args.image).await?;
    if settings.ui.json {
        settings.ui.print_json(&report);
    } else {
        println!("{}", report.pinned);
    }
    Ok(0)
}
