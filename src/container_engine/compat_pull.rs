//! Pulling through the Docker-compatible `/images/create` endpoint. dockerd and podman's
//! service both answer it with per-layer byte progress, which drives the progress bars;
//! libpod's own pull endpoint only streams text.

use bollard::auth::DockerCredentials;
use bollard::query_parameters::CreateImageOptionsBuilder;
use futures_util::StreamExt;

use super::auth::{login_for, registry_refused, Login};
use crate::error::Result;
use crate::image::reference::ImageRef;
use crate::reporter::Reporter;

/// The compat API version both engines here speak (podman 4.3 answers up to 1.41).
pub const COMPAT_API: bollard::ClientVersion = bollard::ClientVersion { major_version: 1, minor_version: 41 };

/// The login for `image`'s registry, as the compat API takes it.
pub async fn docker_credentials(engine: &str, image: &ImageRef) -> Result<Option<DockerCredentials>> {
    let Some(login) = login_for(engine, image).await? else { return Ok(None) };
    let mut credentials = DockerCredentials { serveraddress: Some(login.server), ..Default::default() };
    match login.login {
        Login::Password { username, password } => {
            credentials.username = Some(username);
            credentials.password = Some(password.expose().to_string());
        }
        Login::IdentityToken(token) => credentials.identitytoken = Some(token.expose().to_string()),
    }
    Ok(Some(credentials))
}

/// The server's message from a bollard error (not a Debug dump).
pub fn server_message(error: bollard::errors::Error) -> String {
    match error {
        bollard::errors::Error::DockerResponseServerError { message, .. } => message,
        bollard::errors::Error::DockerStreamError { error } => error,
        other => other.to_string(),
    }
}

pub async fn pull(
    client: &bollard::Docker,
    engine: &'static str,
    reference: &str,
    reporter: &dyn Reporter,
) -> Result<()> {
    let image = ImageRef::parse(reference)?;
    let failed = |message: String| registry_refused(engine, "pull", &image, reference, &message);
    let options = CreateImageOptionsBuilder::default().from_image(&image.repository).tag(image.tag_or_digest()).build();
    let mut stream = client.create_image(Some(options), None, docker_credentials(engine, &image).await?);
    while let Some(item) = stream.next().await {
        let info = item.map_err(|e| failed(server_message(e)))?;
        if let Some(detail) = info.error_detail {
            return Err(failed(detail.message.unwrap_or_else(|| "the registry refused the pull".into())));
        }
        let status = info.status.unwrap_or_default();
        let Some(id) = info.id else {
            reporter.line(&status);
            continue;
        };
        if matches!(status.as_str(), "Pull complete" | "Already exists" | "Download complete") {
            reporter.layer_done(&id, &status);
        } else {
            let detail = info.progress_detail.unwrap_or_default();
            let bytes = |n: Option<i64>| n.unwrap_or(0).max(0) as u64;
            reporter.layer(&id, &status, bytes(detail.current), bytes(detail.total));
        }
    }
    Ok(())
}
