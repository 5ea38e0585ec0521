//! Building through libpod's /build endpoint. podman-api takes a context directory (it makes
//! the tar itself), so the engine-neutral context tar is unpacked into a temporary one first.

use futures_util::StreamExt;
use podman_api::opts::{ImageBuildOpts, ImageTagOpts};
use podman_api::Podman;

use super::BuildJob;
use crate::error::{Error, Result};
use crate::image::reference::ImageRef;
use crate::reporter::Reporter;

pub async fn build(client: &Podman, endpoint: &str, job: BuildJob<'_>, reporter: &dyn Reporter) -> Result<String> {
    let BuildJob { context_tar, containerfile, tags, labels, build_args } = job;
    let failed = |message: String| Error::engine("podman", "build", message);
    let first_tag = tags.first().ok_or_else(|| failed("no tag given for the built image".into()))?;
    let dir = tempfile::tempdir().map_err(|e| failed(format!("cannot create a context directory: {e}")))?;
    tar::Archive::new(context_tar.as_slice())
        .unpack(dir.path())
        .map_err(|e| failed(format!("cannot unpack the build context: {e}")))?;

    let opts = ImageBuildOpts::builder(dir.path().display().to_string())
        .dockerfile(containerfile)
        .tag(first_tag)
        .labels(labels.iter())
        .build_args(build_args.iter())
        .layers(true)
        .build();
    let images = client.images();
    let mut stream = images.build(&opts).map_err(|e| failed(e.to_string()))?;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| failed(format!("{e} (via {endpoint})")))?;
        reporter.line(&chunk.stream);
    }
    let image = client
        .images()
        .get(first_tag.as_str())
        .inspect()
        .await
        .map_err(|e| failed(format!("the build finished but {first_tag} is not there: {e}")))?;
    let id = image.id.unwrap_or_default();
    for tag in &tags[1..] {
        let name = ImageRef::parse(tag)?;
        client
            .images()
            .get(id.as_str())
            .tag(&ImageTagOpts::builder().repo(&name.repository).tag(name.tag_or_digest()).build())
            .await
            .map_err(|e| failed(format!("cannot tag the image as {tag}: {e}")))?;
    }
    Ok(if id.starts_with("sha256:") { id } else { format!("sha256:{id}") })
}
