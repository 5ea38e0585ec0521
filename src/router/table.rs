//! What the router routes by: each service's name (the model id its clients send) and where its
//! engine answers. The running router holds one table at a time; [`LiveTable::replace`] swaps it
//! whole, and a request takes the table current when it arrives, so a swap never touches a request
//! already on its way (a stream to a service that stays keeps running; so does one to a service
//! that went, until its engine stops).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use crate::secret::Secret;

/// Where one service's engine answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    pub address: SocketAddr,
    /// The engine's own API key (`--api-key`), sent as its bearer token; None when it has none.
    pub api_key: Option<Secret>,
}

impl Upstream {
    /// An engine that wants no key.
    pub fn new(address: SocketAddr) -> Upstream {
        Upstream { address, api_key: None }
    }

    /// An engine that wants `key` as its bearer token.
    pub fn with_key(address: SocketAddr, key: Secret) -> Upstream {
        Upstream { address, api_key: Some(key) }
    }
}

/// Service name → upstream. The name is what clients send as `model`, and what the engine must
/// answer to itself (vLLM's `--served-model-name`, llama-server's `--alias`): the router forwards
/// the request's bytes as they came.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoutingTable {
    services: BTreeMap<String, Upstream>,
}

impl RoutingTable {
    pub fn new() -> RoutingTable {
        RoutingTable::default()
    }

    /// Route `name` to `upstream`; the upstream it had before, if any.
    pub fn insert(&mut self, name: impl Into<String>, upstream: Upstream) -> Option<Upstream> {
        self.services.insert(name.into(), upstream)
    }

    /// This table with `name` routed to `upstream`.
    pub fn with(mut self, name: impl Into<String>, upstream: Upstream) -> RoutingTable {
        self.insert(name, upstream);
        self
    }

    pub fn remove(&mut self, name: &str) -> Option<Upstream> {
        self.services.remove(name)
    }

    pub fn get(&self, name: &str) -> Option<&Upstream> {
        self.services.get(name)
    }

    /// The services' names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.services.keys().map(String::as_str).collect()
    }

    /// Every service and its upstream, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Upstream)> {
        self.services.iter().map(|(name, upstream)| (name.as_str(), upstream))
    }

    pub fn is_empty(&self) -> bool {
        self.services.is_empty()
    }
}

impl<Name: Into<String>> FromIterator<(Name, Upstream)> for RoutingTable {
    fn from_iter<Services: IntoIterator<Item = (Name, Upstream)>>(services: Services) -> RoutingTable {
        RoutingTable { services: services.into_iter().map(|(name, upstream)| (name.into(), upstream)).collect() }
    }
}

/// The table the running router reads: each request takes a snapshot, `update` replaces it.
/// Who changes it from what it read (the routes file, a start or stop on demand) holds
/// [`LiveTable::writing`] meanwhile, so a table read from an older file never undoes a newer change.
#[derive(Debug)]
pub(crate) struct LiveTable {
    table: RwLock<Arc<RoutingTable>>,
    writing: tokio::sync::Mutex<()>,
}

impl LiveTable {
    pub fn new(table: RoutingTable) -> LiveTable {
        LiveTable { table: RwLock::new(Arc::new(table)), writing: tokio::sync::Mutex::new(()) }
    }

    /// The table as it is now. A writer that panicked cannot have left half a table (the swap is
    /// one assignment), so a poisoned lock is read as it stands.
    pub fn snapshot(&self) -> Arc<RoutingTable> {
        self.table.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    pub fn replace(&self, table: RoutingTable) {
        *self.table.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(table);
    }

    /// One change at a time: held from the read a change is made of to its `replace`.
    pub async fn writing(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.writing.lock().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_taken_before_a_replace_keeps_its_services() {
        let address: SocketAddr = "127.0.0.1:8001".parse().unwrap();
        let live = LiveTable::new([("a", Upstream::new(address)), ("b", Upstream::new(address))].into_iter().collect());
        let before = live.snapshot();
        let mut next = (*before).clone();
        assert!(next.remove("a").is_some());
        live.replace(next);
        assert_eq!(before.names(), ["a", "b"]);
        assert_eq!(live.snapshot().names(), ["b"]);
    }

    #[test]
    fn an_upstreams_key_never_shows_in_its_debug() {
        let upstream = Upstream::with_key("127.0.0.1:1".parse().unwrap(), Secret::new("sk-engine".into()));
        let table = RoutingTable::new().with("m", upstream);
        assert!(!format!("{table:?}").contains("sk-engine"));
    }
}
