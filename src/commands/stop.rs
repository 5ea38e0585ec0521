//! `stop` on this node, `cluster stop` on every node: what launches started, stopped.

use crate::cluster::stop::{stop_serving, StopReport};
use crate::error::Result;
use crate::node::Node;
use crate::output::{Style, Ui};

pub async fn run(toolbox: &str, nodes: &[&dyn Node], unreachable: Vec<(String, String)>, ui: &Ui) -> Result<i32> {
    let mut report = stop_serving(nodes, toolbox).await;
    report.nodes.extend(unreachable.into_iter().map(|(node, error)| crate::cluster::stop::NodeStop {
        node,
        stopped: None,
        error: Some(error),
    }));
    if ui.json {
        ui.print_json(&report);
    } else {
        print_report(&report, ui);
    }
    Ok(i32::from(!report.failed().is_empty()))
}

fn print_report(report: &StopReport, ui: &Ui) {
    for node in &report.nodes {
        match (&node.stopped, &node.error) {
            (_, Some(error)) => println!("{} {}: {error}", ui.paint("✗", Style::Fail), node.node),
            (Some(stopped), None) => {
                let mut what = Vec::new();
                if stopped.vllm {
                    what.push("vLLM");
                }
                if stopped.ray {
                    what.push("Ray");
                }
                let said = if what.is_empty() {
                    "nothing was running".to_string()
                } else {
                    format!("stopped {}", what.join(" and "))
                };
                let forced = if stopped.forced { " (forced)" } else { "" };
                println!("{} {}: {said}{forced}", ui.paint("✓", Style::Ok), node.node);
            }
            (None, None) => {}
        }
    }
}
