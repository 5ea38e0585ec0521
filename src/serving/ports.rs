//! The ports a service takes on a node are its own: its engine's on its head (from
//! [`ENGINE_PORTS_FROM`] up; the endpoint's port is the router's), and its listeners' on the link
//! (llama.cpp's `rpc-server` from 50052, vLLM's rendezvous from 29501): for each, the first from
//! the default up that no record on the node holds and nothing listens on. Asked in the node's
//! check, before anything starts, so several services share a node without a clash.

use std::collections::BTreeSet;
use std::net::{IpAddr, TcpListener};

use crate::error::{Error, Result};

/// Where the engines' own ports begin (8000 is the router's, by default).
pub const ENGINE_PORTS_FROM: u16 = 8001;
/// How many ports from a default are tried before giving up.
const SEARCH: u16 = 1000;

/// The first port from `from` up that is not in `held` and that nothing listens on at `address`
/// (a listener on every address takes it too).
pub fn first_free(from: u16, address: IpAddr, held: &BTreeSet<u16>) -> Result<u16> {
    let last = from.saturating_add(SEARCH - 1);
    for port in from..=last {
        if held.contains(&port) {
            continue;
        }
        match TcpListener::bind((address, port)) {
            Ok(_) => return Ok(port),
            Err(error) if error.kind() == std::io::ErrorKind::AddrInUse => continue,
            Err(error) => {
                return Err(Error::host(
                    address.to_string(),
                    format!("cannot listen on {address}:{port} to find a free port: {error}"),
                    "`strix-toolbox cluster doctor` checks the cluster link's address on every node",
                ))
            }
        }
    }
    Err(Error::host(
        address.to_string(),
        format!("no free port from {from} to {last} on {address}: records or other programs hold them all"),
        "stop a service (`strix-toolbox cluster stop NAME`) or what else listens there",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn a_port_held_by_a_record_or_a_listener_is_skipped() {
        let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
        // A listener of our own on a port the kernel chose, and the one above it held by a record.
        let taken = TcpListener::bind((loopback, 0)).unwrap();
        let port = taken.local_addr().unwrap().port();
        let held = BTreeSet::from([port.saturating_add(1)]);
        let free = first_free(port, loopback, &held).unwrap();
        assert!(free > port.saturating_add(1), "{free} after {port} (listened) and {} (held)", port + 1);
        assert_eq!(first_free(free, loopback, &BTreeSet::new()).unwrap(), free, "nothing holds it");
        let unassigned = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
        let error = first_free(8001, unassigned, &BTreeSet::new()).unwrap_err().to_string();
        assert!(error.contains("192.0.2.1:8001"), "an address this host lacks: {error}");
    }
}
