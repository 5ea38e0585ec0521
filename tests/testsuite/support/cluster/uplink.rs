//! The cluster's way out: inside a node, 127.0.0.1 is the node's own loopback, so a service on
//! the machine's loopback (the registry, a Hub stand-in) is not there. [`ClusterUplink::forward`]
//! puts it back under the same name, through the one [`Uplink`] every node shares: a route on the
//! test side of each node's management veth, and in the node a socat relay listening on
//! 127.0.0.1:PORT that connects to that route (TESTBED.md).

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::TestNode;
use crate::support::netns;
use crate::support::uplink::Uplink;
use crate::support::{stop_child, wait_until};

/// How long a relay may take to listen.
const RELAY_START_LIMIT: Duration = Duration::from_secs(5);

/// Counters, rate limit and cut-off come from [`Uplink`] (this derefs to it).
pub struct ClusterUplink {
    forwarder: Uplink,
    gateways: Vec<Gateway>,
    relays: Mutex<Relays>,
    logs: PathBuf,
}

/// What `forward` started.
#[derive(Default)]
struct Relays {
    ports: BTreeSet<u16>,
    /// socat, one per node and port.
    children: Vec<Child>,
}

/// Where a node meets the uplink.
struct Gateway {
    node: usize,
    netns: String,
    /// The test side of the node's management veth.
    address: Ipv4Addr,
}

impl ClusterUplink {
    pub(super) fn new(nodes: &[TestNode], logs: &Path) -> ClusterUplink {
        let gateways = nodes
            .iter()
            .map(|node| Gateway { node: node.index, netns: node.netns().name().to_string(), address: node.gateway })
            .collect();
        ClusterUplink { forwarder: Uplink::new(), gateways, relays: Mutex::default(), logs: logs.to_path_buf() }
    }

    /// Make the machine's 127.0.0.1:`port` reachable from every node as 127.0.0.1:`port`,
    /// through the uplink. Returns once every node's relay listens.
    pub fn forward(&self, port: u16) {
        let mut relays = self.relays();
        assert!(relays.ports.insert(port), "port {port} is forwarded already");
        for gateway in &self.gateways {
            let listen = SocketAddr::from((gateway.address, port));
            self.forwarder
                .route(gateway.node, listen, SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
                .unwrap_or_else(|error| panic!("uplink route on {listen}: {error}"));
            let log = self.logs.join(format!("uplink-node{}-{port}.log", gateway.node));
            let mut relay = netns::enter(&gateway.netns, "socat")
                .arg(format!("TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr"))
                .arg(format!("TCP:{listen}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).expect("relay log"))
                .spawn()
                .expect("start socat in the node (scripts/test-deps.sh installs socat)");
            let pid = relay.id();
            wait_until(&format!("uplink relay of node{} on port {port}", gateway.node), RELAY_START_LIMIT, || {
                if let Ok(Some(status)) = relay.try_wait() {
                    panic!("socat in node{} exited ({status}): {}", gateway.node, read(&log));
                }
                listens_on_loopback(pid, port)
            });
            relays.children.push(relay);
        }
    }

    fn relays(&self) -> MutexGuard<'_, Relays> {
        self.relays.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Deref for ClusterUplink {
    type Target = Uplink;

    fn deref(&self) -> &Uplink {
        &self.forwarder
    }
}

impl Drop for ClusterUplink {
    fn drop(&mut self) {
        // The relays' forked children end with their connections, or with the node's namespace.
        for relay in &mut self.relays().children {
            stop_child(relay);
        }
    }
}

/// Whether process `pid` (in some namespace) sees a socket listening on 127.0.0.1:`port`:
/// `/proc/PID/net/tcp` lists its namespace's sockets, `0100007F:PORT` with state `0A` (LISTEN).
fn listens_on_loopback(pid: u32, port: u16) -> bool {
    let local = format!("0100007F:{port:04X}");
    read(Path::new(&format!("/proc/{pid}/net/tcp"))).lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.get(1) == Some(&local.as_str()) && fields.get(3) == Some(&"0A")
    })
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
