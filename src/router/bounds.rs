//! Every limit the router keeps, in one place: how many clients at once, how big and how slow a
//! request may be, how long an engine may take. Nothing a client or an engine sends is held
//! without one of these bounding it.

use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Client connections served at once. Those beyond are answered 503 (up to
    /// `max_refused_at_once` of them at a time) and closed; more still are closed unanswered.
    pub max_connections: usize,
    /// Connections over `max_connections` that are answered 503 at the same time.
    pub max_refused_at_once: usize,
    /// A request's head: at most this many header fields...
    pub max_headers: usize,
    /// ...and this many bytes, request line included (more: 431).
    pub max_head_bytes: usize,
    /// From when a connection waits for a request (a new one, or one idle after its last answer)
    /// until the request's head has come in: the header-read deadline and the idle keep-alive in
    /// one, as hyper starts one timer for both.
    pub request_head: Duration,
    /// A request body's size (a chat with long context is a few MiB of JSON; more: 413).
    pub max_body_bytes: usize,
    /// How long the whole body may take to arrive once the head is in (more: 408).
    pub request_body: Duration,
    /// How long connecting to an engine may take (more: 504).
    pub upstream_connect: Duration,
    /// How long an engine may take to begin its answer, and then between two pieces of it (a
    /// non-streamed completion of many tokens begins only when it is whole; more: 504, or the
    /// stream ends).
    pub upstream_answer: Duration,
    /// How long each engine's `/health` and `/v1/models` may take when the router asks them.
    pub probe: Duration,
    /// The most of an engine's `/health` or `/v1/models` body read.
    pub max_probe_bytes: usize,
    /// How long `shutdown` lets answers under way finish before it cuts them.
    pub shutdown_grace: Duration,
    /// How long a stop on demand (for another's room, or idle) lets the service's answers under
    /// way finish before it stops the service anyway.
    pub drain: Duration,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            max_connections: 1024,
            max_refused_at_once: 64,
            max_headers: 100,
            max_head_bytes: 64 << 10,
            request_head: Duration::from_secs(30),
            max_body_bytes: 32 << 20,
            request_body: Duration::from_secs(60),
            upstream_connect: Duration::from_secs(5),
            upstream_answer: Duration::from_secs(600),
            probe: Duration::from_secs(5),
            max_probe_bytes: 1 << 20,
            shutdown_grace: Duration::from_secs(10),
            drain: Duration::from_secs(120),
        }
    }
}
