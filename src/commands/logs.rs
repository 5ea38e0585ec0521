//! `logs` on this node, `cluster logs` on every node: each line with its node and file.

use crate::cluster::logs::{LogCursor, FOLLOW_INTERVAL};
use crate::error::Result;
use crate::node::Node;
use crate::output::{Output, Style};

/// Print the logs (and, with `follow`, what is added until Ctrl-C). Exit 1 when a node could not
/// say, 130 when Ctrl-C ended a follow.
pub async fn run(toolbox: &str, nodes: &[&dyn Node], lines: usize, follow: bool, out: &Output) -> Result<i32> {
    let mut cursor = LogCursor::default();
    let mut failed = false;
    let mut first_round = true;
    loop {
        for node in cursor.read(nodes, toolbox, lines).await {
            match node.tails {
                Ok(tails) if tails.is_empty() && first_round => {
                    out.status(&format!("{}: no logs (nothing was launched there)", node.node));
                }
                Ok(tails) => {
                    for tail in tails {
                        let prefix = out.paint(&format!("{} {}", node.node, tail.file), Style::Dim);
                        for line in &tail.lines {
                            if out.json() {
                                // One object per line, so a reader can follow a stream of them.
                                let entry = serde_json::json!({ "node": node.node, "file": tail.file, "line": line });
                                out.line(&entry.to_string());
                            } else {
                                out.line(&format!("{prefix} | {line}"));
                            }
                        }
                    }
                }
                Err(error) => {
                    failed = true;
                    out.warn(&format!("{}: {error}", node.node));
                }
            }
        }
        if !follow {
            return Ok(i32::from(failed));
        }
        first_round = false;
        tokio::select! {
            _ = tokio::time::sleep(FOLLOW_INTERVAL) => {}
            _ = tokio::signal::ctrl_c() => return Ok(130),
        }
    }
}
