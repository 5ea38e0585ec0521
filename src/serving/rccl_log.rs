//! What RCCL's own start-up lines (`NCCL_DEBUG=INFO`) say about a rank: that it joined its
//! communicator (`… Init COMPLETE`), and which network it took between nodes (`via NET/IB/…`, or
//! `via NET/Socket/…`: the silent TCP fall-back on a RoCE cluster that vLLM's docs tell users to
//! look for).

use serde::{Deserialize, Serialize};

/// The line RCCL (as NCCL) logs once a rank's communicator is up.
pub const JOINED: &str = "Init COMPLETE";

/// The network RCCL uses between nodes, as its log names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RcclNet {
    /// `NET/IB`: RDMA (RoCE).
    Ib,
    /// `NET/Socket`: TCP.
    Socket,
}

impl RcclNet {
    /// What `lines` say: sockets if any connection went over them, else IB if any did.
    pub fn of(lines: &[String]) -> Option<RcclNet> {
        let said = |net: &str| lines.iter().any(|line| line.contains(&format!("via {net}")));
        if said("NET/Socket") {
            Some(RcclNet::Socket)
        } else if said("NET/IB") {
            Some(RcclNet::Ib)
        } else {
            None
        }
    }
}

/// A rank's log says it joined.
pub fn joined(lines: &[String]) -> bool {
    lines.iter().any(|line| line.contains("NCCL INFO") && line.contains(JOINED))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &[&str]) -> Vec<String> {
        text.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn rccl_lines_say_joined_and_the_network() {
        let ib = lines(&[
            "node1:12:40 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0",
            "node1:12:40 [0] NCCL INFO comm 0x5 rank 0 nranks 2 cudaDev 0 busId c1000 - Init COMPLETE",
        ]);
        assert!(joined(&ib));
        assert_eq!(RcclNet::of(&ib), Some(RcclNet::Ib));
        let socket = lines(&["NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0"]);
        assert!(!joined(&socket));
        assert_eq!(RcclNet::of(&socket), Some(RcclNet::Socket));
        assert_eq!(RcclNet::of(&lines(&["INFO loading weights"])), None);
    }
}
