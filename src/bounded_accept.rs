//! The accept loop of the head's servers on the cluster link (the model's blob server, the
//! image relay): at most `limit` connections at once (more are closed unanswered at once, and
//! counted as refused), until `stop` fires or `idle` passes with no connection open or coming.
//! Connections still open then are cut.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

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
