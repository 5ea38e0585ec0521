//! The head's relay: the little of the registry API a pull by digest asks (`GET /v2/`, `GET`/`HEAD`
//! a manifest by digest, `GET`/`HEAD` a blob by digest), for one image, read-only, while the head
//! is still copying it from upstream. The manifests are in memory before it starts; a blob on its
//! way is sent to every node as its bytes arrive ([`Spool`]); a blob the head's registry holds
//! is passed on from there. It sits on the cluster link's address with mutual TLS: a client
//! without a certificate the cluster CA signed is refused in the handshake, as the registry
//! refuses it. Bounded like the model's blob server ([`crate::link::server`]): [`MAX_CONNECTIONS`]
//! at once, the handshake and request head within 10 s, each write within 60 s; one request per
//! connection. It runs as a task of the head's agent (`spread::relay_serve`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::io::AsyncWrite;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, OwnedSemaphorePermit};
use tokio_rustls::TlsAcceptor;

use super::range::{wanted, Wanted};
use super::spool::{Arrival, Spool, Spools};
use crate::link::http1::Head;
use crate::link::server::{accept_bounded, close, read_request, write_bounded};
use crate::link::tls::{mutual_server_config, TlsIdentity};
use crate::registry::manifest::Manifest;
use crate::registry::RegistryClient;

/// Connections served at once: a pull opens a few at a time, and a cluster has a few nodes.
pub const MAX_CONNECTIONS: usize = 64;

/// What the relay did.
#[derive(Debug, Default)]
pub struct RelayStats {
    pub requests: AtomicU64,
    /// Blob bytes sent: what crossed the cluster link.
    pub bytes: AtomicU64,
    /// Connections answered with an error, or not answered (over the cap, no TLS).
    pub refused: AtomicU64,
}

/// The image the relay answers for.
pub struct RelayedImage {
    /// Its path in the registry (`kyuz0/vllm`).
    pub path: String,
    /// Its manifests by digest.
    pub manifests: BTreeMap<String, Manifest>,
    pub spools: Arc<Spools>,
    /// The head's registry, for the blobs it holds whole.
    pub registry: Arc<RegistryClient>,
}

pub struct Relay {
    listener: TcpListener,
    tls: TlsAcceptor,
    image: Arc<RelayedImage>,
    stats: Arc<RelayStats>,
}

impl Relay {
    /// Listen on `address` for `image`, as `identity`, for clients `ca_pem` signed.
    pub async fn bind(
        address: SocketAddr,
        image: RelayedImage,
        identity: &TlsIdentity,
        ca_pem: &str,
    ) -> std::io::Result<Relay> {
        let config = mutual_server_config(identity, ca_pem).map_err(std::io::Error::other)?;
        let listener = TcpListener::bind(address).await?;
        Ok(Relay { listener, tls: TlsAcceptor::from(Arc::new(config)), image: Arc::new(image), stats: Arc::default() })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn stats(&self) -> Arc<RelayStats> {
        self.stats.clone()
    }

    /// Serve until `stop` fires, or until `idle` passes with no connection open or coming;
    /// connections still open then are cut.
    pub async fn run(self, stop: oneshot::Receiver<()>, idle: Duration) {
        let Relay { listener, tls, image, stats } = self;
        let refused = stats.clone();
        accept_bounded(&listener, MAX_CONNECTIONS, stop, idle, &refused.refused, |socket, slot| {
            answer(socket, slot, tls.clone(), image.clone(), stats.clone())
        })
        .await;
    }
}

/// What a request asks of the registry API.
#[derive(Debug, PartialEq, Eq)]
enum Asked<'a> {
    Ping,
    Manifest { path: &'a str, reference: &'a str },
    Blob { path: &'a str, digest: &'a str },
    Other,
}

fn asked(target: &str) -> Asked<'_> {
    let target = target.split('?').next().unwrap_or_default();
    if target == "/v2/" || target == "/v2" {
        return Asked::Ping;
    }
    let Some(rest) = target.strip_prefix("/v2/") else { return Asked::Other };
    let named = |kind: &str| rest.rsplit_once(kind).filter(|(path, name)| !path.is_empty() && !name.contains('/'));
    if let Some((path, reference)) = named("/manifests/") {
        Asked::Manifest { path, reference }
    } else if let Some((path, digest)) = named("/blobs/") {
        Asked::Blob { path, digest }
    } else {
        Asked::Other
    }
}

