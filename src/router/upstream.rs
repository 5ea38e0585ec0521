//! The router's side toward an engine: one fresh HTTP/1.1 connection per request (a connect on
//! the link or loopback costs far less than a token), so the connection lives exactly as long as
//! the answer it carries. When the client goes, hyper drops the answer's body, the body drops its
//! connection, and the engine sees the socket close: llama-server and vLLM then stop generating
//! for it. Every wait is bounded: the connect, the answer's head, each gap between two pieces of
//! the body.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{HeaderValue, AUTHORIZATION, HOST};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout, Instant, Sleep};

use super::bounds::Bounds;
use super::table::Upstream;

/// Why an engine gave no answer.
#[derive(Debug)]
pub enum UpstreamFailure {
    /// The connect failed: nothing listens, no route (the reason).
    Refused(std::io::Error),
    /// No connection within the limit.
    ConnectTimedOut(Duration),
    /// Connected, but the answer did not begin within the limit.
    AnswerTimedOut(Duration),
    /// The connection broke before a whole answer head came (hyper's reason).
    Broken(String),
    /// The answer's body was cut, or longer than the router reads of it (a probe).
    BadBody(String),
}

impl fmt::Display for UpstreamFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamFailure::Refused(error) => write!(f, "connect failed: {error}"),
            UpstreamFailure::ConnectTimedOut(limit) => write!(f, "no connection within {} s", limit.as_secs()),
            UpstreamFailure::AnswerTimedOut(limit) => write!(f, "no answer within {} s", limit.as_secs()),
            UpstreamFailure::Broken(why) => write!(f, "the connection broke before an answer: {why}"),
            UpstreamFailure::BadBody(why) => write!(f, "unreadable answer: {why}"),
        }
    }
}

/// Send `request` (origin-form URI, its body whole) to `upstream` and return the answer as it
/// begins; its body streams from the engine as it is polled.
pub async fn exchange(
    upstream: &Upstream,
    mut request: Request<Full<Bytes>>,
    bounds: &Bounds,
) -> Result<Response<UpstreamBody>, UpstreamFailure> {
    let connect = TcpStream::connect(upstream.address);
    let stream = match timeout(bounds.upstream_connect, connect).await {
        Err(_) => return Err(UpstreamFailure::ConnectTimedOut(bounds.upstream_connect)),
        Ok(Err(error)) => return Err(UpstreamFailure::Refused(error)),
        Ok(Ok(stream)) => stream,
    };
    // Each SSE event is a small write: Nagle would hold it for the engine's next one.
    let _ = stream.set_nodelay(true);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|error| UpstreamFailure::Broken(error.to_string()))?;
    let connection = ConnectionTask(tokio::spawn(async move {
        let _ = connection.await;
    }));
    let headers = request.headers_mut();
    if let Ok(host) = upstream.address.to_string().parse() {
        headers.insert(HOST, host);
    }
    headers.remove(AUTHORIZATION);
    if let Some(key) = &upstream.api_key {
        if let Ok(mut bearer) = HeaderValue::from_str(&format!("Bearer {}", key.expose())) {
            bearer.set_sensitive(true);
            headers.insert(AUTHORIZATION, bearer);
        }
    }
    let answer = match timeout(bounds.upstream_answer, sender.send_request(request)).await {
        Err(_) => return Err(UpstreamFailure::AnswerTimedOut(bounds.upstream_answer)),
        Ok(Err(error)) => return Err(UpstreamFailure::Broken(error.to_string())),
        Ok(Ok(answer)) => answer,
    };
    let (head, body) = answer.into_parts();
    Ok(Response::from_parts(head, UpstreamBody::new(body, connection, bounds.upstream_answer)))
}

/// `GET path` of `upstream` with its key, the status and the whole body (at most
/// `max_probe_bytes`), all within `probe`: the router's `/health` and `/v1/models` ask each
/// engine this way.
pub async fn get(upstream: &Upstream, path: &str, bounds: &Bounds) -> Result<(StatusCode, Bytes), UpstreamFailure> {
    let request =
        Request::get(path).body(Full::new(Bytes::new())).map_err(|error| UpstreamFailure::Broken(error.to_string()))?;
    let probe = async {
        let answer = exchange(upstream, request, bounds).await?;
        let status = answer.status();
        let body = Limited::new(answer.into_body(), bounds.max_probe_bytes)
            .collect()
            .await
            .map_err(|error| UpstreamFailure::BadBody(error.to_string()))?;
        Ok((status, body.to_bytes()))
    };
    timeout(bounds.probe, probe).await.unwrap_or(Err(UpstreamFailure::AnswerTimedOut(bounds.probe)))
}

/// The task that drives an engine connection; aborted (the socket closed) when dropped.
struct ConnectionTask(JoinHandle<()>);

impl Drop for ConnectionTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// An engine's answer body on its way to the client, frame by frame as the engine sends them. It
/// owns the connection it comes on; it ends with an error when the engine stays silent for
/// `idle` (hyper then cuts the client's answer short, as the engine would have).
pub struct UpstreamBody {
    body: Incoming,
    idle: Duration,
    silence: Pin<Box<Sleep>>,
    _connection: ConnectionTask,
}

impl UpstreamBody {
    fn new(body: Incoming, connection: ConnectionTask, idle: Duration) -> UpstreamBody {
        UpstreamBody { body, idle, silence: Box::pin(sleep(idle)), _connection: connection }
    }
}

/// Why an answer's body ended before its end.
#[derive(Debug)]
pub enum UpstreamBodyError {
    Engine(hyper::Error),
    Silent(Duration),
}

impl fmt::Display for UpstreamBodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamBodyError::Engine(error) => write!(f, "the engine's answer broke off: {error}"),
            UpstreamBodyError::Silent(limit) => write!(f, "the engine sent nothing for {} s", limit.as_secs()),
        }
    }
}

impl std::error::Error for UpstreamBodyError {}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = UpstreamBodyError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, UpstreamBodyError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.silence.as_mut().reset(Instant::now() + this.idle);
                Poll::Ready(frame.map(|frame| frame.map_err(UpstreamBodyError::Engine)))
            }
            Poll::Pending => match this.silence.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(UpstreamBodyError::Silent(this.idle)))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}
