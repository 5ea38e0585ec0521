//! The watch's Prometheus endpoint: `GET /metrics` answers whatever the provider renders at that
//! moment, or 503 with the provider's reason while it has nothing to show (the watch before its
//! first look: Prometheus takes a non-2xx answer as a failed scrape, `up` 0, where an empty 200
//! would read as a target that is up with nothing to say); nothing else is served (another path: 404, another method: 405), nothing is changed by
//! a request. Bounded like the head's other servers ([`crate::link_server`]): at most
//! [`CONNECTION_LIMIT`] connections at once, the request head within its size and time, each write
//! within its limit, and the provider within [`PROVIDE_LIMIT`] (503 past it: a scrape waits for
//! the nodes' answers). Plain HTTP on the address the operator gave, loopback by default.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use super::render::CONTENT_TYPE;
use crate::error::{Error, Result};
use crate::link::http1::read_head;
use crate::link::server::{accept_bounded, close, write_bounded, REQUEST_LIMIT};

/// Connections served at once; Prometheus opens one per scrape.
pub const CONNECTION_LIMIT: usize = 8;
/// How long the provider may take to render the families.
pub const PROVIDE_LIMIT: Duration = Duration::from_secs(30);

/// `--metrics 9464` (loopback) or `--metrics ADDRESS:PORT`.
pub fn listen_address(text: &str) -> Result<SocketAddr> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse().map_err(|_| {
        Error::Usage(format!(
            "--metrics {text:?}: expected a port (served on 127.0.0.1) or ADDRESS:PORT, e.g. 9464, 127.0.0.1:9464 or \
             [::1]:9464"
        ))
    })
}

/// What a provider renders: the exposition, or why there is none yet.
pub type Rendered = std::result::Result<String, String>;

/// Serve `listener` until `stop` fires, each `GET /metrics` with what `provider` renders.
pub async fn serve<Provider, Rendering>(listener: TcpListener, stop: oneshot::Receiver<()>, provider: Provider)
where
    Provider: Fn() -> Rendering + Clone + Send + 'static,
    Rendering: Future<Output = Rendered> + Send + 'static,
{
    let refused = AtomicU64::new(0);
    // No idle end: the endpoint lives as long as the watch.
    accept_bounded(&listener, CONNECTION_LIMIT, stop, Duration::MAX, &refused, move |socket, slot| {
        let provider = provider.clone();
        async move {
            answer(socket, provider).await;
            drop(slot);
        }
    })
    .await;
}

