//! `cluster metrics`: the cluster's metrics in Prometheus's text format, printed once, or with
//! `--listen` served (read-only, bounded: [`crate::metrics::endpoint`]) until Ctrl-C, the cluster
//! read anew at each scrape ([`MetricsNodes`]: a node that could not be reached is tried again).

use clap::Args;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::cluster::metrics::MetricsAsk;
use crate::cluster::metrics_nodes::MetricsNodes;
use crate::cluster::ClusterSettings;
use crate::commands::secrets::api_key;
use crate::error::{Error, Result};
use crate::metrics::endpoint::{listen_address, serve};
use crate::node::telemetry::SCRAPE_LIMIT_MAX;
use crate::output::Output;
use crate::watch::duration::parse_duration;

/// How `cluster metrics` reads and shows the cluster.
#[derive(Debug, Clone, Args)]
pub struct ClusterMetricsArgs {
    /// Serve the metrics at ADDR:PORT (or PORT, on 127.0.0.1; --listen alone: 127.0.0.1:9464),
    /// `GET /metrics` only, the cluster read anew at each scrape, at most 8 connections at once,
    /// until Ctrl-C. Without it they are printed once.
    #[arg(long, value_name = "ADDR:PORT", num_args = 0..=1, default_missing_value = "9464")]
    pub listen: Option<String>,

    /// Each engine's scrape deadline: seconds, or a number with its unit (5, 5s, 1m).
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub scrape_timeout: String,
}

pub(super) async fn run(cluster: &ClusterSettings, args: &ClusterMetricsArgs, out: &Output) -> Result<i32> {
    let ask =
        MetricsAsk { api_key: api_key(None)?, scrape_limit: scrape_limit(&args.scrape_timeout)?, probe: Vec::new() };
    let listen = args.listen.as_deref().map(|text| listen_address(text).map_err(as_listen_flag)).transpose()?;
    let Some(address) = listen else {
        let nodes = MetricsNodes::new(cluster);
        let reading = nodes.read(&ask).await;
        nodes.close().await;
        out.write(reading.exposition().as_bytes());
        return Ok(i32::from(reading.nodes.iter().any(|seen| seen.answer.is_err())));
    };
    let listener = TcpListener::bind(address).await.map_err(|e| {
        Error::host(
            address.to_string(),
            format!("cannot listen on {address}: {e}"),
            "choose another address or port with --listen ADDR:PORT",
        )
    })?;
    out.status(&format!("serving the cluster's metrics at http://{address}/metrics (Ctrl-C ends it)"));
    let nodes = Arc::new(MetricsNodes::new(cluster));
    let shared = nodes.clone();
    let provider = move || {
        let (nodes, ask) = (shared.clone(), ask.clone());
        async move { Ok(nodes.read(&ask).await.exposition()) }
    };
    let (stop, stopped) = oneshot::channel();
    let server = tokio::spawn(serve(listener, stopped, provider));
    let _ = tokio::signal::ctrl_c().await;
    let _ = stop.send(());
    let _ = server.await;
    // A scrape still under way keeps its share of the nodes; their connections then end with it.
    if let Ok(nodes) = Arc::try_unwrap(nodes) {
        nodes.close().await;
    }
    Ok(130)
}

/// `--scrape-timeout`, within 1 s and what a node accepts ([`SCRAPE_LIMIT_MAX`]).
pub(super) fn scrape_limit(text: &str) -> Result<Duration> {
    let limit = parse_duration("--scrape-timeout", text)?;
    if limit.is_zero() || limit > SCRAPE_LIMIT_MAX {
        return Err(Error::Usage(format!("--scrape-timeout {text}: between 1s and {}s", SCRAPE_LIMIT_MAX.as_secs())));
    }
    Ok(limit)
}

/// The endpoint's message names `--metrics` (the watch's flag); this command's is `--listen`.
fn as_listen_flag(error: Error) -> Error {
    match error {
        Error::Usage(message) => Error::Usage(message.replacen("--metrics", "--listen", 1)),
        other => other,
    }
}
