//! The router (src/router) by itself, for scripts/bench/router-overhead.sh until the binary has a
//! command that starts it with the services: routes each NAME to the engine at HOST:PORT (no key
//! at the router, none to the engines), prints the address it listens on, and serves until its
//! stdin closes.
//!
//! Usage: cargo run --release --example router -- BIND NAME=HOST:PORT...

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;

use strix_toolbox::reporter::Silent;
use strix_toolbox::router::{Router, RoutingTable, Upstream};

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: router BIND NAME=HOST:PORT...";
    let bind: SocketAddr = args.next().and_then(|bind| bind.parse().ok()).unwrap_or_else(|| exit(usage));
    let table: RoutingTable = args
        .map(|service| {
            let (name, address) = service.split_once('=').unwrap_or_else(|| exit(usage));
            (name.to_string(), Upstream::new(address.parse().unwrap_or_else(|_| exit(usage))))
        })
        .collect();
    let router =
        Router::start(bind, table, None, Arc::new(Silent)).await.unwrap_or_else(|error| exit(&error.to_string()));
    println!("{}", router.address());
    let _ = std::io::stdout().flush();
    let _ = tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new())).await;
    router.shutdown().await;
}

fn exit(message: &str) -> ! {
    eprintln!("{message}");
    std::process::exit(2)
}
