//! A node's pull from the head's registry, during its stage: `HEAD:PORT/PATH@sha256:X`, then the
//! image named as upstream names it, so that `status`, `rollback` and a single-node `refresh` see
//! no difference.
//! - Podman: tagged `REPO:PIN` first, then the head's name removed (removing an image's only name
//!   removes the image). Podman derives RepoDigests from names × digests, so they are then
//!   `REPO@X` (and the platform manifest's), the same Id and Digest as after an upstream pull.
//! - Docker keeps a digest only for a name it pulled, and refuses to tag with a digest: it gets
//!   `REPO:PIN` too and keeps the head's name, which carries the digest (`HEAD:PORT/PATH@X` in
//!   RepoDigests). Looking the image up by `REPO@X` therefore also accepts an image of `REPO`
//!   that carries digest X under another registry's name ([`carried_digests`]).
//!
//! A node that cannot reach the head's registry (no route, refused, TLS it cannot check, no client
//! certificate the registry accepts) pulls from upstream itself and says why; any other failure
//! fails its stage.

use serde::{Deserialize, Serialize};

use crate::container_engine::find::{carried_digests, not_present_after_pull};
use crate::container_engine::{ContainerEngine, EngineKind};
use crate::error::{Error, Result};
use crate::image::reference::ImageRef;
use crate::paths::Paths;
use crate::plan::pin::pin_tag;
use crate::registry::RegistryClient;
use crate::reporter::Reporter;
use crate::settings::Settings;
use crate::spread::trust::client_identity;

/// Where a node's stage pulls from instead of upstream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadSource {
    /// The head's registry, `IP:PORT` on the cluster link.
    pub registry: String,
    /// The cluster CA, which the node checks the registry against.
    pub ca_pem: String,
}

/// Where a node's image came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "from")]
pub enum PulledFrom {
    /// Its upstream registry.
    Upstream,
    /// The head's registry, over the cluster link.
    Head { registry: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageDigests {
    /// `repo` (a tag or digest with it is ignored).
    pub repository: String,
}

/// The digests the node's images of `repository` carry, whichever registry's name carries them:
/// a node that has the digest a refresh resolves to pulls nothing. Asked while the head resolves
/// it, so a no-op cluster refresh takes no round trip more than it did before the spread.
pub async fn image_digests(settings: &Settings, request: &ImageDigests) -> Result<Vec<String>> {
    let wanted = ImageRef::parse(&request.repository)?;
    let connection = settings.connect().await?;
    let images = connection.engine().image_list(&wanted.repository).await?;
    let path = wanted.path();
    let digests: std::collections::BTreeSet<String> =
        images.iter().flat_map(|image| carried_digests(image, &path)).collect();
    Ok(digests.into_iter().collect())
}

/// Pull `pinned` (`REPO@sha256:X`) from the head's registry and name it as upstream does; from
/// upstream when the head's registry cannot be reached. Where it came from, and the warning that
/// says why when it was not the head.
pub async fn pull_through_head(
    paths: &Paths,
    engine: &dyn ContainerEngine,
    pinned: &str,
    source: &SpreadSource,
    reporter: &dyn Reporter,
) -> Result<(PulledFrom, Option<String>)> {
    let image = ImageRef::parse(pinned)?;
    let digest = image
        .digest
        .as_deref()
        .ok_or_else(|| Error::Internal(format!("a node pulls from the head's registry by digest, not {pinned}")))?;
    let identity = client_identity(paths, &source.registry);
    let head = RegistryClient::cluster(&source.registry, &source.ca_pem, identity.as_ref())?;
    if let Err(unreachable) = head.ping().await {
        engine.pull(pinned, reporter).await?;
        let why = unreachable.report().message;
        let warning = format!("cannot reach the head's registry ({why}): pulled the image from upstream instead");
        return Ok((PulledFrom::Upstream, Some(warning)));
    }
    let from_head = format!("{}/{}@{digest}", source.registry, image.path());
    engine
        .pull(&from_head, reporter)
        .await
        .map_err(|error| error.context(format!("pulling from the head's registry {}", source.registry)))?;
    let info = engine
        .image_inspect(&from_head)
        .await?
        .ok_or_else(|| not_present_after_pull(engine.kind().program(), &from_head))?;
    let pulled = PulledFrom::Head { registry: source.registry.clone() };
    // Without a pin there is no canonical name to give it: the head's name keeps its digest.
    let Some(pin) = pin_tag(&info) else { return Ok((pulled, None)) };
    engine.image_tag(&info.id, &image.repository, &pin).await?;
    if engine.kind() == EngineKind::Podman {
        engine.image_remove(&from_head).await?;
    }
    Ok((pulled, None))
}
