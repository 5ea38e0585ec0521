//! `build --rccl FILE`: overlay a gfx1151 RCCL on an image through the engine's build API.
//! The artifact is inspected first; a rejected one never reaches the engine.

mod overlay;

use std::path::PathBuf;

use crate::error::Result;
use crate::ops::rccl::check_against;
use crate::rccl;
use crate::settings::Settings;
pub use overlay::{build_image, BuildOutcome, BuildRequest, Provenance};

/// What to build, resolved from the command line.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// The RCCL artifact: librccl.so.1, librccl.so.1.gz, or the workflow's .zip.
    pub rccl: PathBuf,
    pub base: String,
    /// Every tag of the result (at least one).
    pub tags: Vec<String>,
    pub push: bool,
    pub rccl_source: Option<String>,
    pub source: Option<String>,
    pub revision: Option<String>,
}

pub async fn build(settings: &Settings, options: &BuildOptions) -> Result<BuildOutcome> {
    overlay::check_references(&options.base, &options.tags)?;
    let mut report = rccl::inspect_artifact(&options.rccl)?;
    report.ensure_gfx1151()?;
    let connection = settings.connect().await?;
    // Refused before the build when it would not load in the image it goes into.
    check_against(connection.engine(), &mut report, &options.base, settings.reporter.as_ref()).await?;
    // Said first, refused or not: the image's own RCCL may make the build needless.
    if let Some(stock) = report.abi.as_ref().and_then(|abi| abi.stock.as_ref()) {
        settings.reporter.line(&format!("{}: {}", options.base, stock.summary()));
    }
    report.ensure_gfx1151()?;
    settings.reporter.line(&format!(
        "{}: sha256 {}, {} bytes, targets {}",
        options.rccl.display(),
        report.sha256,
        report.size,
        report.gfx_targets.join(", ")
    ));
    let provenance = Provenance::new(
        options.source.as_deref(),
        options.revision.as_deref(),
        options.rccl_source.as_deref(),
        &options.rccl,
    );
    let request = BuildRequest::new(&report, &provenance, &options.base, &options.tags, options.push)?;
    build_image(connection.engine(), &report, &request, settings.reporter.as_ref()).await
}
