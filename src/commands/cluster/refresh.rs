//! `cluster refresh`: every node to one image digest, all or nothing, the image spread from the
//! head; with a canary entry, the canary (`commands::canary`).

use std::time::Duration;

use super::cluster_args_file;
use crate::cli::{ClusterArgs, ClusterRefreshArgs, SpreadMode};
use crate::cluster::refresh::{refresh_nodes, ClusterOutcome, ClusterRefreshReport};
use crate::cluster::spread::{SpreadReport, SpreadSettings};
use crate::cluster::{with_our_nodes, ClusterSettings};
use crate::error::Result;
use crate::image::reference::ImageRef;
use crate::output::{Output, Render, Style};
use crate::reporter::Bytes;
use crate::settings::Settings;

pub(super) async fn run(
    cluster: &ClusterSettings,
    args: &ClusterRefreshArgs,
    cluster_args: &ClusterArgs,
    settings: &Settings,
    out: &Output,
) -> Result<i32> {
    // A busy node fails the cluster refresh at once (apply::lock says why).
    let request = crate::commands::refresh::request(&args.options, None, Duration::ZERO, out)?;
    ImageRef::parse(&args.spread_registry_image)?;
    let spread = SpreadSettings {
        enabled: args.spread == SpreadMode::On,
        port: args.spread_port,
        relay_port: args.spread_relay_port,
        registry_image: args.spread_registry_image.clone(),
    };
    if let Some(entry) = crate::commands::canary::entry(args, cluster_args_file(cluster_args, settings)?)? {
        return with_our_nodes(cluster, "nothing was changed", async |nodes| {
            crate::commands::canary::run(args, &entry, nodes, &request, &spread, &settings.paths, out).await
        })
        .await;
    }
    let reporter = out.reporter();
    let refreshed = with_our_nodes(cluster, "nothing was changed", async |nodes| {
        refresh_nodes(nodes, &request, &spread, reporter.as_ref()).await
    })
    .await?;
    out.report(&refreshed);
    Ok(0)
}

impl Render for ClusterRefreshReport {
    fn render(&self, out: &Output) {
        for node in &self.nodes {
            for warning in &node.warnings {
                out.warn(&format!("{}: {warning}", node.node));
            }
        }
        match self.outcome {
            ClusterOutcome::DryRun => {
                for node in &self.nodes {
                    out.line(&format!("{} {}", out.paint(&node.node, Style::Bold), node.report.action.as_str()));
                    for (index, step) in node.report.steps.iter().enumerate() {
                        out.line(&format!("  {}. {}", index + 1, step.description));
                    }
                }
                out.line("dry run; nothing changed");
            }
            ClusterOutcome::Unchanged => out.line(&format!(
                "{} every node already runs {} ({})",
                out.paint("✓", Style::Ok),
                self.pinned,
                self.nodes.first().map_or("-", |n| n.report.reason.as_str())
            )),
            ClusterOutcome::Refreshed => {
                for node in &self.nodes {
                    out.line(&format!(
                        "{} {}: {} ({})",
                        out.paint("✓", Style::Ok),
                        node.node,
                        node.report.action.as_str(),
                        node.report.reason
                    ));
                }
                out.line(&format!(
                    "every node runs {} [{}]",
                    self.pinned,
                    self.nodes.first().and_then(|n| n.report.pin.as_deref()).unwrap_or("unpinned")
                ));
            }
        }
        if let Some(spread) = &self.spread {
            out.line(&spread_line(spread, self.nodes.first().map_or("the head", |n| n.node.as_str())));
        }
    }
}

/// How the image reached the nodes: `spread: node1 fetched 1.2 GiB of 1.2 GiB from upstream into
/// 192.168.100.1:5443; over the link: node1, node2; from upstream: node3`.
fn spread_line(spread: &SpreadReport, head: &str) -> String {
    let Some(registry) = &spread.registry else {
        return "spread: every node had the image; nothing was fetched".to_string();
    };
    let mut line = format!(
        "spread: {head} fetched {} of {} from upstream into {registry}",
        Bytes(spread.fetched),
        Bytes(spread.size)
    );
    for (what, nodes) in
        [("over the link", &spread.from_head), ("from upstream", &spread.from_upstream), ("had it", &spread.had_it)]
    {
        if !nodes.is_empty() {
            line.push_str(&format!("; {what}: {}", nodes.join(", ")));
        }
    }
    if let Some(disk) = spread.disk_bytes {
        line.push_str(&format!("; its registry holds {}", Bytes(disk)));
    }
    line
}
