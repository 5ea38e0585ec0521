//! One OpenAI-compatible endpoint in front of several services: each request goes to the service
//! its body's `model` names, its answer streams back as the engine writes it, and a client that
//! goes away takes its engine connection with it (the engine stops generating). `GET /v1/models`
//! lists every service, `GET /health` says whether all of them answer and `GET /health/{model}`
//! whether one does. The endpoint's key is checked here once; each engine's own key, if it has
//! one, is the router's to send. Unknown models, wrong keys and failing engines are answered in
//! OpenAI's error shape ([`openai_error`]); every size and wait is bounded ([`Bounds`]).
//!
//! The table (service name → engine address and key) is replaced whole while serving
//! ([`Router::update`]); requests already on their way keep the upstream they were sent to.
//!
//! ```ignore
//! let table = RoutingTable::new().with("coder", Upstream::new("127.0.0.1:8001".parse()?));
//! let router = Router::start("0.0.0.0:8000".parse()?, table, Some(key), reporter).await?;
//! router.update(table_with_another_service);
//! router.shutdown().await;
//! ```
//!
//! On a cluster the router runs on the cluster's head as a process of its own ([`daemon`]: the
//! hidden `strix-toolbox router`), its table the [`routes`] file the launches and stops write.
//!
//! The module is public for the integration tests (tests/testsuite/router.rs), which run it
//! against real `llama-server`s; nothing here is a stable API beyond this crate.

mod auth;
mod bounds;
pub mod daemon;
mod health;
mod model_field;
mod models_list;
pub mod openai_error;
mod proxy;
pub mod routes;
mod server;
mod service;
mod table;
mod upstream;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use self::bounds::Bounds;
pub use self::table::{RoutingTable, Upstream};
/// The secret type an [`Upstream`]'s and the router's keys are (its Debug and Display redacted).
pub use crate::secret::Secret;

use self::auth::ApiKey;
use self::service::Shared;
use self::table::LiveTable;
use crate::error::{Error, Result};
use crate::reporter::Reporter;

/// A running router.
pub struct Router {
    address: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    serving: JoinHandle<()>,
}

impl Router {
    /// Listen on `bind` (port 0: any free one) and serve `table`, wanting `api_key` as every
    /// client's bearer token when given; warnings (an engine that failed a request) go to
    /// `reporter`, never with a key or a request's headers. Default [`Bounds`].
    pub async fn start(
        bind: SocketAddr,
        table: RoutingTable,
        api_key: Option<Secret>,
        reporter: Arc<dyn Reporter>,
    ) -> Result<Router> {
        Router::start_bounded(bind, table, api_key, reporter, Bounds::default()).await
    }

    /// [`Router::start`] with other bounds.
    pub async fn start_bounded(
        bind: SocketAddr,
        table: RoutingTable,
        api_key: Option<Secret>,
        reporter: Arc<dyn Reporter>,
        bounds: Bounds,
    ) -> Result<Router> {
        let listener = TcpListener::bind(bind).await.map_err(|error| cannot_listen(bind, &error))?;
        let address = listener.local_addr().map_err(|error| cannot_listen(bind, &error))?;
        let shared = Arc::new(Shared {
            table: LiveTable::new(table),
            api_key: api_key.as_ref().map(ApiKey::new),
            bounds,
            reporter,
        });
        let (stop, stopped) = watch::channel(false);
        let serving = tokio::spawn(server::serve(listener, shared.clone(), stopped));
        Ok(Router { address, shared, stop, serving })
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Serve `table` from the next request on.
    pub fn update(&self, table: RoutingTable) {
        self.shared.table.replace(table);
    }

    /// The table it serves now.
    pub fn table(&self) -> RoutingTable {
        (*self.shared.table.snapshot()).clone()
    }

    /// Stop listening, let the answers under way finish for up to the bounds' `shutdown_grace`,
    /// cut the rest, and return once every connection is closed.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        let _ = (&mut self.serving).await;
    }
}

impl Drop for Router {
    /// A router dropped without `shutdown` still stops, by itself, as `shutdown` would.
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

fn cannot_listen(bind: SocketAddr, error: &std::io::Error) -> Error {
    Error::host(
        format!("port {}", bind.port()),
        format!("the router cannot listen on {bind}: {error}"),
        format!("stop what listens on port {} there, or choose another port", bind.port()),
    )
}
