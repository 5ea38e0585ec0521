//! The router's listener: each connection served by hyper's HTTP/1.1 with the request-head
//! bounds, at most `max_connections` at once. One over that is answered 503 in OpenAI's shape
//! and closed (a client sees why, and may retry), as many as `max_refused_at_once` at a time;
//! beyond even those, a connection is closed unanswered. On shutdown the listener closes, every
//! connection finishes the answer under way and closes (hyper's graceful shutdown), and what
//! has not finished within `shutdown_grace` is cut.

use std::convert::Infallible;
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{sleep, timeout, Duration};

use super::bounds::Bounds;
use super::openai_error::ApiError;
use super::service::{answer, Shared};

/// How long a refused connection may take to send the request it is refused.
const REFUSAL_HEAD: Duration = Duration::from_secs(5);

/// Serve `listener` until `stop` says true, then shut down as the module says.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let bounds = &shared.bounds;
    let slots = Arc::new(Semaphore::new(bounds.max_connections));
    let refusals = Arc::new(Semaphore::new(bounds.max_refused_at_once));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = stopped(&mut stop) => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => {
                let socket = match accepted {
                    Ok((socket, _)) => socket,
                    // Out of file descriptors, most likely: give connections a moment to end.
                    Err(_) => {
                        sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = socket.set_nodelay(true);
                if let Ok(slot) = slots.clone().try_acquire_owned() {
                    connections.spawn(serve_connection(socket, shared.clone(), stop.clone(), slot));
                } else if let Ok(refusal) = refusals.clone().try_acquire_owned() {
                    connections.spawn(refuse_connection(socket, bounds.clone(), refusal));
                }
            }
        }
    }
    drop(listener);
    let finished = async { while connections.join_next().await.is_some() {} };
    if timeout(bounds.shutdown_grace, finished).await.is_err() {
        shared.reporter.warning(&format!(
            "router: cut {} connection(s) still answering after the {} s grace",
            connections.len(),
            bounds.shutdown_grace.as_secs()
        ));
    }
    connections.shutdown().await;
}

/// Once `stop` says true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// hyper's HTTP/1.1 server with the request-head bounds.
fn http1_builder(bounds: &Bounds) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(bounds.request_head)
        .max_headers(bounds.max_headers)
        .max_header_size(bounds.max_head_bytes);
    builder
}

async fn serve_connection(
    socket: TcpStream,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    _slot: OwnedSemaphorePermit,
) {
    let builder = http1_builder(&shared.bounds);
    let service = service_fn(move |request| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(answer(&shared, request).await) }
    });
    let connection = builder.serve_connection(TokioIo::new(socket), service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        _ = stopped(&mut stop) => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

/// A connection over the limit: its request answered 503, then closed.
async fn refuse_connection(socket: TcpStream, bounds: Bounds, _refusal: OwnedSemaphorePermit) {
    let refused = ApiError::too_many_connections(bounds.max_connections);
    let mut builder = http1_builder(&bounds);
    builder.keep_alive(false).header_read_timeout(REFUSAL_HEAD.min(bounds.request_head));
    let service = service_fn(move |_request| {
        let body = refused.body().to_string();
        let response = hyper::Response::builder()
            .status(refused.status)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::RETRY_AFTER, "1")
            .body(http_body_util::Full::new(bytes::Bytes::from(body)));
        async move { response }
    });
    let _ = timeout(REFUSAL_HEAD * 2, builder.serve_connection(TokioIo::new(socket), service)).await;
}
