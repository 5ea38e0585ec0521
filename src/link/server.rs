//! The bounds the head's servers on the cluster link share (the model's blob server, the image
//! relay): at most `limit` connections at once (more are closed unanswered at once, and counted as
//! refused), until `stop` fires or `idle` passes with no connection open or coming, then the open
//! ones are cut; one request per connection, its TLS handshake and head within [`REQUEST_LIMIT`];
//! each write within [`WRITE_LIMIT`], so a client that stops reading frees its slot.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::link::http1::{read_head, Head};

/// How long a client may take to finish the handshake and send its request.
pub const REQUEST_LIMIT: Duration = Duration::from_secs(10);
/// How long one write may wait for a receiver that stopped reading.
pub const WRITE_LIMIT: Duration = Duration::from_secs(60);

/// Serve `listener`, each connection by `answer` (holding its slot until it ends).
pub async fn accept_bounded<Answer>(
    listener: &TcpListener,
    limit: usize,
    mut stop: oneshot::Receiver<()>,
    idle: Duration,
    refused: &AtomicU64,
    mut answer: impl FnMut(TcpStream, OwnedSemaphorePermit) -> Answer,
) where
    Answer: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limit));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = tokio::time::timeout(idle, listener.accept()) => match accepted {
                Err(_) if slots.available_permits() == limit => break,
                Err(_) => continue,
                Ok(Err(_)) => tokio::time::sleep(Duration::from_millis(50)).await,
                Ok(Ok((socket, _))) => {
                    let Ok(slot) = slots.clone().try_acquire_owned() else {
                        refused.fetch_add(1, Ordering::SeqCst);
                        drop(socket);
                        continue;
                    };
                    connections.spawn(answer(socket, slot));
                }
            },
        }
        while connections.try_join_next().is_some() {}
    }
    connections.shutdown().await;
}

/// The connection's TLS handshake and request head, or `None` counted in `refused`: no
/// certificate the server takes, plain HTTP, another protocol, or a client that never finished.
pub async fn read_request(
    socket: TcpStream,
    tls: &TlsAcceptor,
    refused: &AtomicU64,
) -> Option<(TlsStream<TcpStream>, Head)> {
    let request = async {
        let Ok(Ok(mut stream)) = tokio::time::timeout(REQUEST_LIMIT, tls.accept(socket)).await else { return None };
        let (head, _) = read_head(&mut stream, REQUEST_LIMIT).await.ok()?;
        Some((stream, head))
    };
    let request = request.await;
    if request.is_none() {
        refused.fetch_add(1, Ordering::SeqCst);
    }
    request
}

/// All of `bytes`, or an error once the receiver has not read for [`WRITE_LIMIT`].
pub async fn write_bounded(stream: &mut (impl AsyncWrite + Unpin), bytes: &[u8]) -> std::io::Result<()> {
    tokio::time::timeout(WRITE_LIMIT, stream.write_all(bytes))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "the receiver stopped reading"))?
}

/// The end of the answer (TLS close_notify), as far as the receiver takes it within [`WRITE_LIMIT`].
pub async fn close(stream: &mut (impl AsyncWrite + Unpin)) {
    let _ = tokio::time::timeout(WRITE_LIMIT, stream.shutdown()).await;
}
