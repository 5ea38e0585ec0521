//! The probes that prove an engine serves: `GET /health` and `GET /v1/models`, asked on the head
//! node itself (the operator's machine may not be on the cluster link), with the endpoint's API
//! key as a bearer token where it has one. HTTP/1.0, so the server closes the connection after one
//! plain (never chunked) answer; every step is bounded.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::io_failure::{IoFailure, IoStep};

/// The most of a body read: `/v1/models` is a few hundred bytes.
const BODY_LIMIT: u64 = 1 << 20;

/// What a GET came back with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HttpAnswer {
    /// Nothing listens yet (vLLM binds its port only once the engine is up).
    Refused,
    /// No answer within the limit.
    TimedOut,
    /// An answer: status and body.
    Status(u16, String),
    /// The connection failed otherwise (no route to it, reset midway).
    Failed(IoFailure),
    /// What came back is no HTTP answer: its first characters.
    NotHttp(String),
    /// The node that was to ask could not be asked (its call failed): why.
    Unasked(String),
}

impl std::fmt::Display for HttpAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpAnswer::Refused => f.write_str("nothing listens"),
            HttpAnswer::TimedOut => f.write_str("no answer in time"),
            HttpAnswer::Status(code, _) => write!(f, "answered {code}"),
            HttpAnswer::Failed(failure) => write!(f, "{failure}"),
            HttpAnswer::NotHttp(head) => write!(f, "not an HTTP answer: {head:?}"),
            HttpAnswer::Unasked(why) => f.write_str(why),
        }
    }
}

pub async fn get(address: SocketAddr, path: &str, bearer: Option<&str>, limit: Duration) -> HttpAnswer {
    match tokio::time::timeout(limit, exchange(address, path, bearer)).await {
        Err(_) => HttpAnswer::TimedOut,
        Ok(Err((_, error))) if error.kind() == std::io::ErrorKind::ConnectionRefused => HttpAnswer::Refused,
        Ok(Err((during, error))) => HttpAnswer::Failed(IoFailure::new(during, &error)),
        Ok(Ok(answer)) => answer,
    }
}

/// The answer, or the step that failed and how.
async fn exchange(
    address: SocketAddr,
    path: &str,
    bearer: Option<&str>,
) -> Result<HttpAnswer, (IoStep, std::io::Error)> {
    let mut stream = TcpStream::connect(address).await.map_err(|e| (IoStep::Connect, e))?;
    let authorization = bearer.map_or(String::new(), |token| format!("Authorization: Bearer {token}\r\n"));
    let request = format!("GET {path} HTTP/1.0\r\nHost: {address}\r\nAccept: application/json\r\n{authorization}\r\n");
    stream.write_all(request.as_bytes()).await.map_err(|e| (IoStep::Send, e))?;
    let mut raw = Vec::new();
    stream.take(BODY_LIMIT).read_to_end(&mut raw).await.map_err(|e| (IoStep::Receive, e))?;
    Ok(parse(&raw))
}

/// `HTTP/1.1 200 OK\r\n…\r\n\r\nBODY` → `Status(200, BODY)`.
fn parse(raw: &[u8]) -> HttpAnswer {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().and_then(|line| {
        let mut words = line.split_whitespace();
        words.next().filter(|version| version.starts_with("HTTP/"))?;
        words.next()?.parse().ok()
    });
    match status {
        Some(status) => HttpAnswer::Status(status, body.to_string()),
        None => HttpAnswer::NotHttp(head.chars().take(60).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_and_body_are_read_from_the_answer() {
        let raw = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{\"data\":[]}";
        assert_eq!(parse(raw), HttpAnswer::Status(200, "{\"data\":[]}".into()));
        assert_eq!(parse(b"HTTP/1.0 503 Service Unavailable\r\n\r\n"), HttpAnswer::Status(503, String::new()));
        assert!(matches!(parse(b"SSH-2.0-OpenSSH_9.2\r\n"), HttpAnswer::NotHttp(_)));
        assert!(matches!(parse(b""), HttpAnswer::NotHttp(_)));
    }

    #[tokio::test]
    async fn a_real_exchange_and_a_refused_port() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = vec![0u8; 1024];
            let read = socket.read(&mut request).await.unwrap();
            let request = String::from_utf8_lossy(&request[..read]).into_owned();
            assert!(request.starts_with("GET /health HTTP/1.0\r\n") && request.contains("Authorization: Bearer k\r\n"));
            socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await.unwrap();
        });
        let limit = Duration::from_secs(5);
        assert_eq!(get(address, "/health", Some("k"), limit).await, HttpAnswer::Status(200, String::new()));
        server.await.unwrap();
        // Nothing listens there any more.
        assert_eq!(get(address, "/health", None, limit).await, HttpAnswer::Refused);
    }
}
