//! The head's side of spreading a snapshot: its verified blobs over HTTPS, on the cluster link's
//! address only, to the nodes holding the pull's access key. TLS with the head's certificate from
//! the cluster CA, which the nodes check: the key and the weights never cross the link in clear,
//! and no one else can pose as the head. A request names a blob by its hash and nothing else: the
//! name is checked against the snapshot's own list, so no path from the network ever reaches the
//! file system. Bounded: at most [`MAX_CONNECTIONS`] at once (more are closed at once, counted as
//! refused), the handshake and the request head within 10 s and 16 KiB, each write within 60 s
//! ([`crate::link::server`]). It runs as a task of the head's agent for the length of the pull; when
//! the pull ends its key is refused at once, its open connections are cut and it stops listening;
//! it also stops by itself when nobody has asked for a while.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, OwnedSemaphorePermit};
use tokio_rustls::TlsAcceptor;

use super::blob::BlobName;
use crate::link::server::{accept_bounded, close, read_request, write_bounded};
use crate::link::tls::{server_config, TlsIdentity};
use crate::secret::Secret;

/// Connections served at once: a few per node is more than a pull opens (one at a time each).
pub const MAX_CONNECTIONS: usize = 32;
/// One read of a blob file.
const CHUNK: usize = 1 << 20;

/// What the server did, read by the head when it stops it.
#[derive(Debug, Default)]
pub struct ServeStats {
    pub requests: AtomicU64,
    /// Body bytes sent: what crossed the cluster link.
    pub bytes: AtomicU64,
    /// Connections answered with anything but the blob (or not answered: over the cap, no TLS).
    pub refused: AtomicU64,
}

pub struct BlobServer {
    listener: TcpListener,
    tls: TlsAcceptor,
    blobs: Arc<BTreeMap<BlobName, PathBuf>>,
    access: Arc<Access>,
    stats: Arc<ServeStats>,
    /// Connections served at once.
    limit: usize,
}

/// The pull's key, until the pull ends.
struct Access {
    key: Secret,
    ended: AtomicBool,
}

impl Access {
    fn allows(&self, given: Option<&str>) -> bool {
        !self.ended.load(Ordering::SeqCst)
            && given.is_some_and(|given| same(given.as_bytes(), self.key.expose().as_bytes()))
    }
}

impl BlobServer {
    /// Listen on `address` (port 0: any) for `blobs`, each at its file, as `identity` over TLS.
    pub async fn bind(
        address: SocketAddr,
        blobs: BTreeMap<BlobName, PathBuf>,
        access: Secret,
        identity: &TlsIdentity,
    ) -> std::io::Result<BlobServer> {
        let config = server_config(identity).map_err(std::io::Error::other)?;
        let listener = TcpListener::bind(address).await?;
        Ok(BlobServer {
            listener,
            tls: TlsAcceptor::from(Arc::new(config)),
            blobs: Arc::new(blobs),
            access: Arc::new(Access { key: access, ended: AtomicBool::new(false) }),
            stats: Arc::default(),
            limit: MAX_CONNECTIONS,
        })
    }

