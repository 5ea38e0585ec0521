//! The head's side of spreading a snapshot: its verified blobs over HTTP, on the cluster link's
//! address only, to the nodes holding the pull's access key. A request names a blob by its hash
//! and nothing else: the name is checked against the snapshot's own list, so no path from the
//! network ever reaches the file system. It runs as a task of the head's agent for the length of
//! the pull, and stops by itself when nobody has asked for a while.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use super::blob::BlobName;
use super::http1::read_head;
use crate::secret::Secret;

/// How long a client may take to send its request.
const REQUEST_LIMIT: Duration = Duration::from_secs(10);
/// How long one write may wait for a receiver that stopped reading.
const WRITE_LIMIT: Duration = Duration::from_secs(60);
/// One read of a blob file.
const CHUNK: usize = 1 << 20;

/// What the server did, read by the head when it stops it.
#[derive(Debug, Default)]
pub struct ServeStats {
    pub requests: AtomicU64,
    /// Body bytes sent: what crossed the cluster link.
    pub bytes: AtomicU64,
    /// Requests answered with anything but the blob.
    pub refused: AtomicU64,
}

pub struct BlobServer {
    listener: TcpListener,
    blobs: Arc<BTreeMap<BlobName, PathBuf>>,
    access: Arc<Secret>,
    stats: Arc<ServeStats>,
}

impl BlobServer {
    /// Listen on `address` (port 0: any) for `blobs`, each at its file.
    pub async fn bind(
        address: SocketAddr,
        blobs: BTreeMap<BlobName, PathBuf>,
        access: Secret,
    ) -> std::io::Result<BlobServer> {
        let listener = TcpListener::bind(address).await?;
        Ok(BlobServer { listener, blobs: Arc::new(blobs), access: Arc::new(access), stats: Arc::default() })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn stats(&self) -> Arc<ServeStats> {
        self.stats.clone()
    }

    /// Serve until `stop` fires, or until `idle` passes with no connection open or coming.
    /// Connections still open then are cut.
    pub async fn run(self, mut stop: oneshot::Receiver<()>, idle: Duration) {
        let open = Arc::new(AtomicUsize::new(0));
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                _ = &mut stop => break,
                accepted = tokio::time::timeout(idle, self.listener.accept()) => match accepted {
                    Err(_) if open.load(Ordering::SeqCst) == 0 => break,
                    Err(_) => continue,
                    Ok(Err(_)) => tokio::time::sleep(Duration::from_millis(50)).await,
                    Ok(Ok((socket, _))) => {
                        let (blobs, access, stats, open) =
                            (self.blobs.clone(), self.access.clone(), self.stats.clone(), open.clone());
                        open.fetch_add(1, Ordering::SeqCst);
                        connections.spawn(async move {
                            answer(socket, &blobs, &access, &stats).await;
                            open.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                },
            }
            while connections.try_join_next().is_some() {}
        }
        connections.shutdown().await;
    }
}

/// One connection: one request, one answer, then close.
async fn answer(mut socket: TcpStream, blobs: &BTreeMap<BlobName, PathBuf>, access: &Secret, stats: &ServeStats) {
    stats.requests.fetch_add(1, Ordering::SeqCst);
    let Ok((head, _)) = read_head(&mut socket, REQUEST_LIMIT).await else {
        stats.refused.fetch_add(1, Ordering::SeqCst);
        return;
    };
    let wanted = match head.first_line.as_slice() {
        [method, target, _] if method == "GET" => target.strip_prefix("/blobs/").and_then(BlobName::parse),
        [_, _, _] => return refuse(&mut socket, stats, "405 Method Not Allowed").await,
        _ => return refuse(&mut socket, stats, "400 Bad Request").await,
    };
    let bearer = head.header("authorization").and_then(|value| value.strip_prefix("Bearer "));
    if !bearer.is_some_and(|given| same(given.as_bytes(), access.expose().as_bytes())) {
        return refuse(&mut socket, stats, "401 Unauthorized").await;
    }
    let Some(path) = wanted.and_then(|name| blobs.get(&name)) else {
        return refuse(&mut socket, stats, "404 Not Found").await;
    };
    let Ok(mut file) = tokio::fs::File::open(path).await else {
        return refuse(&mut socket, stats, "404 Not Found").await;
    };
    let Ok(size) = file.metadata().await.map(|m| m.len()) else {
        return refuse(&mut socket, stats, "500 Internal Server Error").await;
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n"
    );
    if write_bounded(&mut socket, head.as_bytes()).await.is_err() {
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
        if write_bounded(&mut socket, &buffer[..read]).await.is_err() {
            return;
        }
        stats.bytes.fetch_add(read as u64, Ordering::SeqCst);
        left -= read as u64;
    }
    let _ = socket.shutdown().await;
}

async fn refuse(socket: &mut TcpStream, stats: &ServeStats, status: &str) {
    stats.refused.fetch_add(1, Ordering::SeqCst);
    let text = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    let _ = write_bounded(socket, text.as_bytes()).await;
    let _ = socket.shutdown().await;
}

async fn write_bounded(socket: &mut (impl AsyncWrite + Unpin), bytes: &[u8]) -> std::io::Result<()> {
    tokio::time::timeout(WRITE_LIMIT, socket.write_all(bytes))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "the receiver stopped reading"))?
}

