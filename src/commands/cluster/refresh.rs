//! `cluster refresh`: every node to one image digest, all or nothing, the image spread from the
//! head; with a canary entry, the canary (`commands::canary`).

use crate::commands::arg_values::{bounded, MAX_SECONDS};
use crate::commands::refresh::RefreshOptions;
use clap::{Args, ValueEnum};
use std::time::Duration;

use super::cluster_args_file;
use crate::cluster::refresh::{refresh_nodes, ClusterOutcome, ClusterRefreshReport};
use crate::cluster::spread::{SpreadReport, SpreadSettings};
use crate::cluster::{with_our_nodes, ClusterSettings};
use crate::commands::cluster::ClusterArgs;
use crate::error::Result;
use crate::image::reference::ImageRef;
use crate::output::{Output, Render, Style};
use crate::reporter::Bytes;
use crate::settings::Settings;

/// `cluster refresh`: what a refresh makes, and how the image reaches the nodes.
#[derive(Debug, Clone, Args)]
pub struct ClusterRefreshArgs {
    #[command(flatten)]
    pub options: RefreshOptions,

    /// Spread the image: the head fetches it from upstream once into a registry it runs on the
    /// cluster link, and every node pulls it from there (on for 2+ nodes). off: every node pulls
    /// from upstream itself.
    #[arg(long, value_enum, value_name = "on|off", default_value_t = SpreadMode::On)]
    pub spread: SpreadMode,

    /// The port of the head's registry, on its cluster-link address.
    #[arg(
        long,
        env = "STRIX_SPREAD_PORT",
        value_name = "PORT",
        default_value_t = crate::cluster::spread::DEFAULT_PORT,
        value_parser = bounded::<u16>(1, 65535)
    )]
    pub spread_port: u16,

    /// The port of the head's relay, on the same address: the nodes pull from it while the head
    /// is still fetching the image.
    #[arg(
        long,
        env = "STRIX_SPREAD_RELAY_PORT",
        value_name = "PORT",
        default_value_t = crate::cluster::spread::DEFAULT_RELAY_PORT,
        value_parser = bounded::<u16>(1, 65535)
    )]
    pub spread_relay_port: u16,

    /// The registry image the head runs (the CNCF distribution registry).
    #[arg(
        long,
        env = "STRIX_SPREAD_REGISTRY_IMAGE",
        value_name = "REF",
        default_value = crate::cluster::spread::DEFAULT_REGISTRY_IMAGE
    )]
    pub spread_registry_image: String,

    /// Prove the new image before keeping it: after the swap, launch MODEL on every node, run the
    /// gate and a short bench; keep the image only if the gate passes and output tokens/s is at
    /// least --min-ratio of the last accepted result on the previous image, else every node goes
    /// back to the previous image and what served before serves again [default: the cluster
    /// file's `canary.model`].
    #[arg(long, value_name = "MODEL")]
    pub canary: Option<String>,

    /// The canary's least output tokens/s, as a share of the previous image's [default: for the
    /// cluster file's canary, its `min_ratio`; else 0.9].
    #[arg(long, value_name = "RATIO")]
    pub min_ratio: Option<f64>,

    /// The endpoint's port on the cluster's head, the canary's model served there [default: the
    /// running router's, else 8000].
    #[arg(long, value_name = "PORT", value_parser = bounded::<u16>(1, 65535))]
    pub canary_port: Option<u16>,

    /// Seconds the canary's model may take to serve.
    #[arg(long, value_name = "SECONDS", default_value_t = 1800, value_parser = bounded::<u64>(1, MAX_SECONDS))]
    pub canary_timeout: u64,
}

/// `--spread`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SpreadMode {
    On,
    Off,
}

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
