//! The node's side of the cluster's metrics ([`Telemetry`]): its GPU and RDMA ports read from its
//! host tree (the node's [`HostRoot`](crate::host::HostRoot): `/`, or a fake tree under
//! `--host-root`), and the engines it serves scraped from here. The engines listen on the cluster
//! link, which the head reaches but a laptop driving the cluster over ssh may not: a node always
//! reaches its own engine, as `/health` is asked on a service's head ([`crate::serving::probe`]).

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::host::telemetry::{read, NodeTelemetry};
use crate::metrics::{render, scrape};
use crate::secret::Secret;
use crate::settings::Settings;

/// The longest scrape a head may ask for: a deadline past it is cut to it.
pub const SCRAPE_LIMIT_MAX: Duration = Duration::from_secs(60);
/// The most engines one call scrapes (a node serves a few services).
pub const ENGINES_MAX: usize = 64;

/// Read the node's telemetry, and scrape `engines` from the node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Telemetry {
    /// Engines' `/metrics` to scrape (each service this node is the head of).
    #[serde(default)]
    pub engines: Vec<EngineTarget>,
    /// Each scrape's deadline, in milliseconds (at most [`SCRAPE_LIMIT_MAX`]).
    #[serde(default)]
    pub limit_ms: u64,
}

/// One engine's `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineTarget {
    pub address: SocketAddr,
    /// The engine's API key: a bearer for this scrape only (llama-server asks it for `/metrics`
    /// when it has one; vLLM does not), never in the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TelemetryReport {
    pub host: NodeTelemetry,
    /// One per target asked, in its order.
    #[serde(default)]
    pub engines: Vec<EngineScrape>,
}

/// What one engine's `/metrics` gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineScrape {
    /// Its families, parsed within the engine limits and rendered again (Prometheus's text
    /// format: its values may be NaN or ±Inf, which JSON numbers cannot carry).
    Metrics(String),
    /// Why there is nothing: refused, silent, an HTTP status, too large, malformed.
    Failed(String),
}

pub async fn telemetry(settings: &Settings, ask: &Telemetry) -> Result<TelemetryReport> {
    let host = read(&settings.open_host_root()?);
    let limit = Duration::from_millis(ask.limit_ms).min(SCRAPE_LIMIT_MAX);
    let targets = ask.engines.iter().take(ENGINES_MAX);
    let engines = join_all(targets.map(|target| async move {
        match scrape(target.address, target.api_key.as_ref().map(Secret::expose), limit).await {
            Ok(families) => EngineScrape::Metrics(render(&families)),
            Err(error) => EngineScrape::Failed(error.to_string()),
        }
    }))
    .await;
    Ok(TelemetryReport { host, engines })
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    #[tokio::test]
    async fn reads_the_host_tree_and_scrapes_with_the_key_which_the_answer_never_holds() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("host");
        let device = root.join("sys/class/drm/card0/device");
        std::fs::create_dir_all(&device).unwrap();
        std::fs::write(device.join("gpu_busy_percent"), "42\n").unwrap();
        let settings = Settings { host_root: root, ..Settings::for_tests(dir.path()) };

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = vec![0u8; 4096];
            let read = socket.read(&mut request).await.unwrap();
            let body = "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 1\n";
            let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            let _ = socket.write_all(answer.as_bytes()).await;
            String::from_utf8_lossy(&request[..read]).into_owned()
        });
        let refused = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
        let ask = Telemetry {
            engines: vec![
                EngineTarget { address, api_key: Some(Secret::new("sk-SCRAPE-ONLY".into())) },
                EngineTarget { address: refused, api_key: None },
            ],
            limit_ms: 10_000,
        };
        let report = telemetry(&settings, &ask).await.unwrap();
        assert_eq!(report.host.cards.first().and_then(|card| card.busy_percent), Some(42));
        assert!(server.await.unwrap().contains("Authorization: Bearer sk-SCRAPE-ONLY\r\n"));
        match &report.engines[..] {
            [EngineScrape::Metrics(text), EngineScrape::Failed(why)] => {
                assert!(text.contains("llamacpp:requests_processing 1\n"), "{text}");
                assert!(why.contains("nothing listens"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        assert!(!serde_json::to_string(&report).unwrap().contains("SCRAPE-ONLY"));
    }
}