/// Equal, in a time that does not depend on where they differ.
fn same(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len() && given.iter().zip(expected).fold(0u8, |diff, (a, b)| diff | (a ^ b)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::http1::read_head;

    const GIT_HELLO: &str = "ce013625030ba8dba906f756967f9e9ca394464a";

    async fn ask(address: SocketAddr, request: &str) -> (u16, Vec<u8>) {
        let mut socket = TcpStream::connect(address).await.unwrap();
        socket.write_all(request.as_bytes()).await.unwrap();
        let (head, mut body) = read_head(&mut socket, Duration::from_secs(5)).await.unwrap();
        socket.read_to_end(&mut body).await.unwrap();
        (head.status().unwrap(), body)
    }

    #[tokio::test]
    async fn only_listed_blobs_by_name_and_only_with_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(GIT_HELLO);
        std::fs::write(&file, "hello\n").unwrap();
        std::fs::write(dir.path().join("secret"), "not a blob").unwrap();
        let blobs = [(BlobName::parse(GIT_HELLO).unwrap(), file)].into_iter().collect();
        let server = BlobServer::bind("127.0.0.1:0".parse().unwrap(), blobs, Secret::new("k3y".into())).await.unwrap();
        let address = server.local_addr().unwrap();
        let stats = server.stats();
        let (stop, stopped) = oneshot::channel();
        let running = tokio::spawn(server.run(stopped, Duration::from_secs(30)));

        let get = |target: &str, key: &str| {
            format!("GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n")
        };
        assert_eq!(ask(address, &get(&format!("/blobs/{GIT_HELLO}"), "k3y")).await, (200, b"hello\n".to_vec()));
        assert_eq!(ask(address, &get(&format!("/blobs/{GIT_HELLO}"), "k3x")).await.0, 401);
        assert_eq!(ask(address, &format!("GET /blobs/{GIT_HELLO} HTTP/1.1\r\n\r\n")).await.0, 401);
        assert_eq!(ask(address, &get("/blobs/../secret", "k3y")).await.0, 404);
        assert_eq!(ask(address, &get(&format!("/blobs/{}", "0".repeat(64)), "k3y")).await.0, 404);
        assert_eq!(ask(address, &get("/secret", "k3y")).await.0, 404);
        let post = format!("POST /blobs/{GIT_HELLO} HTTP/1.1\r\nAuthorization: Bearer k3y\r\n\r\n");
        assert_eq!(ask(address, &post).await.0, 405);

        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), running).await.unwrap().unwrap();
        assert_eq!(stats.bytes.load(Ordering::SeqCst), 6);
        assert_eq!((stats.requests.load(Ordering::SeqCst), stats.refused.load(Ordering::SeqCst)), (7, 6));
        assert!(TcpStream::connect(address).await.is_err(), "stopped means no longer listening");
    }

    #[tokio::test]
    async fn an_idle_server_stops_by_itself() {
        let server =
            BlobServer::bind("127.0.0.1:0".parse().unwrap(), BTreeMap::new(), Secret::new("k".into())).await.unwrap();
        let (_stop, stopped) = oneshot::channel();
        tokio::time::timeout(Duration::from_secs(5), server.run(stopped, Duration::from_millis(100))).await.unwrap();
    }
}
