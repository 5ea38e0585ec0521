//! Finding an image the engine has: by the reference asked for, or, named by digest, under
//! another registry's name that carries the digest (docker keeps a digest only for the name it
//! pulled). Refresh, resolve and the spread's pull each need it.

use super::{ContainerEngine, ImageInfo};
use crate::error::{Error, Result};
use crate::image::reference::ImageRef;

/// An image the engine has, and a reference the engine resolves to it.
pub struct FoundImage {
    pub info: ImageInfo,
    /// `reference` itself, else the image's id.
    pub engine_ref: String,
}

/// `reference` as the engine has it. Named by digest, an image of that repository that carries
/// the digest under another registry's name counts too: docker keeps a digest only for the name
/// it pulled, which for a spread image is the head registry's (see `crate::spread::pull`).
pub async fn find_image(engine: &dyn ContainerEngine, reference: &str) -> Result<Option<FoundImage>> {
    if let Some(info) = engine.image_inspect(reference).await? {
        return Ok(Some(FoundImage { info, engine_ref: reference.to_string() }));
    }
    let wanted = ImageRef::parse(reference)?;
    let Some(digest) = wanted.digest.as_deref() else { return Ok(None) };
    let path = wanted.path();
    let listed = engine.image_list(&wanted.repository).await?;
    let carrier = listed.into_iter().find(|image| carried_digests(image, &path).any(|carried| carried == digest));
    let Some(id) = carrier.map(|image| image.id) else { return Ok(None) };
    Ok(engine.image_inspect(&id).await?.map(|info| FoundImage { info, engine_ref: id }))
}

/// The digests `image` carries under a name whose repository path is `path`, whatever the
/// registry (the head's, for a spread image on docker).
pub fn carried_digests<'a>(image: &'a ImageInfo, path: &'a str) -> impl Iterator<Item = String> + 'a {
    image
        .repo_digests
        .iter()
        .filter_map(|name| ImageRef::parse(name).ok())
        .filter(move |named| named.path() == path)
        .filter_map(|named| named.digest)
}

/// The engine pulled `reference` without error, yet does not have it (removed meanwhile).
pub fn not_present_after_pull(engine: &'static str, reference: &str) -> Error {
    Error::ContainerEngine {
        engine,
        action: format!("pull {reference}"),
        message: format!("{reference} is not present after pulling it"),
        fix: Some(format!("pull it again; `{engine} images` shows what is there")),
    }
}
