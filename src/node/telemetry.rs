//! The node's side of the cluster's metrics and of the watch's looks ([`Telemetry`]): its boot id,
//! GPU and RDMA ports read from its host tree (the node's [`HostRoot`](crate::host::HostRoot):
//! `/`, or a fake tree under `--host-root`), and the engines it serves scraped from here, the
//! watched ones probed beside their scrape (a stopped engine costs one deadline, not two). The
//! engines listen on the cluster link, which the head reaches but a laptop driving the cluster
//! over ssh may not: a node always reaches its own engine, as `/health` is asked on a service's
//! head ([`crate::serving::probe`]).

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::future::{join_all, OptionFuture};
use serde::{Deserialize, Serialize};

use crate::bench::token_probe::token_probe;
use crate::error::Result;
use crate::host::telemetry::{read, NodeTelemetry};
use crate::metrics::{render, scrape};
use crate::secret::Secret;
use crate::serving::engine::EngineRef;
use crate::serving::record::{Role, ServingDir, ServingRecord};
use crate::settings::Settings;
use crate::watch::ProbeOutcome;

/// The longest scrape a head may ask for: a deadline past it is cut to it.
pub const SCRAPE_LIMIT_MAX: Duration = Duration::from_secs(60);

/// Read the node's telemetry, and (with `engines`) scrape the engine of every service whose
/// server runs here (its head's record: a worker's `rpc-server` or headless vLLM serves no
/// `/metrics`). The services are the node's serving records, read from their files (no exec into
/// the toolbox: a reading every two seconds stays cheap).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Telemetry {
    #[serde(default)]
    pub engines: bool,
    /// The engines' API key: a bearer for the scrapes only (llama-server asks it for `/metrics`
    /// when it has one; vLLM does not), never in the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret>,
    /// Each scrape's and probe's deadline, in milliseconds (at most [`SCRAPE_LIMIT_MAX`]).
    #[serde(default)]
    pub limit_ms: u64,
    /// The services (by name) whose engine also gets the watch's one-token completion.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probe: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TelemetryReport {
    /// `/proc/sys/kernel/random/boot_id` under the host root: another one is another boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    pub host: NodeTelemetry,
    /// One per service whose engine's server runs here, by service name.
    #[serde(default)]
    pub engines: Vec<EngineReading>,
}

/// One service's engine as its node scraped it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineReading {
    pub service: String,
    pub model: String,
    pub engine: EngineRef,
    /// Where its engine answers (the record's upstream).
    pub address: SocketAddr,
    pub scrape: EngineScrape,
    /// The probe's outcome, when it was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeOutcome>,
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
    let root = settings.open_host_root()?;
    let boot_id = root.attribute("proc/sys/kernel/random/boot_id").filter(|id| !id.is_empty());
    let host = read(&root);
    if !ask.engines {
        return Ok(TelemetryReport { boot_id, host, engines: Vec::new() });
    }
    let mut heads: Vec<ServingRecord> = ServingDir::of(&settings.paths)?
        .list()?
        .into_iter()
        .map(|found| found.record)
        .filter(|record| record.role != Role::Worker)
        .collect();
    heads.sort_by(|a, b| a.service.cmp(&b.service));
    let limit = Duration::from_millis(ask.limit_ms).min(SCRAPE_LIMIT_MAX);
    let bearer = ask.api_key.as_ref().map(Secret::expose);
    let engines = join_all(heads.into_iter().map(|record| async move {
        let address = record.upstream();
        let asked = ask.probe.contains(&record.service);
        let probe = OptionFuture::from(asked.then(|| token_probe(address, &record.served, bearer, limit)));
        let (scraped, probe) = tokio::join!(scrape(address, bearer, limit), probe);
        let scrape = match scraped {
            Ok(families) => EngineScrape::Metrics(render(&families)),
            Err(error) => EngineScrape::Failed(error.to_string()),
        };
        EngineReading { service: record.service, model: record.model, engine: record.engine, address, scrape, probe }
    }))
    .await;
    Ok(TelemetryReport { boot_id, host, engines })
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use tokio::net::TcpListener;

    use super::*;
    use crate::serving::engine::Backend;
    use crate::serving::record::ServingFiles;
    use crate::serving::service_name::ServiceName;

    /// A record of `service` on this node in `role`, its engine at 127.0.0.1:`port`.
    fn recorded(settings: &Settings, service: &str, role: Role, port: u16) {
        let record = ServingRecord::new(
            service,
            "llama",
            "/models/tiny.gguf",
            service,
            crate::serving::llama::LLAMA_CPP,
            Backend::Rpc,
            role,
            2,
            port,
            Ipv4Addr::LOCALHOST,
            Ipv4Addr::LOCALHOST,
            &ServingRecord::endpoint_of(Ipv4Addr::LOCALHOST, port),
        );
        let name = ServiceName::parse(service).unwrap();
        ServingFiles::of(&settings.paths, &name).unwrap().write(&record).unwrap();
    }

    #[tokio::test]
    async fn reads_the_host_tree_and_scrapes_each_head_with_the_key_which_the_answer_never_holds() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("host");
        let device = root.join("sys/class/drm/card0/device");
        std::fs::create_dir_all(&device).unwrap();
        std::fs::write(device.join("gpu_busy_percent"), "42\n").unwrap();
        let settings = Settings { host_root: root, ..Settings::for_tests(dir.path()) };

        let body = "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 1\n";
        let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        let (address, server) = crate::link::http_get::tests::answering(answer.into_bytes()).await;
        let refused = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
        recorded(&settings, "alpha", Role::Head, address.port());
        recorded(&settings, "beta", Role::Single, refused.port());
        recorded(&settings, "gamma", Role::Worker, 1);

        let host_only = telemetry(&settings, &Telemetry::default()).await.unwrap();
        assert_eq!(host_only.host.cards.first().and_then(|card| card.busy_percent), Some(42));
        assert!(host_only.engines.is_empty());

        let ask = Telemetry {
            engines: true,
            api_key: Some(Secret::new("sk-SCRAPE-ONLY".into())),
            limit_ms: 10_000,
            probe: Vec::new(),
        };
        let report = telemetry(&settings, &ask).await.unwrap();
        assert!(server.await.unwrap().contains("Authorization: Bearer sk-SCRAPE-ONLY\r\n"));
        let services: Vec<&str> = report.engines.iter().map(|e| e.service.as_str()).collect();
        assert_eq!(services, ["alpha", "beta"], "a worker serves no /metrics");
        match (&report.engines[0].scrape, &report.engines[1].scrape) {
            (EngineScrape::Metrics(text), EngineScrape::Failed(why)) => {
                assert!(text.contains("llamacpp:requests_processing 1\n"), "{text}");
                assert!(why.contains("nothing listens"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        assert!(!serde_json::to_string(&report).unwrap().contains("SCRAPE-ONLY"));
    }
}
