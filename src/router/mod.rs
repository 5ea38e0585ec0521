//! One OpenAI-compatible endpoint in front of several services: each request goes to the service
//! its body's `model` names, its answer streams back as the engine writes it, and a client that
//! goes away takes its engine connection with it (the engine stops generating). `GET /v1/models`
//! lists every service, `GET /health` says whether all of them answer and `GET /health/{model}`
//! whether one does, `GET /metrics` what the router counted ([`metrics`]). The keys are checked
//! here once ([`auth`]: the endpoint's own, and the keys per user with their models and rates,
//! [`keys`], [`rates`]); each engine's own key, if it has one, is the router's to send. Services
//! registered to start on demand are started when a request names them, room made for them
//! first, and stopped when idle ([`demand`]). Unknown models, wrong keys and failing engines are
//! answered in OpenAI's error shape ([`openai_error`]); every size and wait is bounded ([`Bounds`]).
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
pub mod demand;
mod health;
pub mod keys;
mod metered;
mod metrics;
mod model_field;
mod models_list;
pub mod openai_error;
mod proxy;
mod rates;
pub mod routes;
mod server;
mod service;
mod table;
mod upstream;
mod usage;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use self::bounds::Bounds;
pub use self::demand::Starter;
pub use self::keys::KeyBook;
pub use self::routes::Registered;
pub use self::table::{RoutingTable, Upstream};
/// What a [`Starter`] answers with, and what it says a service holds on a node.
pub use crate::error::Result;
/// The secret type an [`Upstream`]'s and the router's keys are (its Debug and Display redacted).
pub use crate::secret::Secret;
pub use crate::serving::room::{Held, Room};

use self::auth::{Gate, LiveGate};
use self::demand::Demand;
use self::routes::RouterFiles;
use self::service::Shared;
use self::table::LiveTable;
use crate::error::Error;
use crate::reporter::Reporter;

/// What a router serves, beyond its table: the keys per user, the services registered to start
/// on demand and what starts them, the routes file they come from, its bounds.
pub struct Setup {
    pub table: RoutingTable,
    /// The endpoint's own key: every model, no limit.
    pub api_key: Option<Secret>,
    pub keys: KeyBook,
    pub registered: Vec<Registered>,
    /// What starts and stops the registered services (None: they are listed, never started).
    pub starter: Option<Arc<dyn Starter>>,
    /// The routes file the router follows (None: a table given in code).
    pub files: Option<RouterFiles>,
    pub bounds: Bounds,
    pub reporter: Arc<dyn Reporter>,
}

impl Setup {
    /// `table` with `api_key`, nothing else.
    pub fn of(table: RoutingTable, api_key: Option<Secret>, reporter: Arc<dyn Reporter>) -> Setup {
        Setup {
            table,
            api_key,
            keys: KeyBook::default(),
            registered: Vec::new(),
            starter: None,
            files: None,
            bounds: Bounds::default(),
            reporter,
        }
    }
}

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
        Router::start_with(bind, Setup { bounds, ..Setup::of(table, api_key, reporter) }).await
    }

    /// Listen on `bind` and serve what `setup` says; the services it registers that stay idle
    /// past their `idle_seconds` are stopped from then on.
    pub async fn start_with(bind: SocketAddr, setup: Setup) -> Result<Router> {
        let listener = TcpListener::bind(bind).await.map_err(|error| cannot_listen(bind, &error))?;
        let address = listener.local_addr().map_err(|error| cannot_listen(bind, &error))?;
        let demand = Arc::new(Demand::new(setup.starter));
        demand.update(&setup.registered);
        let shared = Arc::new(Shared {
            table: LiveTable::new(setup.table),
            gate: LiveGate::new(Gate::new(setup.api_key.as_ref(), &setup.keys)),
            api_key: setup.api_key,
            demand,
            rates: Default::default(),
            metrics: Default::default(),
            bounds: setup.bounds,
            reporter: setup.reporter,
            files: setup.files,
            began: tokio::time::Instant::now(),
        });
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(demand::stop_the_idle(shared.clone(), stopped.clone()));
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

    /// Take `keys` (with the endpoint's own key) from the next request on; each key's rates go
    /// on counting.
    pub fn update_keys(&self, keys: &KeyBook) {
        self.shared.gate.replace(Gate::new(self.shared.api_key.as_ref(), keys));
    }

    /// The routes file read again, served from the next request on when it changed since `seen`
    /// (its bytes, updated): what it says now, or None when unchanged.
    pub async fn reload(&self, seen: &mut Option<Vec<u8>>) -> Result<Option<routes::Routes>> {
        self.shared.reload(seen).await
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