/// One connection: the handshake, one request, one answer, then close.
async fn answer(
    socket: TcpStream,
    _slot: OwnedSemaphorePermit,
    tls: TlsAcceptor,
    image: Arc<RelayedImage>,
    stats: Arc<RelayStats>,
) {
    stats.requests.fetch_add(1, Ordering::SeqCst);
    let Some((mut stream, head)) = read_request(socket, &tls, &stats.refused).await else { return };
    let (method, target) = match head.first_line.as_slice() {
        [method, target, _] => (method.as_str(), target.replace("%3A", ":").replace("%3a", ":")),
        _ => return error(&mut stream, &stats, "400 Bad Request", "UNSUPPORTED").await,
    };
    let with_body = match method {
        "GET" => true,
        "HEAD" => false,
        _ => return error(&mut stream, &stats, "405 Method Not Allowed", "UNSUPPORTED").await,
    };
    match asked(&target) {
        Asked::Ping => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\
                        Docker-Distribution-API-Version: registry/2.0\r\nConnection: close\r\n\r\n";
            let body: &[u8] = if with_body { b"{}" } else { b"" };
            let _ = write_bounded(&mut stream, &[head.as_bytes(), body].concat()).await;
        }
        Asked::Manifest { path, reference } if path == image.path => match image.manifests.get(reference) {
            Some(manifest) => send_manifest(&mut stream, manifest, with_body).await,
            None => return error(&mut stream, &stats, "404 Not Found", "MANIFEST_UNKNOWN").await,
        },
        Asked::Blob { path, digest } if path == image.path => match image.spools.get(digest) {
            Some(spool) => send_blob(&mut stream, &image, spool, &head, with_body, &stats).await,
            None => return error(&mut stream, &stats, "404 Not Found", "BLOB_UNKNOWN").await,
        },
        Asked::Manifest { .. } | Asked::Blob { .. } => {
            return error(&mut stream, &stats, "404 Not Found", "NAME_UNKNOWN").await
        }
        Asked::Other => return error(&mut stream, &stats, "404 Not Found", "UNSUPPORTED").await,
    }
    close(&mut stream).await;
}

async fn send_manifest(stream: &mut (impl AsyncWrite + Unpin), manifest: &Manifest, with_body: bool) {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\nDocker-Content-Digest: {}\r\n\
         Docker-Distribution-API-Version: registry/2.0\r\nConnection: close\r\n\r\n",
        manifest.put_type(),
        manifest.bytes.len(),
        manifest.digest
    );
    let body: &[u8] = if with_body { &manifest.bytes } else { b"" };
    let _ = write_bounded(stream, &[head.as_bytes(), body].concat()).await;
}

/// A blob: from its spool as it arrives (a single range too), or whole from the head's registry.
async fn send_blob(
    stream: &mut (impl AsyncWrite + Unpin),
    image: &RelayedImage,
    spool: &Spool,
    request: &Head,
    with_body: bool,
    stats: &RelayStats,
) {
    let (digest, size) = (&spool.blob.digest, spool.blob.size);
    let blob_head = |status: &str, length: u64, extra: String| {
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/octet-stream\r\nContent-Length: {length}\r\n\
             Docker-Content-Digest: {digest}\r\nAccept-Ranges: bytes\r\n{extra}Connection: close\r\n\r\n"
        )
    };
    if !with_body {
        let _ = write_bounded(stream, blob_head("200 OK", size, String::new()).as_bytes()).await;
        return;
    }
    if let Arrival::Failed(_) = spool.arrival() {
        return error(stream, stats, "404 Not Found", "BLOB_UNKNOWN").await;
    }
    let (start, end, head) = match wanted(request.header("range"), size) {
        Wanted::Whole => (0, size, blob_head("200 OK", size, String::new())),
        Wanted::Part { start, end } => {
            let range = format!("Content-Range: bytes {start}-{}/{size}\r\n", end - 1);
            (start, end, blob_head("206 Partial Content", end - start, range))
        }
        Wanted::Unsatisfiable => {
            let text = format!(
                "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{size}\r\n\
                 Content-Length: 0\r\nConnection: close\r\n\r\n"
            );
            stats.refused.fetch_add(1, Ordering::SeqCst);
            let _ = write_bounded(stream, text.as_bytes()).await;
            return;
        }
    };
    // The head goes out at once, wherever the copy is (the size and digest are the manifest's): a
    // client may wait less for a response's head than for its bytes. A failure later cuts the body.
    if write_bounded(stream, head.as_bytes()).await.is_err() {
        return;
    }
    match spool.settled().await {
        Arrival::InRegistry => {
            if let Ok(response) = image.registry.blob(&image.path, digest).await {
                pass_on(response, start, end, stream, &stats.bytes).await;
            }
        }
        _ => {
            let _ = spool.send(start, end, stream, &stats.bytes).await;
        }
    }
}

