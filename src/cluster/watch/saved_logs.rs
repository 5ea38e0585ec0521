//! At a fault, before anything is stopped: each node's engine log tails, saved on the machine
//! that drives the cluster as `watch/SERVICE/TIME-STATE.log`, headed by the time and the reason
//! (a relaunch starts new logs; these say what went wrong). Read through the nodes' `ServeLogs`,
//! as `cluster logs` reads them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use futures_util::future::join_all;

use super::dir::unwritable;
use crate::error::Result;
use crate::node::{Node, NodeCalls};
use crate::serving::logs::ServeLogs;
use crate::watch::State;

/// How many of each log's last lines are kept.
pub const TAIL_LINES: usize = 200;

/// Save the tails of `service`'s logs on `on` into `service_dir`; the file written.
pub async fn save_log_tails(
    nodes: &[&dyn Node],
    on: &[String],
    service: &str,
    state: State,
    reason: &str,
    service_dir: &Path,
) -> Result<PathBuf> {
    let now = chrono::Utc::now();
    let asks = on.iter().map(|name| async move {
        let node = nodes.iter().find(|node| node.name() == name);
        let ask = ServeLogs { service: Some(service.to_string()), lines: TAIL_LINES, seen: Vec::new() };
        let tails = match node {
            Some(node) => node.call(ask).await.map_err(|e| e.to_string()),
            None => Err("it does not answer".to_string()),
        };
        (name, tails)
    });
    let mut text = format!(
        "# strix-toolbox cluster watch: {service} at {}\n# {}: {reason}\n",
        now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        state.name()
    );
    for (node, tails) in join_all(asks).await {
        match tails {
            Ok(tails) if tails.is_empty() => {
                let _ = writeln!(text, "\n## {node}: no log of {service}");
            }
            Ok(tails) => {
                for tail in tails {
                    let _ = writeln!(text, "\n## {node}: {} (its last {} lines)", tail.file, tail.lines.len());
                    for line in &tail.lines {
                        let _ = writeln!(text, "{line}");
                    }
                }
            }
            Err(why) => {
                let _ = writeln!(text, "\n## {node}: its logs could not be read: {why}");
            }
        }
    }
    let path = service_dir.join(format!("{}-{}.log", now.format("%Y%m%dT%H%M%S%.3fZ"), state.name()));
    std::fs::write(&path, text).map_err(|e| unwritable(&path, &e))?;
    Ok(path)
}
