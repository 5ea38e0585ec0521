//! Pulling through the Docker-compatible `/images/create` endpoint. dockerd and podman's
//! service both answer it with per-layer byte progress, which drives the progress bars;
//! libpod's own pull endpoint only streams text.

use bollard::auth::DockerCredentials;
use bollard::query_parameters::CreateImageOptionsBuilder;
use futures_util::StreamExt;

use super::auth::{credentials_for, registry_fix};
use super::endpoint::process_env;
use crate::error::{Error, Result};
use crate::ui::Progress;

/// The compat API version both engines here speak (podman 4.3 answers up to 1.41).
pub const COMPAT_API: bollard::ClientVersion = bollard::ClientVersion { major_version: 1, minor_version: 41 };

/// `repo:tag` / `repo@sha256:…` → (repository, tag or digest); the tag is split after the last '/'
/// so a registry port is not mistaken for one.
pub fn split_reference(reference: &str) -> (&str, &str) {
    if let Some((repository, digest)) = reference.split_once('@') {
        return (repository, digest);
    }
    let name_start = reference.rfind('/').map_or(0, |i| i + 1);
    match reference[name_start..].rfind(':') {
        Some(i) => (&reference[..name_start + i], &reference[name_start + i + 1..]),
        None => (reference, "latest"),
    }
}

/// Registry credentials for `reference`, as the compat API takes them.
pub fn docker_credentials(reference: &str) -> Option<DockerCredentials> {
    credentials_for(reference, &process_env).map(|c| DockerCredentials {
        username: Some(c.username),
        password: Some(c.password),
        serveraddress: Some(c.registry),
        ..Default::default()
    })
}

/// The server's message from a bollard error (not a Debug dump).
pub fn server_message(error: bollard::errors::Error) -> String {
    match error {
        bollard::errors::Error::DockerResponseServerError { message, .. } => message,
        bollard::errors::Error::DockerStreamError { error } => error,
        other => other.to_string(),
    }
}

pub async fn pull(client: &bollard::Docker, engine: &'static str, reference: &str, progress: &Progress) -> Result<()> {
    let failed = |message: String| Error::Engine {
        engine,
        action: format!("pull {reference}"),
        message: format!("{message}. {}", registry_fix(engine, reference, &message)),
    };
    let (repository, tag) = split_reference(reference);
    let options = CreateImageOptionsBuilder::default().from_image(repository).tag(tag).build();
    let mut stream = client.create_image(Some(options), None, docker_credentials(reference));
    while let Some(item) = stream.next().await {
        let info = item.map_err(|e| failed(server_message(e)))?;
        if let Some(detail) = info.error_detail {
            return Err(failed(detail.message.unwrap_or_else(|| "the registry refused the pull".into())));
        }
        let status = info.status.unwrap_or_default();
        let Some(id) = info.id else {
            progress.line(&status);
            continue;
        };
        if matches!(status.as_str(), "Pull complete" | "Already exists" | "Download complete") {
            progress.layer_done(&id, &status);
        } else {
            let detail = info.progress_detail.unwrap_or_default();
            let bytes = |n: Option<i64>| n.unwrap_or(0).max(0) as u64;
            progress.layer(&id, &status, bytes(detail.current), bytes(detail.total));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_references() {
        assert_eq!(split_reference("127.0.0.1:5000/a/b:dev"), ("127.0.0.1:5000/a/b", "dev"));
        assert_eq!(split_reference("127.0.0.1:5000/a/b"), ("127.0.0.1:5000/a/b", "latest"));
        assert_eq!(split_reference("docker.io/x/y@sha256:ab"), ("docker.io/x/y", "sha256:ab"));
    }
}
