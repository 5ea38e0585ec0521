//! The one GET the tool asks an engine's HTTP server (vLLM's API server, llama-server) or the
//! router with: HTTP/1.0, so the server closes the connection after one plain (never chunked)
//! answer; the endpoint's API key, where it has one, as a bearer token, which goes into the
//! request only (no failure carries it); every step bounded: the connection within the limit, the
//! whole answer within what is left of it, the head by [`read_head`], the body refused past its
//! bound rather than cut (a cut body could read as a whole one).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::http1::read_head;
use super::io_failure::{IoFailure, IoStep};

/// What to ask for.
#[derive(Debug, Clone, Copy)]
pub struct GetRequest<'a> {
    pub path: &'a str,
    /// The `Accept` header: `application/json`, `text/plain`.
    pub accept: &'a str,
    /// The endpoint's API key.
    pub bearer: Option<&'a str>,
    /// The whole exchange, the connection included.
    pub limit: Duration,
    /// The largest body taken.
    pub max_body: usize,
}

/// A whole answer to a GET: its status and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetAnswer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Why no whole answer came; the callers name each in their own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GetFailure {
    /// Nothing listens (vLLM binds its port only once the engine is up).
    Refused,
    /// The connection was not taken within the limit.
    Unreachable,
    /// The connection was taken, but no whole answer came within the limit (a stopped or
    /// deadlocked server).
    Silent,
    /// The connection failed otherwise, or closed before the whole answer.
    Failed(IoFailure),
    /// What came back is no HTTP answer: its first line's first characters.
    NotHttp(String),
    /// The body is larger than `max_body`.
    TooLarge,
}

pub async fn get(address: SocketAddr, request: &GetRequest<'_>) -> Result<GetAnswer, GetFailure> {
    let started = tokio::time::Instant::now();
    let stream = match tokio::time::timeout(request.limit, TcpStream::connect(address)).await {
        Err(_) => return Err(GetFailure::Unreachable),
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::ConnectionRefused => return Err(GetFailure::Refused),
        Ok(Err(error)) => return Err(GetFailure::Failed(IoFailure::new(IoStep::Connect, &error))),
        Ok(Ok(stream)) => stream,
    };
    let remaining = request.limit.saturating_sub(started.elapsed());
    match tokio::time::timeout(remaining, exchange(stream, address, request, remaining)).await {
        Err(_) => Err(GetFailure::Silent),
        Ok(Err((_, error))) if error.kind() == std::io::ErrorKind::TimedOut => Err(GetFailure::Silent),
        Ok(Err((during, error))) => Err(GetFailure::Failed(IoFailure::new(during, &error))),
        Ok(Ok(answer)) => answer,
    }
}

/// The answer, or what the server said instead; the io errors (a timeout among them) with the
/// step they came at, for [`get`] to name.
async fn exchange(
    mut stream: TcpStream,
    address: SocketAddr,
    request: &GetRequest<'_>,
    limit: Duration,
) -> Result<Result<GetAnswer, GetFailure>, (IoStep, std::io::Error)> {
    let GetRequest { path, accept, bearer, max_body, .. } = *request;
    let authorization = bearer.map_or(String::new(), |token| format!("Authorization: Bearer {token}\r\n"));
    let asked = format!("GET {path} HTTP/1.0\r\nHost: {address}\r\nAccept: {accept}\r\n{authorization}\r\n");
    stream.write_all(asked.as_bytes()).await.map_err(|e| (IoStep::Send, e))?;
    let (head, mut body) = read_head(&mut stream, limit).await.map_err(|e| (IoStep::Receive, e))?;
    let Some(status) = head.status() else {
        return Ok(Err(GetFailure::NotHttp(head.first_line.join(" ").chars().take(60).collect())));
    };
    if head.content_length().is_some_and(|length| length > max_body as u64) {
        return Ok(Err(GetFailure::TooLarge));
    }
    // One byte more than the bound tells a body that is too large from one that fits exactly.
    let wanted = (max_body + 1).saturating_sub(body.len()) as u64;
    stream.take(wanted).read_to_end(&mut body).await.map_err(|e| (IoStep::Receive, e))?;
    if body.len() > max_body {
        return Ok(Err(GetFailure::TooLarge));
    }
    if let Some(length) = head.content_length().filter(|&length| length != body.len() as u64) {
        let cut = std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("{} of {length} bytes before the connection closed", body.len()),
        );
        return Ok(Err(GetFailure::Failed(IoFailure::new(IoStep::Receive, &cut))));
    }
    Ok(Ok(GetAnswer { status, body }))
}