async fn answer<Provider, Rendering>(mut socket: TcpStream, provider: Provider)
where
    Provider: Fn() -> Rendering,
    Rendering: Future<Output = Rendered>,
{
    let Ok((head, _)) = read_head(&mut socket, REQUEST_LIMIT).await else { return };
    let method = head.first_line.first().map(String::as_str).unwrap_or_default();
    let target = head.first_line.get(1).map(String::as_str).unwrap_or_default();
    let path = target.split('?').next().unwrap_or_default();
    let (status, extra, body) = match (method, path) {
        ("GET", "/metrics") => match tokio::time::timeout(PROVIDE_LIMIT, provider()).await {
            Ok(Ok(text)) => ("200 OK", format!("Content-Type: {CONTENT_TYPE}\r\n"), text),
            Ok(Err(why)) => ("503 Service Unavailable", String::new(), format!("{why}\n")),
            Err(_) => ("503 Service Unavailable", String::new(), "the metrics took too long to gather\n".into()),
        },
        (_, "/metrics") => ("405 Method Not Allowed", "Allow: GET\r\n".into(), "only GET\n".into()),
        _ => ("404 Not Found", String::new(), "only /metrics is served here\n".into()),
    };
    let response =
        format!("HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    if write_bounded(&mut socket, response.as_bytes()).await.is_ok() {
        close(&mut socket).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// What the endpoint answers `request` (empty when it closed the connection unanswered).
    async fn ask(address: SocketAddr, request: &str) -> String {
        let mut stream = TcpStream::connect(address).await.unwrap();
        let _ = stream.write_all(request.as_bytes()).await;
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).into_owned()
    }

    #[tokio::test]
    async fn serves_get_metrics_only_and_renders_at_each_request() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel();
        let scrapes = Arc::new(AtomicUsize::new(0));
        let counted = scrapes.clone();
        let provider = move || {
            let scrape = counted.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                match scrape {
                    1 => Err("nothing read yet".to_string()),
                    _ => Ok(format!("# HELP strix_scrapes x\n# TYPE strix_scrapes counter\nstrix_scrapes {scrape}\n")),
                }
            }
        };
        let server = tokio::spawn(serve(listener, stopped, provider));

        // Nothing to show yet: not a target that is up with no samples.
        let first = ask(address, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(first.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{first}");
        assert!(first.ends_with("\r\n\r\nnothing read yet\n"), "{first}");
        let second = ask(address, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(second.starts_with("HTTP/1.1 200 OK\r\n"), "{second}");
        assert!(second.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), "{second}");
        assert!(second.ends_with("strix_scrapes 2\n"), "{second}");
        let third = ask(address, "GET /metrics?x=1 HTTP/1.0\r\n\r\n").await;
        assert!(third.ends_with("strix_scrapes 3\n"), "{third}");

        let post = ask(address, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").await;
        assert!(post.starts_with("HTTP/1.1 405 Method Not Allowed\r\n") && post.contains("Allow: GET\r\n"), "{post}");
        let other = ask(address, "GET /v1/models HTTP/1.1\r\n\r\n").await;
        assert!(other.starts_with("HTTP/1.1 404 Not Found\r\n"), "{other}");
        assert_eq!(scrapes.load(Ordering::SeqCst), 3, "only GET /metrics renders");

        // A head past its size limit is dropped unanswered.
        let endless = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(64 << 10));
        let mut stream = TcpStream::connect(address).await.unwrap();
        let _ = stream.write_all(endless.as_bytes()).await;
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));

        stop.send(()).unwrap();
        server.await.unwrap();
        assert!(TcpStream::connect(address).await.is_err(), "stopped: nothing listens");
    }

    #[tokio::test]
    async fn connections_past_the_limit_are_closed_unanswered() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel();
        let server = tokio::spawn(serve(listener, stopped, || async { Ok(String::new()) }));
        // Each holds its slot: connected, no request yet.
        let mut held = Vec::new();
        for _ in 0..CONNECTION_LIMIT {
            held.push(TcpStream::connect(address).await.unwrap());
        }
        // The listener accepts in order: one answered request proves the held ones were taken.
        let mut extra = TcpStream::connect(address).await.unwrap();
        let mut answer = Vec::new();
        let _ = extra.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").await;
        let _ = extra.read_to_end(&mut answer).await;
        assert!(answer.is_empty(), "the ninth connection got {:?}", String::from_utf8_lossy(&answer));
        drop(held);
        // The held connections' tasks see their end and free the slots: a bounded wait for it.
        let mut freed = String::new();
        for _ in 0..200 {
            freed = ask(address, "GET /metrics HTTP/1.0\r\n\r\n").await;
            if !freed.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(freed.starts_with("HTTP/1.1 200 OK"), "{freed}");
        stop.send(()).unwrap();
        server.await.unwrap();
    }

    #[test]
    fn the_listen_address_is_loopback_unless_given() {
        assert_eq!(listen_address("9464").unwrap(), "127.0.0.1:9464".parse().unwrap());
        assert_eq!(listen_address("[::1]:9464").unwrap(), "[::1]:9464".parse().unwrap());
        assert_eq!(listen_address("0.0.0.0:80").unwrap(), "0.0.0.0:80".parse().unwrap());
        let error = listen_address("localhost:9464").unwrap_err();
        assert_eq!(error.kind(), crate::error::ErrorKind::Usage);
        assert!(listen_address("70000").is_err());
    }
}
