//! How vLLM splits a model over the nodes' GPUs (one per node), chosen by the cluster link when
//! the operator does not say: tensor parallelism all-reduces every layer's activations, which
//! pays only over RDMA (TP2 is 1.63-1.83x TP1 on Strix Halo over RoCE); pipeline parallelism
//! sends one layer's activations per stage, which TCP (Thunderbolt, Ethernet) carries well (a
//! 27B model split by layers over TCP ran 8.87 tok/s against 4.02 tensor parallel), and is how
//! vLLM's own docs span nodes.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::spec::Transport;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parallelism {
    /// `--tensor-parallel-size`.
    pub tp: usize,
    /// `--pipeline-parallel-size`.
    pub pp: usize,
    /// `--data-parallel-size`: replicas of the attention, one a node (1: none).
    #[serde(default = "one")]
    pub dp: usize,
    /// `--enable-expert-parallel`: the experts of a MoE model dealt out whole over the ranks.
    #[serde(default)]
    pub expert_parallel: bool,
    /// Why these, as the report says it.
    pub why: String,
}

fn one() -> usize {
    1
}

impl Parallelism {
    /// TP × PP, no data or expert parallelism.
    pub fn of(tp: usize, pp: usize, why: impl Into<String>) -> Parallelism {
        Parallelism { tp, pp, dp: 1, expert_parallel: false, why: why.into() }
    }
}

impl Parallelism {
    /// What `--tp`/`--pp` ask for on `nodes` nodes, checked: every node runs one rank, so TP × PP
    /// is the number of nodes; None when neither is given (the link decides: [`Self::by_link`]).
    pub fn asked(tp: Option<usize>, pp: Option<usize>, nodes: usize) -> Result<Option<Parallelism>> {
        let (tp, pp) = match (tp, pp) {
            (None, None) => return Ok(None),
            (Some(0), _) => return Err(Error::Usage("--tp 0: the tensor-parallel size is at least 1".into())),
            (_, Some(0)) => return Err(Error::Usage("--pp 0: the pipeline-parallel size is at least 1".into())),
            (Some(tp), None) => (tp, split(tp, nodes, "--tp")?),
            (None, Some(pp)) => (split(pp, nodes, "--pp")?, pp),
            (Some(tp), Some(pp)) => (tp, pp),
        };
        if tp * pp != nodes {
            return Err(Error::Usage(format!(
                "--tp {tp} --pp {pp} needs {} GPUs, one per node, and the cluster has {nodes} node(s). Fix: TP × PP \
                 = {nodes}",
                tp * pp
            )));
        }
        Ok(Some(Parallelism::of(tp, pp, format!("TP {tp} × PP {pp}, as asked"))))
    }

    /// Neither asked: TP over every node on RDMA (RoCE), PP over every node on TCP.
    pub fn by_link(nodes: usize, transport: &Transport) -> Parallelism {
        match transport {
            _ if nodes == 1 => Parallelism::of(1, 1, "one node, one GPU"),
            Transport::Roce { .. } => Parallelism::of(
                nodes,
                1,
                format!(
                    "tensor parallel {nodes}: the link is RoCE, and RDMA carries the all-reduce of every layer \
                     (--pp {nodes} splits the layers instead)"
                ),
            ),
            other => Parallelism::of(
                1,
                nodes,
                format!(
                    "pipeline parallel {nodes}: the link is {}, where tensor parallelism's all-reduce of every \
                     layer costs more than it gains; the layers are split instead (--tp {nodes} to override)",
                    other.label()
                ),
            ),
        }
    }
}

/// The other size when only one of them (`flag` `size`) is given: the nodes it leaves.
fn split(size: usize, nodes: usize, flag: &str) -> Result<usize> {
    if size > nodes {
        return Err(Error::Usage(format!(
            "{flag} {size} needs {size} GPUs, one per node, and the cluster has {nodes} node(s). Fix: {flag} {nodes} \
             or less, or add nodes"
        )));
    }
    if !nodes.is_multiple_of(size) {
        return Err(Error::Usage(format!(
            "{flag} {size} does not divide the {nodes} nodes: every node runs one rank. Fix: a divisor of {nodes}"
        )));
    }
    Ok(nodes / size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_decides_when_nobody_asked() {
        let roce =
            Transport::Roce { device: "rocep194s0f0".into(), port: 1, netdev: "enp194s0np0".into(), gid_index: 1 };
        let thunderbolt = Transport::ThunderboltTcp { netdev: "thunderbolt0".into() };
        assert_eq!((Parallelism::by_link(3, &roce).tp, Parallelism::by_link(3, &roce).pp), (3, 1));
        let tcp = Parallelism::by_link(3, &thunderbolt);
        assert_eq!((tcp.tp, tcp.pp), (1, 3));
        assert!(tcp.why.contains("TCP"), "{}", tcp.why);
        assert_eq!(Parallelism::by_link(1, &roce).tp, 1);
    }

    #[test]
    fn asked_sizes_fill_the_nodes_exactly() {
        assert_eq!(Parallelism::asked(None, None, 4).unwrap(), None);
        let tp = Parallelism::asked(Some(2), None, 4).unwrap().unwrap();
        assert_eq!((tp.tp, tp.pp), (2, 2));
        let pp = Parallelism::asked(None, Some(3), 3).unwrap().unwrap();
        assert_eq!((pp.tp, pp.pp), (1, 3));
        for (tp, pp, said) in [
            (Some(3), None, "--tp 3"),
            (Some(2), None, "does not divide"),
            (Some(0), None, "--tp 0"),
            (Some(2), Some(2), "needs 4 GPUs"),
        ] {
            let error = Parallelism::asked(tp, pp, if said == "does not divide" { 3 } else { 2 }).unwrap_err();
            assert!(matches!(error, Error::Usage(_)) && error.to_string().contains(said), "{error}");
        }
    }
}
