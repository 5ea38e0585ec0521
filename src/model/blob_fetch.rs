//! A node's side of spreading a snapshot: one blob from the head's blob server over TLS, the
//! head's certificate checked against the cluster CA alone, streamed into
//! `blobs/<hash>.incomplete` and hashed as it is written, renamed into place only when its hash
//! is its name. A partial or wrong blob never takes a blob's name.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::blob::{BlobHasher, BlobName};
use super::cache::{cache_error, RepoDir};
use crate::error::{Error, Result};
use crate::link::http1::read_head;
use crate::link::tls::client_config;
use crate::secret::Secret;

/// Connecting to the head over the link.
const CONNECT_LIMIT: Duration = Duration::from_secs(10);
/// The head's answer to a request (it opens one file first).
const ANSWER_LIMIT: Duration = Duration::from_secs(30);
/// The longest the body may stall between two reads.
const STALL_LIMIT: Duration = Duration::from_secs(60);
/// One read from the socket.
const CHUNK: usize = 1 << 20;

/// Where the blobs come from: the head's blob server, the CA its certificate is checked
/// against, and the key of this pull.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobSource {
    pub address: SocketAddr,
    pub ca_pem: String,
    pub access: Secret,
}

/// Fetch blob `name` of `size` bytes into `repo`'s blobs from `source`.
pub async fn fetch_blob(source: &BlobSource, repo: &RepoDir, name: &BlobName, size: u64) -> Result<()> {
    let blobs = repo.blobs_dir();
    tokio::fs::create_dir_all(&blobs).await.map_err(|e| cache_error(&blobs, "create", &e))?;
    let partial = repo.incomplete(name);
    let outcome = receive(source, &partial, name, size).await;
    if outcome.is_err() {
        let _ = tokio::fs::remove_file(&partial).await;
    }
    outcome?;
    let blob = repo.blob(name);
    tokio::fs::rename(&partial, &blob).await.map_err(|e| cache_error(&blob, "rename into", &e))
}

/// The exchange: request, head, then the body into `partial` while hashing it.
async fn receive(source: &BlobSource, partial: &Path, name: &BlobName, size: u64) -> Result<()> {
    let link = |why: String| link_error(source.address, name, why);
    let config = client_config(&source.ca_pem).map_err(|why| link(format!("the cluster CA: {why}")))?;
    let connecting = async {
        let socket = TcpStream::connect(source.address).await.map_err(|e| link(e.to_string()))?;
        TlsConnector::from(Arc::new(config))
            .connect(ServerName::IpAddress(source.address.ip().into()), socket)
            .await
            .map_err(|e| link(format!("no TLS with the head as the cluster CA signed it: {e}")))
    };
    let mut socket = tokio::time::timeout(CONNECT_LIMIT, connecting)
        .await
        .map_err(|_| link(format!("no connection within {} s", CONNECT_LIMIT.as_secs())))??;
    let request = format!(
        "GET /blobs/{name} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        source.address,
        source.access.expose()
    );
    socket.write_all(request.as_bytes()).await.map_err(|e| link(e.to_string()))?;
    let (head, start) = read_head(&mut socket, ANSWER_LIMIT).await.map_err(|e| link(e.to_string()))?;
    match head.status() {
        Some(200) => {}
        Some(401) => return Err(link("the head refused this pull's key (a pull that already ended?)".into())),
        Some(404) => return Err(link("the head does not have it".into())),
        other => return Err(link(format!("the head answered {}", other.map_or("garbage".into(), |s| s.to_string())))),
    }
    if head.content_length() != Some(size) {
        return Err(link(format!("the head sends {:?} bytes, the snapshot lists {size}", head.content_length())));
    }
    let _ = tokio::fs::remove_file(partial).await;
    let mut file = tokio::fs::File::create(partial).await.map_err(|e| cache_error(partial, "create", &e))?;
    let mut hasher = BlobHasher::new(name, size);
    let first = &start[..start.len().min(usize::try_from(size).unwrap_or(usize::MAX))];
    hasher.update(first);
    file.write_all(first).await.map_err(|e| cache_error(partial, "write", &e))?;
    let mut buffer = vec![0u8; CHUNK];
    let mut done = first.len() as u64;
    while done < size {
        let want = buffer.len().min(usize::try_from(size - done).unwrap_or(usize::MAX));
        let read = tokio::time::timeout(STALL_LIMIT, socket.read(&mut buffer[..want]))
            .await
            .map_err(|_| link(format!("nothing came for {} s", STALL_LIMIT.as_secs())))?
            .map_err(|e| link(e.to_string()))?;
        if read == 0 {
            return Err(link(format!("the connection ended after {done} of {size} bytes")));
        }
        hasher.update(&buffer[..read]);
        file.write_all(&buffer[..read]).await.map_err(|e| cache_error(partial, "write", &e))?;
        done += read as u64;
    }
    file.sync_all().await.map_err(|e| cache_error(partial, "sync", &e))?;
    let hash = hasher.finish();
    if hash != name.as_str() {
        return Err(Error::Verification {
            message: format!("blob {name} from the head at {} hashes to {hash}", source.address),
            fix: Some("pull again: the head verifies its own copy first and fetches it again when it is wrong".into()),
        });
    }
    Ok(())
}

