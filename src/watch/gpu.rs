//! GPU hangs across looks: which of the hangs a node's kernel tells are new since the watch last
//! looked (by their sequence numbers, within the node's boot: what the log held when the watch
//! first saw a boot came before it), and whether a node's GPU is being reset now (its newest
//! hang's reset begun and not ended), since when, or failed to.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::clock::Moment;
use super::observation::NodeObservation;
use crate::host::gpu_hangs::{GpuHang, GpuReset};

/// What the watch has seen of each node's GPU hangs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuWatch {
    /// Per node: the boot seen, and the newest hang's sequence number then (0: none).
    seen: BTreeMap<String, (String, u64)>,
    /// Per node whose GPU is being reset: since when the watch has seen it so.
    resetting_since: BTreeMap<String, Moment>,
}

/// What one look found of the GPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuLook {
    /// The hangs new since the last look: (node, hang).
    pub new: Vec<(String, GpuHang)>,
    /// A node whose GPU is being reset now: the node, since when, and the line that began its hang.
    pub resetting: Option<(String, Moment, String)>,
    /// A node whose GPU's reset failed, of a hang the watch saw come or waited for: the node and
    /// the kernel's line.
    pub failed: Option<(String, String)>,
}

impl GpuWatch {
    /// Take the look at `at` that saw `nodes`.
    pub fn look(&mut self, at: Moment, nodes: &[NodeObservation]) -> GpuLook {
        let mut look = GpuLook::default();
        for node in nodes.iter().filter(|node| node.reachable) {
            let Some(boot) = &node.boot_id else { continue };
            let newest = node.gpu_hangs.iter().map(|hang| hang.seq).max().unwrap_or(0);
            let before = match self.seen.get(&node.node) {
                Some((seen_boot, seq)) if seen_boot == boot => Some(*seq),
                // A boot seen for the first time: what its log holds came before the watch.
                _ => None,
            };
            let waited = self.resetting_since.remove(&node.node);
            let Some(last) = node.gpu_hangs.iter().max_by_key(|hang| hang.seq) else {
                self.seen.insert(node.node.clone(), (boot.clone(), newest));
                continue;
            };
            if let Some(before) = before {
                let new = node.gpu_hangs.iter().filter(|hang| hang.seq > before);
                look.new.extend(new.map(|hang| (node.node.clone(), hang.clone())));
            }
            match &last.reset {
                GpuReset::Underway(_) => {
                    let since = waited.unwrap_or(at);
                    self.resetting_since.insert(node.node.clone(), since);
                    look.resetting.get_or_insert_with(|| (node.node.clone(), since, last.line.clone()));
                }
                GpuReset::Failed(line) if waited.is_some() || before.is_some_and(|before| last.seq > before) => {
                    look.failed.get_or_insert_with(|| (node.node.clone(), line.clone()));
                }
                _ => {}
            }
            self.seen.insert(node.node.clone(), (boot.clone(), newest));
        }
        look
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(boot: &str, hangs: &[(u64, GpuReset)]) -> NodeObservation {
        NodeObservation {
            node: "node2".into(),
            reachable: true,
            boot_id: Some(boot.into()),
            gpu_hangs: hangs
                .iter()
                .map(|(seq, reset)| GpuHang {
                    seq: *seq,
                    at_microseconds: seq * 1000,
                    line: format!("hang {seq}"),
                    reset: reset.clone(),
                })
                .collect(),
        }
    }

    fn underway() -> GpuReset {
        GpuReset::Underway("GPU reset begin!".into())
    }

    #[test]
    fn what_a_boot_held_before_the_watch_is_old_and_a_later_hang_is_new() {
        let mut watch = GpuWatch::default();
        let old = [(5, GpuReset::Succeeded("GPU reset(1) succeeded!".into()))];
        assert_eq!(watch.look(Moment(0), &[node("boot-a", &old)]), GpuLook::default(), "before the watch");
        let later = [old[0].clone(), (9, underway())];
        let look = watch.look(Moment(30_000), &[node("boot-a", &later)]);
        assert_eq!(look.new.iter().map(|(node, hang)| (node.as_str(), hang.seq)).collect::<Vec<_>>(), [("node2", 9)]);
        assert_eq!(look.resetting, Some(("node2".into(), Moment(30_000), "hang 9".into())));
        // Still resetting a look later: since the first look that saw it, and nothing new.
        let look = watch.look(Moment(60_000), &[node("boot-a", &later)]);
        assert!(look.new.is_empty());
        assert_eq!(look.resetting.map(|(_, since, _)| since), Some(Moment(30_000)));
        // Its reset ended: no longer resetting.
        let done = [old[0].clone(), (9, GpuReset::Succeeded("GPU reset(2) succeeded!".into()))];
        assert_eq!(watch.look(Moment(90_000), &[node("boot-a", &done)]), GpuLook::default());
    }

    #[test]
    fn a_reset_underway_before_the_watch_is_waited_for_and_a_failure_of_one_it_waited_for_is_said() {
        let mut watch = GpuWatch::default();
        let look = watch.look(Moment(0), &[node("boot-a", &[(3, underway())])]);
        assert!(look.new.is_empty() && look.resetting.is_some(), "{look:?}");
        let failed = [(3, GpuReset::Failed("GPU reset(1) failed".into()))];
        let look = watch.look(Moment(30_000), &[node("boot-a", &failed)]);
        assert_eq!(look.failed, Some(("node2".into(), "GPU reset(1) failed".into())));
        // A failure from before the watch, never waited for: the GPU's state is the service's
        // own to show (a node that failed so serves nothing), not news.
        let mut fresh = GpuWatch::default();
        assert_eq!(fresh.look(Moment(0), &[node("boot-a", &failed)]), GpuLook::default());
    }

    #[test]
    fn another_boot_starts_afresh_and_an_unreachable_node_says_nothing() {
        let mut watch = GpuWatch::default();
        watch.look(Moment(0), &[node("boot-a", &[])]);
        let rebooted = node("boot-b", &[(2, GpuReset::None)]);
        assert!(watch.look(Moment(30_000), &[rebooted]).new.is_empty(), "what boot-b held came before");
        let silent = NodeObservation { reachable: false, ..node("boot-b", &[(2, GpuReset::None), (7, underway())]) };
        assert_eq!(watch.look(Moment(60_000), &[silent]), GpuLook::default());
    }
}