    /// At most `connections` at once instead of [`MAX_CONNECTIONS`] (a test fills a small cap).
    #[cfg(test)]
    pub fn with_connection_limit(mut self, connections: usize) -> BlobServer {
        self.limit = connections;
        self
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn stats(&self) -> Arc<ServeStats> {
        self.stats.clone()
    }

    /// Serve until `stop` fires (the key is refused from then on), or until `idle` passes with no
    /// connection open or coming. Connections still open then are cut.
    pub async fn run(self, stop: oneshot::Receiver<()>, idle: Duration) {
        let BlobServer { listener, tls, blobs, access, stats, limit } = self;
        let refused = stats.clone();
        accept_bounded(&listener, limit, stop, idle, &refused.refused, |socket, slot| {
            answer(socket, slot, tls.clone(), blobs.clone(), access.clone(), stats.clone())
        })
        .await;
        access.ended.store(true, Ordering::SeqCst);
    }
}

/// One connection: the handshake, one request, one answer, then close.
async fn answer(
    socket: TcpStream,
    _slot: OwnedSemaphorePermit,
    tls: TlsAcceptor,
    blobs: Arc<BTreeMap<BlobName, PathBuf>>,
    access: Arc<Access>,
    stats: Arc<ServeStats>,
) {
    stats.requests.fetch_add(1, Ordering::SeqCst);
    let Some((mut stream, head)) = read_request(socket, &tls, &stats.refused).await else { return };
    let wanted = match head.first_line.as_slice() {
        [method, target, _] if method == "GET" => target.strip_prefix("/blobs/").and_then(BlobName::parse),
        [_, _, _] => return refuse(&mut stream, &stats, "405 Method Not Allowed").await,
        _ => return refuse(&mut stream, &stats, "400 Bad Request").await,
    };
    if !access.allows(head.header("authorization").and_then(|value| value.strip_prefix("Bearer "))) {
        return refuse(&mut stream, &stats, "401 Unauthorized").await;
    }
    let Some(path) = wanted.and_then(|name| blobs.get(&name)) else {
        return refuse(&mut stream, &stats, "404 Not Found").await;
    };
    let Ok(mut file) = tokio::fs::File::open(path).await else {
        return refuse(&mut stream, &stats, "404 Not Found").await;
    };
    let Ok(size) = file.metadata().await.map(|m| m.len()) else {
        return refuse(&mut stream, &stats, "500 Internal Server Error").await;
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n"
    );
    if write_bounded(&mut stream, head.as_bytes()).await.is_err() {
        return;
    }
    let mut buffer = vec![0u8; CHUNK];
    let mut left = size;
    while left > 0 {
        let want = buffer.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let read = match file.read(&mut buffer[..want]).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        if write_bounded(&mut stream, &buffer[..read]).await.is_err() {
            return;
        }
        stats.bytes.fetch_add(read as u64, Ordering::SeqCst);
        left -= read as u64;
    }
    close(&mut stream).await;
}

async fn refuse(stream: &mut (impl AsyncRead + AsyncWrite + Unpin), stats: &ServeStats, status: &str) {
    stats.refused.fetch_add(1, Ordering::SeqCst);
    let text = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    let _ = write_bounded(stream, text.as_bytes()).await;
    close(stream).await;
}

/// Equal, in a time that does not depend on where they differ.
fn same(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len() && given.iter().zip(expected).fold(0u8, |diff, (a, b)| diff | (a ^ b)) == 0
}

#[cfg(test)]
mod tests {
    use rustls::pki_types::ServerName;
    use tokio::io::AsyncWriteExt;
    use tokio_rustls::TlsConnector;

    use super::*;
    use crate::link::ca::testing::ClusterTls;
    use crate::link::http1::read_head;

    const GIT_HELLO: &str = "ce013625030ba8dba906f756967f9e9ca394464a";

    /// `request` over TLS, trusting `ca_pem`: the status and the body (None: no answer).
    async fn ask(address: SocketAddr, ca_pem: &str, request: &str) -> Option<(u16, Vec<u8>)> {
        let connector = TlsConnector::from(Arc::new(crate::link::tls::client_config(ca_pem).unwrap()));
        let socket = TcpStream::connect(address).await.ok()?;
        let mut stream = connector.connect(ServerName::IpAddress(address.ip().into()), socket).await.ok()?;
        stream.write_all(request.as_bytes()).await.ok()?;
        let (head, mut body) = read_head(&mut stream, Duration::from_secs(5)).await.ok()?;
        let _ = stream.read_to_end(&mut body).await;
        Some((head.status()?, body))
    }

    fn get(target: &str, key: &str) -> String {
        format!("GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n")
    }

    /// A server of one blob ("hello\n") with key `key`, running: its address, stats, stop and task.
    async fn hello_server(
        tls: &ClusterTls,
        dir: &std::path::Path,
        key: &str,
        limit: usize,
    ) -> (SocketAddr, Arc<ServeStats>, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
        let file = dir.join(GIT_HELLO);
        std::fs::write(&file, "hello\n").unwrap();
        let blobs = [(BlobName::parse(GIT_HELLO).unwrap(), file)].into_iter().collect();
        let server = BlobServer::bind("127.0.0.1:0".parse().unwrap(), blobs, Secret::new(key.into()), &tls.server)
            .await
            .unwrap()
            .with_connection_limit(limit);
        let (address, stats) = (server.local_addr().unwrap(), server.stats());
        let (stop, stopped) = oneshot::channel();
        (address, stats, stop, tokio::spawn(server.run(stopped, Duration::from_secs(30))))
    }

