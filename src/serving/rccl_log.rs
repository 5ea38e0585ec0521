//! What RCCL's own start-up lines (`NCCL_DEBUG=INFO`) say about a rank: that it joined its
//! communicator (`… Init COMPLETE`), and which network it took between nodes (`via NET/IB/…`, or
//! `via NET/Socket/…`: the silent TCP fall-back on a RoCE cluster that vLLM's docs tell users to
//! look for).

use serde::{Deserialize, Serialize};

use crate::spec::Transport;

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

    /// A warning when the link is RoCE and RCCL took sockets anyway.
    pub fn warning(net: Option<RcclNet>, link: &Transport, node: &str) -> Option<String> {
        (matches!(link, Transport::Roce { .. }) && net == Some(RcclNet::Socket)).then(|| {
            format!(
                "RCCL on {node} runs over NET/Socket (TCP) although the link is RoCE: tensor parallelism is slow \
                 this way; check the RoCE settings (`strix-toolbox cluster verify`, NCCL_IB_HCA, NCCL_IB_GID_INDEX)"
            )
        })
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

        let roce =
            Transport::Roce { device: "rocep194s0f0".into(), port: 1, netdev: "enp194s0np0".into(), gid_index: 1 };
        let warning = RcclNet::warning(Some(RcclNet::Socket), &roce, "node2").unwrap();
        assert!(warning.contains("node2") && warning.contains("NET/Socket"), "{warning}");
        assert_eq!(RcclNet::warning(Some(RcclNet::Ib), &roce, "node2"), None);
        let tb = Transport::ThunderboltTcp { netdev: "thunderbolt0".into() };
        assert_eq!(RcclNet::warning(Some(RcclNet::Socket), &tb, "node2"), None, "TCP is what a TCP link takes");
    }
}
