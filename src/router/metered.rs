//! An engine's answer on its way to the client, metered: the tokens its usage says are counted
//! when it ends ([`super::usage`]), and whatever the request held while it ran (its service's
//! count of requests under way) is let go then, whether it ended whole or its client went away.
//! A server-sent-events stream is passed on event by event as the engine writes them (each frame
//! holds the events that came whole; the usage chunk the router asked for is kept back); any
//! other answer frame by frame.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use hyper::body::{Body, Frame};

use super::upstream::{UpstreamBody, UpstreamBodyError};
use super::usage::{is_usage_only, total_tokens};

/// The most of a non-streamed answer's end kept to find its usage in (it is the object's last
/// field or near it), and of a stream's event not yet whole.
const TAIL_BYTES: usize = 4096;
const MAX_EVENT_BYTES: usize = 1 << 20;

/// What an answer's end is told: the tokens its usage said (None: it said none).
pub type OnEnd = Box<dyn FnOnce(Option<u64>) + Send>;

pub struct Metered {
    body: UpstreamBody,
    /// Server-sent events: split into events, the usage chunk kept back when `hide_usage`.
    events: bool,
    hide_usage: bool,
    /// A stream's event not yet whole, or a plain answer's last bytes.
    pending: BytesMut,
    tokens: Option<u64>,
    on_end: Option<OnEnd>,
}

impl Metered {
    /// `body` metered; `events`: it is a stream of server-sent events; `hide_usage`: the router
    /// asked for its usage chunk, which its client did not.
    pub fn new(body: UpstreamBody, events: bool, hide_usage: bool, on_end: OnEnd) -> Metered {
        Metered { body, events, hide_usage, pending: BytesMut::new(), tokens: None, on_end: Some(on_end) }
    }

    fn end(&mut self) {
        if let Some(on_end) = self.on_end.take() {
            if !self.events {
                self.tokens = total_tokens(&self.pending).or(self.tokens);
            }
            on_end(self.tokens);
        }
    }

    /// The events of `data` that came whole, as the client gets them; the rest kept pending.
    fn whole_events(&mut self, data: &[u8]) -> Bytes {
        self.pending.extend_from_slice(data);
        let mut out = BytesMut::new();
        while let Some(at) = find_blank_line(&self.pending) {
            let event = self.pending.split_to(at.end);
            let text = &event[..at.start];
            if let Some(tokens) = text.windows(7).any(|w| w == b"\"usage\"").then(|| total_tokens(text)).flatten() {
                self.tokens = Some(tokens);
            }
            if !(self.hide_usage && is_usage_only(text)) {
                out.extend_from_slice(&event);
            }
        }
        // An event without its end past the bound: passed on as it is, never held longer.
        if self.pending.len() > MAX_EVENT_BYTES {
            out.extend_from_slice(&self.pending.split());
        }
        out.freeze()
    }

    /// A plain answer's frame, passed on; its last bytes kept to find the usage in.
    fn passed_on(&mut self, data: Bytes) -> Bytes {
        self.pending.extend_from_slice(&data);
        if self.pending.len() > TAIL_BYTES {
            if let Some(tokens) = total_tokens(&self.pending) {
                self.tokens = Some(tokens);
            }
            let drop = self.pending.len() - TAIL_BYTES;
            let _ = self.pending.split_to(drop);
        }
        data
    }
}

/// Where the first blank line (an event's end: `\n\n` or `\r\n\r\n`) in `bytes` is.
fn find_blank_line(bytes: &[u8]) -> Option<std::ops::Range<usize>> {
    let lf = bytes.windows(2).position(|w| w == b"\n\n").map(|at| at..at + 2);
    let crlf = bytes.windows(4).position(|w| w == b"\r\n\r\n").map(|at| at..at + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.start <= b.start { a } else { b }),
        (a, b) => a.or(b),
    }
}

impl Body for Metered {
    type Data = Bytes;
    type Error = UpstreamBodyError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, UpstreamBodyError>>> {
        let this = self.get_mut();
        loop {
            match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    let frame = match frame.into_data() {
                        Ok(data) if this.events => {
                            let whole = this.whole_events(&data);
                            if whole.is_empty() {
                                continue;
                            }
                            Frame::data(whole)
                        }
                        Ok(data) => Frame::data(this.passed_on(data)),
                        Err(frame) => frame,
                    };
                    return Poll::Ready(Some(Ok(frame)));
                }
                Poll::Ready(Some(Err(error))) => {
                    this.end();
                    return Poll::Ready(Some(Err(error)));
                }
                Poll::Ready(None) => {
                    // A stream's last bytes without their blank line still go to the client.
                    let rest = if this.events { this.pending.split().freeze() } else { Bytes::new() };
                    this.end();
                    if !rest.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(rest))));
                    }
                    return Poll::Ready(None);
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream() && (!self.events || self.pending.is_empty())
    }
}

impl Drop for Metered {
    /// A client that went away mid-answer: what was seen counts, and the request is let go.
    fn drop(&mut self) {
        self.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_events_end_is_found_either_way() {
        assert_eq!(find_blank_line(b"data: a\n\ndata: b\n\n"), Some(7..9));
        assert_eq!(find_blank_line(b"data: a\r\n\r\n"), Some(7..11));
        assert_eq!(find_blank_line(b"data: a\n"), None);
    }
}
