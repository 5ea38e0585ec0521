//! The digest a reference names in its registry now, asked through the registry API: the head
//! learns what every node will get without pulling it (a pull on the head through its engine would
//! be a second upstream copy, beside the spread's).

use serde::{Deserialize, Serialize};

use crate::apply::interruptible;
use crate::error::Result;
use crate::image::reference::ImageRef;
use crate::registry::RegistryClient;
use crate::settings::Settings;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadResolve {
    /// `repo:tag` (a reference with a digest is its own answer).
    pub image: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamDigest {
    /// What was asked for.
    pub reference: String,
    /// `sha256:…`: the manifest (or index) the tag names now.
    pub digest: String,
    /// `repo@sha256:…`: the reference every node refreshes to.
    pub pinned: String,
}

/// `reference`'s digest in its registry now; Ctrl-C or SIGTERM stops the asking.
pub async fn resolve_upstream(settings: &Settings, reference: &str) -> Result<UpstreamDigest> {
    let image = ImageRef::parse(reference)?;
    let digest = match &image.digest {
        Some(digest) => digest.clone(),
        None => {
            let asking = async {
                let upstream = RegistryClient::upstream(&image, settings.engine.program()).await?;
                upstream.digest_of(&image.path(), image.tag.as_deref().unwrap_or("latest")).await
            };
            interruptible(&format!("asking {} for {reference}'s digest", image.registry()), asking).await?
        }
    };
    Ok(UpstreamDigest { reference: reference.to_string(), pinned: format!("{}@{digest}", image.repository), digest })
}
