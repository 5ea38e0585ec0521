//! `resolve REF` (hidden): pull REF and print the `repo@sha256:…` every node should refresh to.

use crate::cli::ResolveArgs;
use crate::error::Result;
use crate::ops::resolve::{resolve, ResolveReport};
use crate::output::{Output, Render};
use crate::settings::Settings;

pub async fn run(args: &ResolveArgs, settings: &Settings, out: &Output) -> Result<i32> {
    out.report(&resolve(settings, &args.image).await?);
    Ok(0)
}

impl Render for ResolveReport {
    fn render(&self, out: &Output) {
        out.line(&self.pinned);
    }
}
