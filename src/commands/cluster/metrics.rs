//! `cluster metrics`: the cluster's metrics in Prometheus's text format, printed once, or with
//! `--listen` served (read-only, bounded: [`crate::metrics::endpoint`]) until Ctrl-C, the cluster
//! read anew at each scrape over the ssh sessions opened at the start.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::cli::ClusterMetricsArgs;
use crate::cluster::metrics::{read_cluster, MetricsAsk};
use crate::cluster::{close_all, connect_all, ClusterSettings};
use crate::commands::secrets::api_key;
use crate::error::{Error, Result};
use crate::metrics::endpoint::{listen_address, serve};
use crate::node::remote::RemoteNode;
use crate::node::telemetry::SCRAPE_LIMIT_MAX;
use crate::node::Node;
use crate::output::Output;
use crate::watch::duration::parse_duration;

pub(super) async fn run(cluster: &ClusterSettings, args: &ClusterMetricsArgs, out: &Output) -> Result<i32> {
    let ask = MetricsAsk { api_key: api_key(None)?, scrape_limit: scrape_limit(&args.scrape_timeout)? };
    let listen = args.listen.as_deref().map(|text| listen_address(text).map_err(as_listen_flag)).transpose()?;
    let (nodes, unreachable) = connect_all(cluster).await;
    let unreachable: Vec<(String, String)> =
        unreachable.into_iter().map(|(node, error)| (node, error.to_string())).collect();
    let code = match listen {
        None => {
            let reading = read_cluster(&as_nodes(&nodes), &unreachable, &ask).await;
            out.write(reading.exposition().as_bytes());
            let up = reading.nodes.iter().all(|seen| seen.answer.is_ok());
            Ok(i32::from(!up))
        }
        Some(address) => {
            let listener = TcpListener::bind(address).await.map_err(|e| {
                Error::host(
                    address.to_string(),
                    format!("cannot listen on {address}: {e}"),
                    "choose another address or port with --listen ADDR:PORT",
                )
            })?;
            out.status(&format!("serving the cluster's metrics at http://{address}/metrics (Ctrl-C ends it)"));
            let nodes = Arc::new(nodes);
            let (shared, unreachable) = (nodes.clone(), Arc::new(unreachable));
            let provider = move || {
                let (nodes, unreachable, ask) = (shared.clone(), unreachable.clone(), ask.clone());
                async move { read_cluster(&as_nodes(&nodes), &unreachable, &ask).await.exposition() }
            };
            let (stop, stopped) = oneshot::channel();
            let server = tokio::spawn(serve(listener, stopped, provider));
            let _ = tokio::signal::ctrl_c().await;
            let _ = stop.send(());
            let _ = server.await;
            let nodes = Arc::try_unwrap(nodes).unwrap_or_default();
            close_all(nodes).await;
            return Ok(130);
        }
    };
    close_all(nodes).await;
    code
}

/// `--scrape-timeout`, within 1 s and what a node accepts ([`SCRAPE_LIMIT_MAX`]).
pub(super) fn scrape_limit(text: &str) -> Result<Duration> {
    let limit = parse_duration("--scrape-timeout", text)?;
    if limit.is_zero() || limit > SCRAPE_LIMIT_MAX {
        return Err(Error::Usage(format!("--scrape-timeout {text}: between 1s and {}s", SCRAPE_LIMIT_MAX.as_secs())));
    }
    Ok(limit)
}

fn as_nodes(nodes: &[RemoteNode]) -> Vec<&dyn Node> {
    nodes.iter().map(|node| node as &dyn Node).collect()
}

/// The endpoint's message names `--metrics` (the watch's flag); this command's is `--listen`.
fn as_listen_flag(error: Error) -> Error {
    match error {
        Error::Usage(message) => Error::Usage(message.replacen("--metrics", "--listen", 1)),
        other => other,
    }
}
