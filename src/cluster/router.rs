//! The cluster's router, from the head's side: one per cluster, on the cluster's head (the first
//! node of the cluster file, whatever services run there), at the endpoint's port. A launch adds
//! its service's route once the service is proven (the router starts with the first route); a
//! stop removes it (the router exits with the last). What the node does is `node::router`.

use std::net::{Ipv4Addr, SocketAddr};

use crate::error::Result;
use crate::node::router::{RouterLook, RouterState, RouterUpdate};
use crate::node::{Node, NodeCalls};
use crate::router::routes::{Registered, Route, RouterProcess};
use crate::secret::Secret;
use crate::serving::record::ServingRecord;

/// The endpoint's port when the launch names none and no router runs.
pub const DEFAULT_PORT: u16 = 8000;

/// Where the router listens: where the running one does; else `host` (every address when none)
/// and `port` ([`DEFAULT_PORT`] when none).
pub fn listen_address(running: Option<&RouterProcess>, host: Option<Ipv4Addr>, port: Option<u16>) -> SocketAddr {
    match running {
        Some(process) => process.listen,
        None => SocketAddr::from((host.unwrap_or(Ipv4Addr::UNSPECIFIED), port.unwrap_or(DEFAULT_PORT))),
    }
}

/// The endpoint clients use: `http://ADDRESS:PORT/v1`, at the router's address, or at the
/// cluster head's link address (the loopback without one) when it listens on every address.
pub fn endpoint(listen: SocketAddr, head_link: Ipv4Addr) -> String {
    let address = match listen.ip() {
        std::net::IpAddr::V4(address) if !address.is_unspecified() => address,
        _ => head_link,
    };
    ServingRecord::endpoint_of(address, listen.port())
}

/// What the router serves, asked on the cluster's head; `api_key` is compared with its own.
pub async fn look(head: &dyn Node, api_key: Option<&Secret>, health: bool) -> Result<RouterState> {
    head.call(RouterLook { api_key: api_key.cloned(), health }).await
}

/// `route` added, the router started on `listen` with `api_key` when none runs.
pub async fn add_route(
    head: &dyn Node,
    route: Route,
    listen: SocketAddr,
    api_key: Option<&Secret>,
) -> Result<RouterState> {
    let update =
        RouterUpdate { add: Some(route), listen: Some(listen), api_key: api_key.cloned(), ..Default::default() };
    head.call(update).await
}

/// `registered` on the router (started on `listen` with `api_key` when none runs): it starts the
/// service when a request names it.
pub async fn register(
    head: &dyn Node,
    registered: Registered,
    listen: SocketAddr,
    api_key: Option<&Secret>,
) -> Result<RouterState> {
    let update = RouterUpdate {
        register: Some(registered),
        listen: Some(listen),
        api_key: api_key.cloned(),
        ..Default::default()
    };
    head.call(update).await
}

/// The routes and registrations of `names` removed (every one: `all`); the router exits with the
/// last.
pub async fn remove_routes(head: &dyn Node, names: &[String], all: bool) -> Result<RouterState> {
    let update = RouterUpdate { remove: names.to_vec(), remove_all: all, ..Default::default() };
    head.call(update).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_the_routers_address_or_the_heads_link() {
        let link = Ipv4Addr::new(192, 168, 2, 1);
        assert_eq!(listen_address(None, None, None).to_string(), "0.0.0.0:8000");
        assert_eq!(listen_address(None, Some(Ipv4Addr::LOCALHOST), Some(9000)).to_string(), "127.0.0.1:9000");
        let running = RouterProcess { pid: 1, listen: "0.0.0.0:8100".parse().unwrap(), started: String::new() };
        assert_eq!(listen_address(Some(&running), None, Some(9000)), running.listen, "the running router's");
        assert_eq!(endpoint(running.listen, link), "http://192.168.2.1:8100/v1");
        assert_eq!(endpoint("10.0.0.5:8000".parse().unwrap(), link), "http://10.0.0.5:8000/v1");
    }
}
