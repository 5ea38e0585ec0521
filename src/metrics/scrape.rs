//! One scrape of an engine's `/metrics` (vLLM's API server, llama-server started with
//! `--metrics`): the link's one GET ([`crate::link::http_get`]: HTTP/1.0, the whole exchange
//! within its deadline), the body refused past [`ENGINE_LIMITS`] rather than cut (a cut line could
//! read as another number), then parsed. vLLM asks no key for `/metrics` (its middleware guards
//! `/v1` only); llama-server does when it has one: the bearer is for that.
//!
//! A server that takes the connection and then says nothing (stopped, or deadlocked) is
//! [`ScrapeError::Silent`], told apart from one nobody listens for: the watch reads the first as
//! no progress.

use std::net::SocketAddr;
use std::time::Duration;

use super::family::Family;
use super::parse::{parse, ExpositionError, ENGINE_LIMITS};
use crate::link::http_get::{get, GetFailure, GetRequest};

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
    let max = ENGINE_LIMITS.max_bytes;
    let request = GetRequest { path: "/metrics", accept: "text/plain", bearer, limit, max_body: max };
    let answer = get(address, &request).await.map_err(|failure| match failure {
        GetFailure::Refused => ScrapeError::Refused(address),
        GetFailure::Unreachable => ScrapeError::Unreachable(address, limit),
        GetFailure::Silent => ScrapeError::Silent(address, limit),
        GetFailure::Failed(failure) => ScrapeError::Failed(address, failure.message),
        GetFailure::NotHttp(_) => ScrapeError::Failed(address, "not an HTTP answer".into()),
        GetFailure::TooLarge => ScrapeError::TooLarge(address, max),
    })?;
    if answer.status != 200 {
        return Err(ScrapeError::Status(address, answer.status));
    }
    let text =
        String::from_utf8(answer.body).map_err(|_| ScrapeError::Failed(address, "the metrics are not UTF-8".into()))?;
    parse(&text, &ENGINE_LIMITS).map_err(|error| ScrapeError::Malformed(address, error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::http_get::tests::{answering, holding};

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
        let (address, held) = holding().await;
        let short = Duration::from_millis(200);
        assert_eq!(scrape(address, None, short).await, Err(ScrapeError::Silent(address, short)));
        held.abort();
    }
}
