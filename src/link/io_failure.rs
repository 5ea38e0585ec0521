//! How a connection the head or a node made failed, other than the two answers every probe tells
//! apart on its own (refused: nothing listens; silent: nothing answered in time): the step it
//! failed at and the kind of failure, typed so callers can tell the causes apart, with the
//! system's words for people.

use std::fmt;
use std::io::ErrorKind;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoFailure {
    pub during: IoStep,
    pub kind: IoKind,
    /// The system's words (`No route to host (os error 113)`).
    pub message: String,
}

/// Where on the connection it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoStep {
    Connect,
    Send,
    Receive,
}

/// The causes worth telling apart: each has its own likely fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoKind {
    /// No route to the host or its network (EHOSTUNREACH, ENETUNREACH): the link is down, or the
    /// address is on no network this node reaches.
    NoRoute,
    /// The address is none this node can connect with (EADDRNOTAVAIL).
    AddressUnavailable,
    /// The other end reset or closed the connection midway.
    Reset,
    /// Anything else: the message says what.
    Other,
}

impl IoFailure {
    pub fn new(during: IoStep, error: &std::io::Error) -> IoFailure {
        let kind = match error.kind() {
            ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable => IoKind::NoRoute,
            ErrorKind::AddrNotAvailable => IoKind::AddressUnavailable,
            ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe => IoKind::Reset,
            _ => IoKind::Other,
        };
        IoFailure { during, kind, message: error.to_string() }
    }
}

/// The system's words, after the step when it is not the connection itself (which every message
/// around it already names).
impl fmt::Display for IoFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.during {
            IoStep::Connect => write!(f, "{}", self.message),
            IoStep::Send => write!(f, "sending the request: {}", self.message),
            IoStep::Receive => write!(f, "reading the answer: {}", self.message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_is_read_from_the_error_and_the_words_kept() {
        let no_route = std::io::Error::from(ErrorKind::HostUnreachable);
        let failure = IoFailure::new(IoStep::Connect, &no_route);
        assert_eq!(failure.kind, IoKind::NoRoute);
        assert_eq!(failure.to_string(), no_route.to_string());
        let reset = IoFailure::new(IoStep::Receive, &std::io::Error::from(ErrorKind::ConnectionReset));
        assert_eq!(reset.kind, IoKind::Reset);
        assert!(reset.to_string().starts_with("reading the answer: "), "{reset}");
        assert_eq!(IoFailure::new(IoStep::Send, &std::io::Error::other("odd")).kind, IoKind::Other);
    }
}