    #[tokio::test]
    async fn only_listed_blobs_by_name_and_only_with_the_key() {
        let (tls, dir) = (ClusterTls::new(), tempfile::tempdir().unwrap());
        std::fs::write(dir.path().join("secret"), "not a blob").unwrap();
        let (address, stats, stop, running) = hello_server(&tls, dir.path(), "k3y", MAX_CONNECTIONS).await;
        let answer_to = |request: String| {
            let ca_pem = tls.ca_pem.clone();
            async move { ask(address, &ca_pem, &request).await }
        };

        assert_eq!(answer_to(get(&format!("/blobs/{GIT_HELLO}"), "k3y")).await, Some((200, b"hello\n".to_vec())));
        assert_eq!(answer_to(get(&format!("/blobs/{GIT_HELLO}"), "k3x")).await.unwrap().0, 401);
        assert_eq!(answer_to(format!("GET /blobs/{GIT_HELLO} HTTP/1.1\r\n\r\n")).await.unwrap().0, 401);
        assert_eq!(answer_to(get("/blobs/../secret", "k3y")).await.unwrap().0, 404);
        assert_eq!(answer_to(get(&format!("/blobs/{}", "0".repeat(64)), "k3y")).await.unwrap().0, 404);
        assert_eq!(answer_to(get("/secret", "k3y")).await.unwrap().0, 404);
        let post = format!("POST /blobs/{GIT_HELLO} HTTP/1.1\r\nAuthorization: Bearer k3y\r\n\r\n");
        assert_eq!(answer_to(post).await.unwrap().0, 405);

        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), running).await.unwrap().unwrap();
        assert_eq!(stats.bytes.load(Ordering::SeqCst), 6);
        assert_eq!((stats.requests.load(Ordering::SeqCst), stats.refused.load(Ordering::SeqCst)), (7, 6));
        assert!(TcpStream::connect(address).await.is_err(), "stopped means no longer listening");
        // The next pull has a key of its own: this one opens nothing there.
        let (next, _, _stop, _running) = hello_server(&tls, dir.path(), "n3w", MAX_CONNECTIONS).await;
        let hello = format!("/blobs/{GIT_HELLO}");
        assert_eq!(ask(next, &tls.ca_pem, &get(&hello, "k3y")).await.unwrap().0, 401);
        assert_eq!(ask(next, &tls.ca_pem, &get(&hello, "n3w")).await.unwrap().0, 200);
    }

    #[tokio::test]
    async fn plain_http_and_another_cluster_get_nothing() {
        let (tls, dir) = (ClusterTls::new(), tempfile::tempdir().unwrap());
        let (address, stats, _stop, _running) = hello_server(&tls, dir.path(), "k3y", MAX_CONNECTIONS).await;
        let mut plain = TcpStream::connect(address).await.unwrap();
        plain.write_all(get(&format!("/blobs/{GIT_HELLO}"), "k3y").as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut answer)).await.unwrap();
        assert!(!answer.starts_with(b"HTTP/1.1 200"), "{:?}", String::from_utf8_lossy(&answer));
        assert!(!answer.windows(6).any(|w| w == b"hello\n"), "the blob went out in clear");
        // A client of another cluster does not trust this head.
        let other = ClusterTls::new();
        assert_eq!(ask(address, &other.ca_pem, &get(&format!("/blobs/{GIT_HELLO}"), "k3y")).await, None);
        // The server sees the client's alert a moment after the client has given up.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while stats.refused.load(Ordering::SeqCst) < 2 {
            assert!(tokio::time::Instant::now() < deadline, "refused: {:?}", stats.refused);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(stats.bytes.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn connections_over_the_cap_are_closed_unanswered_until_one_ends() {
        let (tls, dir) = (ClusterTls::new(), tempfile::tempdir().unwrap());
        let (address, stats, _stop, _running) = hello_server(&tls, dir.path(), "k3y", 2).await;
        let request = get(&format!("/blobs/{GIT_HELLO}"), "k3y");
        // Two clients that never finish their handshake hold both slots.
        let idle = [TcpStream::connect(address).await.unwrap(), TcpStream::connect(address).await.unwrap()];
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while stats.requests.load(Ordering::SeqCst) < 2 {
            assert!(tokio::time::Instant::now() < deadline, "the idle clients were not accepted");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(ask(address, &tls.ca_pem, &request).await, None, "a third is not served");
        assert_eq!((stats.requests.load(Ordering::SeqCst), stats.refused.load(Ordering::SeqCst)), (2, 1));
        drop(idle);
        // Their slots come back as soon as the server sees them go.
        loop {
            if let Some(answer) = ask(address, &tls.ca_pem, &request).await {
                assert_eq!(answer, (200, b"hello\n".to_vec()));
                break;
            }
            assert!(tokio::time::Instant::now() < deadline + Duration::from_secs(5), "no slot came back");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[test]
    fn the_key_is_refused_once_the_pull_ended() {
        let access = Access { key: Secret::new("k3y".into()), ended: AtomicBool::new(false) };
        assert!(access.allows(Some("k3y")) && !access.allows(Some("k3x")) && !access.allows(None));
        access.ended.store(true, Ordering::SeqCst);
        assert!(!access.allows(Some("k3y")));
    }

    #[tokio::test]
    async fn an_idle_server_stops_by_itself() {
        let tls = ClusterTls::new();
        let server =
            BlobServer::bind("127.0.0.1:0".parse().unwrap(), BTreeMap::new(), Secret::new("k".into()), &tls.server)
                .await
                .unwrap();
        let (_stop, stopped) = oneshot::channel();
        tokio::time::timeout(Duration::from_secs(5), server.run(stopped, Duration::from_millis(100))).await.unwrap();
    }
}