#[cfg(test)]
pub(crate) mod tests {
    use tokio::net::TcpListener;

    use super::*;

    /// A server that answers one connection with `answer` after reading the request; the request.
    pub(crate) async fn answering(answer: Vec<u8>) -> (SocketAddr, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = vec![0u8; 4096];
            let read = socket.read(&mut request).await.unwrap();
            // A client that has read enough closes early: the rest of a write may fail.
            let _ = socket.write_all(&answer).await;
            String::from_utf8_lossy(&request[..read]).into_owned()
        });
        (address, server)
    }

    fn request(bearer: Option<&str>) -> GetRequest<'_> {
        GetRequest { path: "/x", accept: "text/plain", bearer, limit: Duration::from_secs(10), max_body: 8 }
    }

    #[tokio::test]
    async fn the_request_carries_the_key_and_the_answer_is_read_whole() {
        let (address, server) = answering(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()).await;
        assert_eq!(get(address, &request(Some("k"))).await, Ok(GetAnswer { status: 200, body: b"ok".to_vec() }));
        let asked = server.await.unwrap();
        assert!(asked.starts_with("GET /x HTTP/1.0\r\n"), "{asked}");
        assert!(asked.contains("Accept: text/plain\r\nAuthorization: Bearer k\r\n\r\n"), "{asked}");
        // Nothing listens there any more.
        assert_eq!(get(address, &request(None)).await, Err(GetFailure::Refused));
        let (address, server) = answering(b"HTTP/1.0 503 Service Unavailable\r\n\r\n".to_vec()).await;
        assert_eq!(get(address, &request(None)).await, Ok(GetAnswer { status: 503, body: Vec::new() }));
        assert!(!server.await.unwrap().contains("Authorization"));
    }

    #[tokio::test]
    async fn a_body_past_the_bound_a_cut_one_and_no_http_are_told_apart_without_the_key() {
        let secret = "s3cret-token";
        // Each answer, and what its failure says (in its Debug form).
        let cases: [(&[u8], &str); 5] = [
            (b"HTTP/1.1 200 OK\r\n\r\n123456789", "TooLarge"),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", "TooLarge"),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab", "2 of 4 bytes before the connection closed"),
            (b"SSH-2.0-OpenSSH_9.2 x\r\n\r\n", "NotHttp(\"SSH-2.0-OpenSSH_9.2 x\")"),
            (b"HTTP/1.1 200 OK\r\n", "Failed(IoFailure { during: Receive"),
        ];
        for (answer, expected) in cases {
            let (address, server) = answering(answer.to_vec()).await;
            let failure = get(address, &request(Some(secret))).await.expect_err("no whole answer");
            let said = format!("{failure:?}");
            assert!(said.contains(expected) && !said.contains(secret), "{:?}: {said}", String::from_utf8_lossy(answer));
            server.await.unwrap();
        }
        // Exactly the bound fits.
        let (address, server) = answering(b"HTTP/1.1 200 OK\r\n\r\n12345678".to_vec()).await;
        assert_eq!(get(address, &request(None)).await.map(|a| a.body.len()), Ok(8));
        server.await.unwrap();
    }

    /// A server that takes one connection and says nothing (a stopped one); abort it when done.
    pub(crate) async fn holding() -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let held = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(socket);
        });
        (address, held)
    }

    #[tokio::test]
    async fn a_server_that_takes_the_connection_and_says_nothing_is_silent() {
        let (address, held) = holding().await;
        let short = GetRequest { limit: Duration::from_millis(200), ..request(None) };
        assert_eq!(get(address, &short).await, Err(GetFailure::Silent));
        held.abort();
    }
}
