//! Whether addresses answer a TCP connection from this node, asked at once and each bounded: how
//! the head proves the workers' servers listen on their link addresses (llama.cpp's
//! `rpc-server`), and how `status` and `doctor` find one that no longer does. From the node's own
//! network: a firewall between it and a worker shows here as it would to the engine.

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use crate::link::io_failure::{IoFailure, IoStep};

/// How long one connection may take on the cluster link.
const CONNECT_LIMIT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reach {
    pub addresses: Vec<SocketAddr>,
}

/// What a connection to one address came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reached {
    Answers,
    /// Nothing listens there (the host answered with a reset).
    Refused,
    /// No answer within the limit: a firewall drops it, or the host is gone.
    Silent,
    /// The connection failed otherwise (no route to it, an address this node cannot use).
    Failed(IoFailure),
    /// The node that was to connect could not be asked (its call failed): why.
    Unasked(String),
}

impl Reached {
    /// Why an address that should answer does not, and what likely fixes it.
    pub fn why(&self) -> (&'static str, &'static str) {
        match self {
            Reached::Answers => ("it answers", ""),
            Reached::Refused => (
                "nothing listens there: the server exited, or listens on another address",
                "its log says why (`strix-toolbox cluster logs --node NODE`)",
            ),
            Reached::Silent => (
                "nothing answered within 3 s: a firewall drops it (firewalld on either node), or the link is down",
                "trust the cluster link on every node (`sudo firewall-cmd --permanent --zone=trusted \
                 --change-interface=IFACE && sudo firewall-cmd --reload`); `strix-toolbox cluster doctor` checks \
                 the link",
            ),
            Reached::Failed(_) => (
                "the connection failed: the link address is wrong or the link is down",
                "`strix-toolbox cluster doctor` checks the link, its subnet and MTU on every node",
            ),
            Reached::Unasked(_) => (
                "the head could not be asked to connect: nothing is known of the address",
                "`strix-toolbox cluster status` says why the head does not answer",
            ),
        }
    }
}

pub async fn reach(request: &Reach) -> Vec<Reached> {
    join_all(request.addresses.iter().map(|address| reach_one(*address, CONNECT_LIMIT))).await
}

pub async fn reach_one(address: SocketAddr, limit: Duration) -> Reached {
    match tokio::time::timeout(limit, tokio::net::TcpStream::connect(address)).await {
        Ok(Ok(_)) => Reached::Answers,
        Err(_) => Reached::Silent,
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::ConnectionRefused => Reached::Refused,
        Ok(Err(error)) => Reached::Failed(IoFailure::new(IoStep::Connect, &error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_listener_answers_and_a_closed_port_refuses() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let open = listener.local_addr().unwrap();
        let closed = {
            let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            other.local_addr().unwrap()
        };
        let said = reach(&Reach { addresses: vec![open, closed] }).await;
        assert_eq!(said, [Reached::Answers, Reached::Refused]);
    }
}
