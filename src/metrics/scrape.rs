//! One scrape of an engine's `/metrics` (vLLM's API server, llama-server started with
//! `--metrics`): one HTTP/1.0 GET (so the answer is plain, never chunked), the whole exchange
//! within its deadline, the body refused past [`ENGINE_LIMITS`] rather than cut (a cut line could
//! read as another number), then parsed. vLLM asks no key for `/metrics` (its middleware guards
//! `/v1` only); llama-server does when it has one: the bearer is for that.
//!
//! A server that takes the connection and then says nothing (stopped, or deadlocked) is
//! [`ScrapeError::Silent`], told apart from one nobody listens for: the watch reads the first as
//! no progress.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::family::Family;
use super::parse::{parse, ExpositionError, ENGINE_LIMITS};
use crate::link::http1::read_head;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScrapeError {
    #[error("nothing listens at {0}")]
    Refused(SocketAddr),
    #[error("{0} did not take the connection within {1:?}")]
    Unreachable(SocketAddr, Duration),
    #[error("{0} took the connection but gave no whole answer within {1:?}")]
    Silent(SocketAddr, Duration),
    #[error("{0} answered /metrics with HTTP {1}")]
    Status(SocketAddr, u16),
    #[error("{0}'s metrics are larger than {1} bytes")]
    TooLarge(SocketAddr, usize),
    #[error("{0}'s metrics are not Prometheus's text format: {1}")]
    Malformed(SocketAddr, ExpositionError),
    #[error("scraping {0}: {1}")]
    Failed(SocketAddr, String),
}

pub async fn scrape(address: SocketAddr, bearer: Option<&str>, limit: Duration) -> Result<Vec<Family>, ScrapeError> {
    let started = tokio::time::Instant::now();
    let stream = match tokio::time::timeout(limit, TcpStream::connect(address)).await {
        Err(_) => return Err(ScrapeError::Unreachable(address, limit)),
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::ConnectionRefused => {
            return Err(ScrapeError::Refused(address))
        }
        Ok(Err(error)) => return Err(ScrapeError::Failed(address, error.to_string())),
        Ok(Ok(stream)) => stream,
    };
    let remaining = limit.saturating_sub(started.elapsed());
    let text = match tokio::time::timeout(remaining, exchange(stream, address, bearer, remaining)).await {
        Err(_) => return Err(ScrapeError::Silent(address, limit)),
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::TimedOut => {
            return Err(ScrapeError::Silent(address, limit))
        }
        Ok(Err(error)) => return Err(ScrapeError::Failed(address, error.to_string())),
        Ok(Ok(answer)) => answer?,
    };
    parse(&text, &ENGINE_LIMITS).map_err(|error| ScrapeError::Malformed(address, error))
}

/// The answer's body, or what the server said instead; the io errors (a timeout among them) for
/// the caller to name.
async fn exchange(
    mut stream: TcpStream,
    address: SocketAddr,
    bearer: Option<&str>,
    limit: Duration,
) -> std::io::Result<Result<String, ScrapeError>> {
    let authorization = bearer.map_or(String::new(), |token| format!("Authorization: Bearer {token}\r\n"));
    let request = format!("GET /metrics HTTP/1.0\r\nHost: {address}\r\nAccept: text/plain\r\n{authorization}\r\n");
    stream.write_all(request.as_bytes()).await?;
    let (head, mut body) = read_head(&mut stream, limit).await?;
    match head.status() {
        Some(200) => {}
        Some(status) => return Ok(Err(ScrapeError::Status(address, status))),
        None => return Ok(Err(ScrapeError::Failed(address, "not an HTTP answer".into()))),
    }
    let max = ENGINE_LIMITS.max_bytes;
    if head.content_length().is_some_and(|length| length > max as u64) {
        return Ok(Err(ScrapeError::TooLarge(address, max)));
    }
    // One byte more than the limit tells a body that is too large from one that fits exactly.
    let wanted = (max + 1).saturating_sub(body.len()) as u64;
    stream.take(wanted).read_to_end(&mut body).await?;
    if body.len() > max {
        return Ok(Err(ScrapeError::TooLarge(address, max)));
    }
    if let Some(length) = head.content_length().filter(|&length| length != body.len() as u64) {
        return Ok(Err(ScrapeError::Failed(
            address,
            format!("{} of {length} bytes before the connection closed", body.len()),
        )));
    }
    Ok(String::from_utf8(body).map_err(|_| ScrapeError::Failed(address, "the metrics are not UTF-8".into())))
}

#[cfg(test)]
pub(crate) mod tests {
    use tokio::net::TcpListener;

    use super::*;

    /// A server that answers one connection with `answer` after reading the request.
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

    #[tokio::test]
    async fn scrapes_parses_and_sends_the_key() {
        let body = "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 2\n";
        let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        let (address, server) = answering(answer.into_bytes()).await;
        let families = scrape(address, Some("k"), Duration::from_secs(10)).await.unwrap();
        assert_eq!(families[0].samples[0].value, 2.0);
        let request = server.await.unwrap();
        assert!(request.starts_with("GET /metrics HTTP/1.0\r\n") && request.contains("Authorization: Bearer k\r\n"));
    }

    #[tokio::test]
    async fn refused_silent_status_large_and_garbled_are_told_apart() {
        let limit = Duration::from_secs(10);
        let (address, server) = answering(b"HTTP/1.1 503 Unavailable\r\n\r\n".to_vec()).await;
        assert_eq!(scrape(address, None, limit).await, Err(ScrapeError::Status(address, 503)));
        server.await.unwrap();
        assert_eq!(scrape(address, None, limit).await, Err(ScrapeError::Refused(address)));

        let (address, server) = answering(b"HTTP/1.1 200 OK\r\n\r\nx one\n".to_vec()).await;
        assert!(matches!(scrape(address, None, limit).await, Err(ScrapeError::Malformed(..))));
        server.await.unwrap();

        let mut large = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        large.extend(std::iter::repeat_n(b'#', ENGINE_LIMITS.max_bytes + 1));
        let (address, server) = answering(large).await;
        assert_eq!(scrape(address, None, limit).await, Err(ScrapeError::TooLarge(address, ENGINE_LIMITS.max_bytes)));
        server.await.unwrap();

        // Takes the connection, reads the request, says nothing: a stopped server.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let held = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(socket);
        });
        let short = Duration::from_millis(200);
        assert_eq!(scrape(address, None, short).await, Err(ScrapeError::Silent(address, short)));
        held.abort();
    }
}
