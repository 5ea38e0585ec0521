//! `resolve REF` (hidden): pull a reference and name it by its registry digest, so every node of
//! a cluster refresh gets exactly the same image however the channel's tag moves meanwhile.

use serde::{Deserialize, Serialize};

use crate::apply::interruptible;
use crate::container_engine::find::not_present_after_pull;
use crate::error::{Error, Result};
use crate::image::reference::ImageRef;
use crate::plan::registry_digest;
use crate::settings::Settings;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolveReport {
    /// What was asked for (`repo:latest`).
    pub reference: String,
    /// `sha256:…` in its registry.
    pub digest: String,
    /// `repo@sha256:…`: the reference every node refreshes to.
    pub pinned: String,
    pub image_id: String,
}

pub async fn resolve(settings: &Settings, reference: &str) -> Result<ResolveReport> {
    let image = ImageRef::parse(reference)?;
    let connection = settings.connect().await?;
    let engine = connection.engine();
    interruptible(&format!("pulling {reference}"), engine.pull(reference, settings.reporter.as_ref())).await?;
    settings.reporter.finish();
    let info = engine
        .image_inspect(reference)
        .await?
        .ok_or_else(|| not_present_after_pull(engine.kind().program(), reference))?;
    let digest = registry_digest(&info, &image.repository).ok_or_else(|| Error::Registry {
        reference: reference.to_string(),
        message: format!("{reference} has no registry digest, so the nodes cannot be given the same image by name"),
        fix: Some("push it to a registry every node reaches and refresh from there".into()),
    })?;
    Ok(ResolveReport {
        reference: reference.to_string(),
        pinned: format!("{}@{digest}", image.repository),
        digest,
        image_id: info.id,
    })
}
