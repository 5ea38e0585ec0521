//! Before a relaunch, the nodes' GPU memory must be free again: a new engine started into a node
//! that still holds the old one's memory fails to load, or takes the node down with it. The wait
//! is bounded: past `--memory-wait` the watch gives up rather than launch into it, and every
//! answer says which node holds how much.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::clock::Moment;
use super::duration::format_duration;
use crate::reporter::Bytes;

/// What one node holds now: its GTT and VRAM in use (None: it does not say, or did not answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldMemory {
    pub node: String,
    pub used_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryVerdict {
    /// Every node holds no more than the allowance: relaunch.
    Free,
    /// Look again after an interval: why.
    Wait(String),
    /// The wait ran out: give up, why.
    GiveUp(String),
}

/// Whether to relaunch now, having waited since `waiting_since`, at most `limit`.
pub fn memory_verdict(
    nodes: &[HeldMemory],
    allowance_bytes: u64,
    waiting_since: Moment,
    now: Moment,
    limit: Duration,
) -> MemoryVerdict {
    let held: Vec<String> = nodes
        .iter()
        .filter_map(|node| match node.used_bytes {
            None => Some(format!("{} does not say how much GPU memory it holds", node.node)),
            Some(used) if used > allowance_bytes => Some(format!(
                "{} still holds {} of GPU memory (free is {} or less)",
                node.node,
                Bytes(used),
                Bytes(allowance_bytes)
            )),
            Some(_) => None,
        })
        .collect();
    if held.is_empty() {
        return MemoryVerdict::Free;
    }
    let waited = now.since(waiting_since);
    let why = held.join("; ");
    if waited >= limit {
        MemoryVerdict::GiveUp(format!(
            "{why}, {} after its engine was stopped (--memory-wait {}): something else holds it, or the driver did not \
             give it back; free it (or reboot the node) and launch again",
            format_duration(waited),
            format_duration(limit)
        ))
    } else {
        MemoryVerdict::Wait(format!(
            "{why}; waited {} of --memory-wait {}",
            format_duration(waited),
            format_duration(limit)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, used: Option<u64>) -> HeldMemory {
        HeldMemory { node: name.into(), used_bytes: used }
    }

    #[test]
    fn free_when_every_node_is_within_the_allowance() {
        let nodes = [node("a", Some(1 << 30)), node("b", Some(4 << 30))];
        assert_eq!(
            memory_verdict(&nodes, 4 << 30, Moment(0), Moment(0), Duration::from_secs(300)),
            MemoryVerdict::Free
        );
    }

    #[test]
    fn waits_naming_the_node_then_gives_up_at_the_limit() {
        let nodes = [node("a", Some(1 << 30)), node("b", Some(60 << 30)), node("c", None)];
        let limit = Duration::from_secs(300);
        let MemoryVerdict::Wait(why) = memory_verdict(&nodes, 4 << 30, Moment(0), Moment(30_000), limit) else {
            panic!("expected a wait")
        };
        assert_eq!(
            why,
            "b still holds 60.00 GiB of GPU memory (free is 4.00 GiB or less); c does not say how much GPU memory it \
             holds; waited 30s of --memory-wait 5m"
        );
        let MemoryVerdict::GiveUp(why) = memory_verdict(&nodes, 4 << 30, Moment(0), Moment(300_000), limit) else {
            panic!("expected to give up")
        };
        assert!(why.starts_with("b still holds 60.00 GiB") && why.contains("5m after its engine was stopped"), "{why}");
    }
}
