//! `build --rccl FILE`: overlay a gfx1151 RCCL on an image through the engine's build API.

use crate::error::Result;
use crate::ops::build::BuildOutcome;
use crate::ops::build::{build, BuildOptions};
use crate::output::{Output, Render};
use crate::settings::Settings;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct BuildArgs {
    /// The RCCL artifact: librccl.so.1, librccl.so.1.gz, or the workflow's .zip.
    #[arg(long, value_name = "FILE")]
    pub rccl: PathBuf,

    /// Base image to overlay.
    #[arg(long, value_name = "IMAGE", default_value = crate::DEFAULT_BASE_IMAGE)]
    pub base: String,

    /// Tag for the built image.
    #[arg(long, value_name = "REF", default_value = crate::DEFAULT_BUILD_TAG)]
    pub tag: String,

    /// Extra tags for the same image (repeatable).
    #[arg(long = "also-tag", value_name = "REF")]
    pub also_tag: Vec<String>,

    /// Push every tag after building.
    #[arg(long)]
    pub push: bool,

    /// Where the RCCL came from (a URL or a workflow run), recorded in the image labels.
    #[arg(long, env = "RCCL_SOURCE", value_name = "TEXT")]
    pub rccl_source: Option<String>,

    /// OCI source label (org.opencontainers.image.source).
    #[arg(long, env = "IMAGE_SOURCE", value_name = "URL")]
    pub source: Option<String>,

    /// OCI revision label (org.opencontainers.image.revision).
    #[arg(long, env = "IMAGE_REVISION", value_name = "SHA")]
    pub revision: Option<String>,
}

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
