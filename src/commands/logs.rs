//! `logs [NAME]` on this node, `cluster logs [NAME]` on every node: each line with its node and
//! file. Without NAME: the one service recorded; with several, a usage error listing them; with
//! none, every log there is (each line with its service too).

use crate::cluster::logs::{LogCursor, FOLLOW_INTERVAL};
use crate::cluster::stop::{names, services_on};
use crate::commands::arg_values::{bounded, MAX_LINES};
use crate::error::Result;
use crate::node::Node;
use crate::output::{Output, Style};
use crate::serving::service_name::{the_only_one, ServiceName};
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct LogsArgs {
    /// The service [default: the one recorded; with several, name one].
    #[arg(value_name = "NAME")]
    pub name: Option<ServiceName>,

    /// Keep printing what is added (until Ctrl-C).
    #[arg(long, short)]
    pub follow: bool,

    /// How many of each log's last lines.
    #[arg(long, short = 'n', default_value_t = 50, value_parser = bounded::<usize>(0, MAX_LINES))]
    pub lines: usize,
}

/// Print the logs of `service` (see the module for none) and, with `follow`, what is added until
/// Ctrl-C. Exit 1 when a node could not say, 130 when Ctrl-C ended a follow.
pub async fn run(
    service: Option<&ServiceName>,
    nodes: &[&dyn Node],
    lines: usize,
    follow: bool,
    out: &Output,
) -> Result<i32> {
    let recorded = names(&services_on(nodes).await);
    let service = match service {
        Some(name) => Some(name.to_string()),
        None => {
            let names: Vec<&str> = recorded.iter().map(String::as_str).collect();
            the_only_one(&names, "strix-toolbox cluster logs NAME")?.map(str::to_string)
        }
    };
    let mut cursor = LogCursor::default();
    let mut failed = false;
    let mut first_round = true;
    loop {
        for node in cursor.read(nodes, service.as_deref(), lines).await {
            match node.tails {
                Ok(tails) if tails.is_empty() && first_round => {
                    out.status(&format!("{}: no logs (nothing was launched there)", node.node));
                }
                Ok(tails) => {
                    for tail in tails {
                        let whose = if service.is_some() { String::new() } else { format!("{} ", tail.service) };
                        let prefix = out.paint(&format!("{} {whose}{}", node.node, tail.file), Style::Dim);
                        for line in &tail.lines {
                            if out.json() {
                                // One object per line, so a reader can follow a stream of them.
                                let entry = serde_json::json!({
                                    "node": node.node, "service": tail.service, "file": tail.file, "line": line
                                });
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
