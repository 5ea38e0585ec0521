//! `logs` on this node, `cluster logs` on every node: each line with its node and file.

use crate::cluster::logs::{LogCursor, FOLLOW_INTERVAL};
use crate::error::Result;
use crate::node::Node;
use crate::output::{Style, Ui};

pub async fn run(toolbox: &str, nodes: &[&dyn Node], lines: usize, follow: bool, ui: &Ui) -> Result<i32> {
    let mut cursor = LogCursor::default();
    let mut failed = false;
    loop {
        for node in cursor.read(nodes, toolbox, lines).await {
            match node.tails {
                Ok(tails) => {
                    for tail in tails {
                        for line in &tail.lines {
                            let prefix = format!("{} {}", node.node, tail.file);
                            println!("{} | {line}", ui.paint(&prefix, Style::Dim));
                        }
                    }
                }
                Err(error) => {
                    failed = true;
                    ui.warn(&format!("{}: {error}", node.node));
                }
            }
        }
        if !follow {
            return Ok(i32::from(failed));
        }
        tokio::select! {
            _ = tokio::time::sleep(FOLLOW_INTERVAL) => {}
            _ = tokio::signal::ctrl_c() => return Ok(130),
        }
    }
}
