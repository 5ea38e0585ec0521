//! Inspecting a container through libpod without its size. podman-api's `inspect` always asks
//! `?size=true`, and podman then walks the container's writable layer: 0.9 s for a toolbox in
//! which Ray has run, here, and seconds for one with packages installed in it; on every command
//! that looks at the toolbox. Nothing here uses the size.

use std::path::Path;

use containers_api::conn::hyper::{self, Body, Request, StatusCode};
use containers_api::conn::Transport;
use podman_api::models::ContainerInspectResponseLibpod;

use crate::error::{Error, Result};

/// The transport to podman's socket, as podman-api builds its own.
pub fn transport(socket: &Path) -> Transport {
    Transport::Unix { client: hyper::Client::builder().build(hyperlocal::UnixConnector), path: socket.to_path_buf() }
}

/// `GET /libpod/containers/NAME/json`; None when there is no such container.
pub async fn inspect(transport: &Transport, name_or_id: &str) -> Result<Option<ContainerInspectResponseLibpod>> {
    let failed = |message: String| Error::engine("podman", format!("inspect container {name_or_id}"), message);
    // Podman's names and ids are made of these alone: anything else names no container (and
    // could not go into the path as it is).
    if name_or_id.is_empty() || !name_or_id.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b)) {
        return Ok(None);
    }
    let endpoint = podman_api::LATEST_API_VERSION.make_endpoint(format!("/libpod/containers/{name_or_id}/json"));
    let uri = transport.make_uri(&endpoint).map_err(|e| failed(e.to_string()))?;
    let request = Request::get(uri).body(Body::empty()).map_err(|e| failed(e.to_string()))?;
    let response = transport.request(request).await.map_err(|e| failed(e.to_string()))?;
    let status = response.status();
    let body = hyper::body::to_bytes(response.into_body()).await.map_err(|e| failed(e.to_string()))?;
    match status {
        StatusCode::NOT_FOUND => Ok(None),
        StatusCode::OK => {
            serde_json::from_slice(&body).map(Some).map_err(|e| failed(format!("unreadable answer: {e}")))
        }
        _ => Err(failed(libpod_message(&body).unwrap_or_else(|| format!("podman answered {status}")))),
    }
}

/// libpod's errors are `{"cause": …, "message": …, "response": N}`.
fn libpod_message(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    value.get("message")?.as_str().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An HTTP answer with `body`.
    fn answer(status: &str, body: &str) -> String {
        format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
    }

    /// A socket that answers each request with the next of `answers`, and the request lines it got.
    fn answering(answers: Vec<String>) -> (tempfile::TempDir, tokio::task::JoinHandle<Vec<String>>) {
        let dir = tempfile::tempdir().unwrap();
        let listener = tokio::net::UnixListener::bind(dir.path().join("podman.sock")).unwrap();
        let server = tokio::spawn(async move {
            let mut asked = Vec::new();
            for answer in answers {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut request = vec![0u8; 4096];
                let read = socket.read(&mut request).await.unwrap();
                asked.push(String::from_utf8_lossy(&request[..read]).lines().next().unwrap_or("").to_string());
                socket.write_all(answer.as_bytes()).await.unwrap();
            }
            asked
        });
        (dir, server)
    }

    #[tokio::test]
    async fn asks_without_the_size_and_reads_found_missing_and_refused() {
        let (dir, server) = answering(vec![
            answer("200 OK", r#"{"Id":"abc","Name":"vllm"}"#),
            answer("404 Not Found", ""),
            answer("500 Internal Server Error", r#"{"cause":"x","message":"storage is gone","response":500}"#),
        ]);
        let transport = transport(&dir.path().join("podman.sock"));

        let data = inspect(&transport, "vllm").await.unwrap().expect("found");
        assert_eq!((data.id.as_deref(), data.name.as_deref()), (Some("abc"), Some("vllm")));
        assert!(inspect(&transport, "gone").await.unwrap().is_none());
        let error = inspect(&transport, "vllm").await.unwrap_err().to_string();
        assert!(error.contains("inspect container vllm") && error.contains("storage is gone"), "{error}");

        let asked = server.await.unwrap();
        assert_eq!(asked[0], "GET /v4.3.1/libpod/containers/vllm/json HTTP/1.1", "no ?size=true");
        assert_eq!(asked[1], "GET /v4.3.1/libpod/containers/gone/json HTTP/1.1");
    }

    #[tokio::test]
    async fn a_name_no_container_can_have_is_not_asked_for() {
        let transport = transport(Path::new("/nonexistent/podman.sock"));
        for name in ["", "a/b", "../containers/json", "x?size=true", "a b"] {
            assert!(inspect(&transport, name).await.unwrap().is_none(), "{name:?}");
        }
    }
}