fn link_error(address: SocketAddr, name: &BlobName, why: String) -> Error {
    Error::Host {
        what: "the cluster link".into(),
        message: format!("cannot fetch blob {name} from the head at {address}: {why}"),
        fix: Some(
            "check the cluster link between this node and the head (`strix-toolbox cluster doctor`), then pull again"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use tokio::sync::oneshot;

    use super::*;
    use crate::link::ca::testing::ClusterTls;
    use crate::model::blob_server::BlobServer;
    use crate::model::cache::HubCache;
    use crate::model::repo_id::RepoId;

    const GIT_HELLO: &str = "ce013625030ba8dba906f756967f9e9ca394464a";

    #[tokio::test]
    async fn a_blob_is_named_only_once_its_hash_matches() {
        let head = tempfile::tempdir().unwrap();
        let good = BlobName::parse(GIT_HELLO).unwrap();
        let liar = BlobName::parse(&"1".repeat(64)).unwrap();
        std::fs::write(head.path().join("good"), "hello\n").unwrap();
        std::fs::write(head.path().join("liar"), "hello\n").unwrap();
        let blobs: BTreeMap<_, _> =
            [(good.clone(), head.path().join("good")), (liar.clone(), head.path().join("liar"))].into_iter().collect();
        let access = Secret::new("key".into());
        let tls = ClusterTls::new();
        let server =
            BlobServer::bind("127.0.0.1:0".parse().unwrap(), blobs, access.clone(), &tls.server).await.unwrap();
        let source = BlobSource { address: server.local_addr().unwrap(), ca_pem: tls.ca_pem.clone(), access };
        let (stop, stopped) = oneshot::channel();
        let running = tokio::spawn(server.run(stopped, Duration::from_secs(30)));

        let node = tempfile::tempdir().unwrap();
        let repo = HubCache::at(node.path()).repo(&RepoId::parse("acme/tiny").unwrap());
        fetch_blob(&source, &repo, &good, 6).await.unwrap();
        assert_eq!(std::fs::read_to_string(repo.blob(&good)).unwrap(), "hello\n");
        assert!(!repo.incomplete(&good).exists());

        let wrong = fetch_blob(&source, &repo, &liar, 6).await.unwrap_err();
        assert_eq!(wrong.kind(), crate::error::ErrorKind::Verification, "{wrong}");
        assert!(!repo.blob(&liar).exists() && !repo.incomplete(&liar).exists());

        let short = fetch_blob(&source, &repo, &good, 7).await.unwrap_err();
        assert!(short.to_string().contains("the snapshot lists 7"), "{short}");
        let other = BlobSource { access: Secret::new("other".into()), ..source.clone() };
        let refused = fetch_blob(&other, &repo, &good, 6).await.unwrap_err();
        assert!(refused.to_string().contains("refused"), "{refused}");
        let impostor = BlobSource { ca_pem: ClusterTls::new().ca_pem, ..source.clone() };
        let distrusted = fetch_blob(&impostor, &repo, &good, 6).await.unwrap_err();
        assert!(distrusted.to_string().contains("no TLS with the head"), "{distrusted}");

        stop.send(()).unwrap();
        running.await.unwrap();
        let gone = fetch_blob(&source, &repo, &good, 6).await.unwrap_err();
        assert_eq!(gone.kind(), crate::error::ErrorKind::Host, "{gone}");
    }
}