/// Bytes `start..end` of the head's registry's `response` to `out` (the registry checked them).
async fn pass_on(
    response: reqwest::Response,
    start: u64,
    end: u64,
    out: &mut (impl AsyncWrite + Unpin),
    sent: &AtomicU64,
) {
    let mut body = response.bytes_stream();
    let mut at = 0u64;
    while at < end {
        let Some(Ok(chunk)) = body.next().await else { return };
        let (from, to) = (at, at + chunk.len() as u64);
        at = to;
        let wanted = start.max(from)..end.min(to);
        if wanted.is_empty() {
            continue;
        }
        let part = &chunk[(wanted.start - from) as usize..(wanted.end - from) as usize];
        if write_bounded(out, part).await.is_err() {
            return;
        }
        sent.fetch_add(part.len() as u64, Ordering::SeqCst);
    }
}

/// A registry error answer, `{"errors":[…]}` as podman and docker read it.
async fn error(stream: &mut (impl AsyncWrite + Unpin), stats: &RelayStats, status: &str, code: &str) {
    stats.refused.fetch_add(1, Ordering::SeqCst);
    let body = format!(r#"{{"errors":[{{"code":"{code}","message":"the head's relay has no such thing"}}]}}"#);
    let text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = write_bounded(stream, text.as_bytes()).await;
    close(stream).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::ca::testing::ClusterTls;
    use crate::registry::manifest::{sha256_digest, Descriptor, OCI_MANIFEST};

    const BLOB: &[u8] = b"the layer's bytes, arriving in two parts";

    struct Running {
        address: String,
        spools: Arc<Spools>,
        manifest: Manifest,
        stats: Arc<RelayStats>,
        _stop: oneshot::Sender<()>,
        _dir: tempfile::TempDir,
    }

    async fn relay(tls: &ClusterTls) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let blob = Descriptor { media_type: String::new(), digest: sha256_digest(BLOB), size: BLOB.len() as u64 };
        let spools = Arc::new(Spools::new(dir.path(), &[blob]).unwrap());
        let manifest = Manifest::new(br#"{"schemaVersion":2}"#.to_vec(), Some(OCI_MANIFEST));
        let image = RelayedImage {
            path: "kyuz0/vllm".into(),
            manifests: [(manifest.digest.clone(), manifest.clone())].into(),
            spools: spools.clone(),
            registry: Arc::new(RegistryClient::cluster("127.0.0.1:1", &tls.ca_pem, None).unwrap()),
        };
        let relay = Relay::bind("127.0.0.1:0".parse().unwrap(), image, &tls.server, &tls.ca_pem).await.unwrap();
        let (address, stats) = (relay.local_addr().unwrap().to_string(), relay.stats());
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(relay.run(stopped, Duration::from_secs(30)));
        Running { address, spools, manifest, stats, _stop: stop, _dir: dir }
    }

    #[tokio::test]
    async fn a_node_gets_the_manifest_and_the_blob_as_it_arrives() {
        let tls = ClusterTls::new();
        let relay = relay(&tls).await;
        let node = RegistryClient::cluster(&relay.address, &tls.ca_pem, Some(&tls.client)).unwrap();
        node.ping().await.unwrap();
        let manifest = node.manifest("kyuz0/vllm", &relay.manifest.digest).await.unwrap();
        assert_eq!((manifest.bytes, manifest.media_type), (relay.manifest.bytes.clone(), OCI_MANIFEST.to_string()));
        assert!(node.manifest("other/image", &relay.manifest.digest).await.is_err(), "another image's");
        assert!(node.has_blob("kyuz0/vllm", &sha256_digest(BLOB)).await.unwrap());
        assert!(!node.has_blob("kyuz0/vllm", &sha256_digest(b"other")).await.unwrap());

        let spool = relay.spools.get(&sha256_digest(BLOB)).unwrap().clone();
        let pulling = tokio::spawn(async move {
            let node = RegistryClient::cluster(&relay.address, &tls.ca_pem, Some(&tls.client)).unwrap();
            let mut response = node.blob("kyuz0/vllm", &sha256_digest(BLOB)).await.unwrap();
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.unwrap() {
                body.extend_from_slice(&chunk);
            }
            body
        });
        spool.append(&BLOB[..10]).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(relay.stats.bytes.load(Ordering::SeqCst), 10, "sent before the rest arrived");
        spool.append(&BLOB[10..]).unwrap();
        spool.complete();
        assert_eq!(tokio::time::timeout(Duration::from_secs(5), pulling).await.unwrap().unwrap(), BLOB);
    }

    #[tokio::test]
    async fn a_failed_copy_cuts_the_node_s_download() {
        let tls = ClusterTls::new();
        let relay = relay(&tls).await;
        let node = RegistryClient::cluster(&relay.address, &tls.ca_pem, Some(&tls.client)).unwrap();
        let spool = relay.spools.get(&sha256_digest(BLOB)).unwrap().clone();
        spool.append(&BLOB[..10]).unwrap();
        let mut response = node.blob("kyuz0/vllm", &sha256_digest(BLOB)).await.unwrap();
        let mut received = Vec::new();
        while received.len() < 10 {
            received.extend_from_slice(&response.chunk().await.unwrap().unwrap());
        }
        assert_eq!(received, &BLOB[..10]);
        relay.spools.fail_unfinished("upstream sent other bytes");
        let mut rest = Ok(Some(bytes::Bytes::new()));
        while matches!(rest, Ok(Some(_))) {
            rest = response.chunk().await;
        }
        assert!(rest.is_err(), "the body ended short of its length: an error, not a blob");
        // Asked again, it is not there.
        assert!(node.blob("kyuz0/vllm", &sha256_digest(BLOB)).await.is_err());
    }

    #[test]
    fn requests_name_the_api_the_image_and_what_of_it() {
        assert_eq!(asked("/v2/"), Asked::Ping);
        assert_eq!(asked("/v2/a/b/manifests/sha256:1"), Asked::Manifest { path: "a/b", reference: "sha256:1" });
        assert_eq!(asked("/v2/a/blobs/x/blobs/sha256:2?ns=y"), Asked::Blob { path: "a/blobs/x", digest: "sha256:2" });
        for other in ["/v2/a/tags/list", "/v2//blobs/x", "/v2/a/blobs/x/y", "/blobs/x", "/v2/a/blobs/uploads/"] {
            assert_eq!(asked(other), Asked::Other, "{other}");
        }
    }

    #[tokio::test]
    async fn a_client_without_a_certificate_of_the_cluster_is_refused() {
        let (tls, other) = (ClusterTls::new(), ClusterTls::new());
        let relay = relay(&tls).await;
        let anonymous = RegistryClient::cluster(&relay.address, &tls.ca_pem, None).unwrap();
        assert!(anonymous.ping().await.is_err());
        let stranger = RegistryClient::cluster(&relay.address, &tls.ca_pem, Some(&other.client)).unwrap();
        assert!(stranger.ping().await.is_err(), "another cluster's node");
        assert_eq!(relay.stats.bytes.load(Ordering::SeqCst), 0);
    }
}
