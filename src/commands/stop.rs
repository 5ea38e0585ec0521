//! `stop` on this node, `cluster stop` on every node: what launches started, stopped.

use crate::cluster::stop::{stop_serving, NodeStop, StopReport};
use crate::error::Result;
use crate::node::Node;
use crate::output::{Output, Render, Style};

/// Stop on `nodes`; `unreachable` (node, why) are reported as not stopped. Exit 1 when any was not.
pub async fn run(toolbox: &str, nodes: &[&dyn Node], unreachable: Vec<(String, String)>, out: &Output) -> Result<i32> {
    let mut report = stop_serving(nodes, toolbox).await;
    report.nodes.extend(unreachable.into_iter().map(|(node, error)| NodeStop {
        node,
        stopped: None,
        error: Some(error),
    }));
    out.report(&report);
    Ok(i32::from(!report.failed().is_empty()))
}

impl Render for StopReport {
    fn render(&self, out: &Output) {
        for node in &self.nodes {
            match (&node.stopped, &node.error) {
                (_, Some(error)) => out.line(&format!("{} {}: {error}", out.paint("✗", Style::Fail), node.node)),
                (Some(stopped), None) => {
                    let mut what: Vec<&str> = stopped.processes.iter().map(String::as_str).collect();
                    if stopped.ray {
                        what.push("Ray");
                    }
                    let said = if what.is_empty() {
                        "nothing was running".to_string()
                    } else {
                        format!("stopped {}", what.join(" and "))
                    };
                    let forced = if stopped.forced { " (forced)" } else { "" };
                    out.line(&format!("{} {}: {said}{forced}", out.paint("✓", Style::Ok), node.node));
                }
                (None, None) => {}
            }
        }
    }
}
