//! `cluster logs [NAME]` (and `logs` on one node): a service's logs on every node (its engine's
//! processes, and Ray's where it ran Ray), each line with its node; `--follow` asks again every
//! second for what was added.

use std::time::Duration;

use futures_util::future::join_all;

use crate::error::Result;
use crate::node::{Node, NodeCalls};
use crate::serving::logs::{LogTail, ServeLogs};

/// How often `--follow` asks.
pub const FOLLOW_INTERVAL: Duration = Duration::from_secs(1);

/// What one node said, for one round.
pub struct NodeLogs {
    pub node: String,
    pub tails: Result<Vec<LogTail>>,
}

/// Where each node's files were read up to, for the next round.
#[derive(Debug, Default)]
pub struct LogCursor {
    seen: Vec<(String, Vec<LogTail>)>,
}

impl LogCursor {
    /// One round over `nodes`: of `service`'s logs (every service's: None), the last `lines`
    /// lines of files not seen yet, what was added to the others.
    pub async fn read(&mut self, nodes: &[&dyn Node], service: Option<&str>, lines: usize) -> Vec<NodeLogs> {
        let asks = nodes.iter().map(|node| {
            let seen = self.seen_by(node.name()).iter().map(|t| LogTail { lines: Vec::new(), ..t.clone() }).collect();
            node.call(ServeLogs { service: service.map(str::to_string), lines, seen })
        });
        let results = join_all(asks).await;
        let mut rounds = Vec::new();
        for (node, tails) in nodes.iter().zip(results) {
            if let Ok(tails) = &tails {
                let seen = self.entry(node.name());
                for tail in tails {
                    seen.retain(|t| t.file != tail.file || t.service != tail.service);
                    seen.push(LogTail { lines: Vec::new(), ..tail.clone() });
                }
            }
            rounds.push(NodeLogs { node: node.name().to_string(), tails });
        }
        rounds
    }

    fn seen_by(&self, node: &str) -> &[LogTail] {
        self.seen.iter().find(|(n, _)| n == node).map_or(&[], |(_, tails)| tails)
    }

    fn entry(&mut self, node: &str) -> &mut Vec<LogTail> {
        if let Some(index) = self.seen.iter().position(|(n, _)| n == node) {
            return &mut self.seen[index].1;
        }
        self.seen.push((node.to_string(), Vec::new()));
        &mut self.seen.last_mut().expect("just pushed").1
    }
}
