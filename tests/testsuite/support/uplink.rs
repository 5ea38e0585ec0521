//! The uplink: a TCP forwarder owned by the test, standing for the one home internet connection
//! every node of a cluster shares. Each node reaches the upstream services (the registry, a Hub
//! stand-in) only through its own route here, so the uplink can count the bytes each way (in
//! total and per node), cap the total rate with one token bucket shared by every connection in
//! both directions, and cut one node off.
//!
//! Threads and std::net only. Every loop ends once the uplink is dropped (or the node is cut off),
//! and every blocking call has a timeout, so nothing here can hang a test.

use std::collections::BTreeMap;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a waiting thread sleeps or blocks before it looks again whether it should stop.
const POLL: Duration = Duration::from_millis(20);
/// One read; also the most a connection takes from the bucket at once.
const CHUNK: usize = 16 * 1024;
/// How long connecting to the upstream service may take.
const CONNECT_LIMIT: Duration = Duration::from_secs(5);
/// How long a dropped uplink waits for its threads (they notice within `POLL`).
const JOIN_LIMIT: Duration = Duration::from_secs(5);

pub struct Uplink {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    stopping: AtomicBool,
    bucket: Mutex<Bucket>,
    nodes: Mutex<BTreeMap<usize, Arc<NodeRoute>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    next_connection: AtomicU64,
}

/// One node's side of the uplink: its traffic and its open connections.
#[derive(Default)]
struct NodeRoute {
    down: AtomicU64,
    up: AtomicU64,
    cut: AtomicBool,
    /// Both sockets of every open connection, by connection id: shut when the node is cut off.
    open: Mutex<BTreeMap<u64, [TcpStream; 2]>>,
}

/// Which way bytes go: `Down` from the upstream service to the node.
#[derive(Clone, Copy)]
enum Direction {
    Down,
    Up,
}

impl Uplink {
    pub fn new() -> Uplink {
        Uplink { shared: Arc::new(Shared::default()) }
    }

    /// Accept connections from `node` on `listen` and forward each to `upstream`. Returns the
    /// address it listens on (port 0 picks one).
    pub fn route(&self, node: usize, listen: SocketAddr, upstream: SocketAddr) -> io::Result<SocketAddr> {
        let listener = TcpListener::bind(listen)?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let route = Arc::clone(lock(&self.shared.nodes).entry(node).or_default());
        let shared = Arc::clone(&self.shared);
        let accepting = std::thread::spawn(move || accept_loop(&shared, &route, &listener, upstream));
        self.shared.keep(accepting);
        Ok(address)
    }

    /// Bytes from upstream to the nodes, all nodes together.
    pub fn bytes_down(&self) -> u64 {
        lock(&self.shared.nodes).values().map(|route| route.down.load(Ordering::SeqCst)).sum()
    }

    /// Bytes from the nodes to upstream.
    pub fn bytes_up(&self) -> u64 {
        lock(&self.shared.nodes).values().map(|route| route.up.load(Ordering::SeqCst)).sum()
    }

    /// Bytes from upstream to `node` (0 for a node without a route).
    pub fn node_bytes_down(&self, node: usize) -> u64 {
        self.shared.route(node).map_or(0, |route| route.down.load(Ordering::SeqCst))
    }

    /// Bytes from `node` to upstream.
    pub fn node_bytes_up(&self, node: usize) -> u64 {
        self.shared.route(node).map_or(0, |route| route.up.load(Ordering::SeqCst))
    }

    /// Cap everything the uplink carries, both ways and all nodes together, at `bytes_per_second`
    /// (`None`: no cap). The bucket starts empty and holds at most 100 ms of traffic.
    pub fn set_rate_limit(&self, bytes_per_second: Option<u64>) {
        assert!(bytes_per_second != Some(0), "a rate of 0 passes nothing: cut the nodes off instead");
        *lock(&self.shared.bucket) = Bucket { rate: bytes_per_second, tokens: 0.0, refilled: Some(Instant::now()) };
    }

    /// `node` loses its uplink: its open connections are shut and new ones closed at once.
    pub fn cut_off(&self, node: usize) {
        let route = self.shared.route(node).unwrap_or_else(|| panic!("node {node} has no route on the uplink"));
        route.cut.store(true, Ordering::SeqCst);
        for sockets in lock(&route.open).values() {
            for socket in sockets {
                let _ = socket.shutdown(Shutdown::Both);
            }
        }
    }

    /// Give `node` its uplink back.
    pub fn reconnect(&self, node: usize) {
        let route = self.shared.route(node).unwrap_or_else(|| panic!("node {node} has no route on the uplink"));
        route.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Uplink {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        for route in lock(&self.shared.nodes).values() {
            for sockets in lock(&route.open).values() {
                for socket in sockets {
                    let _ = socket.shutdown(Shutdown::Both);
                }
            }
        }
        // Connection threads may still add their pumps' handles: take until none is left.
        let deadline = Instant::now() + JOIN_LIMIT;
        while Instant::now() < deadline {
            let threads = std::mem::take(&mut *lock(&self.shared.threads));
            if threads.is_empty() {
                return;
            }
            for thread in threads {
                while !thread.is_finished() && Instant::now() < deadline {
                    std::thread::sleep(POLL);
                }
                if thread.is_finished() {
                    let _ = thread.join();
                }
            }
        }
        // Not a panic: drop may run while a failed test unwinds. The threads are left detached.
        eprintln!("uplink: threads still running {JOIN_LIMIT:?} after it was dropped");
    }
}

impl Shared {
    fn route(&self, node: usize) -> Option<Arc<NodeRoute>> {
        lock(&self.nodes).get(&node).cloned()
    }

    /// Hold on to a thread so that drop can wait for it; forget the finished ones.
    fn keep(&self, thread: JoinHandle<()>) {
        let mut threads = lock(&self.threads);
        threads.retain(|thread| !thread.is_finished());
        threads.push(thread);
    }

    fn stopped(&self, route: &NodeRoute) -> bool {
        self.stopping.load(Ordering::SeqCst) || route.cut.load(Ordering::SeqCst)
    }

    /// Up to `want` bytes' worth of tokens, waiting for them under a rate limit; `None` once the
    /// connection must stop.
    fn take_tokens(&self, route: &NodeRoute, want: usize) -> Option<usize> {
        loop {
            if self.stopped(route) {
                return None;
            }
            let wait = {
                let mut bucket = lock(&self.bucket);
                let Some(grant) = bucket.take(want) else { return Some(want) };
                match grant {
                    Ok(granted) => return Some(granted),
                    Err(wait) => wait,
                }
            };
            std::thread::sleep(wait.min(POLL));
        }
    }
}

/// A token bucket of bytes: `rate` per second, at most 100 ms of them saved up.
#[derive(Default)]
struct Bucket {
    rate: Option<u64>,
    tokens: f64,
    refilled: Option<Instant>,
}

impl Bucket {
    /// `None` without a limit; else `Ok(granted)`, or `Err(how long until there are enough)`.
    fn take(&mut self, want: usize) -> Option<Result<usize, Duration>> {
        let rate = self.rate? as f64;
        let now = Instant::now();
        let elapsed = self.refilled.map_or(0.0, |then| now.duration_since(then).as_secs_f64());
        self.refilled = Some(now);
        // Small grants under a small rate (20 ms of traffic), so connections share it evenly.
        let grant = want.min(((rate / 50.0) as usize).clamp(1, CHUNK));
        let capacity = (rate / 10.0).max(grant as f64);
        self.tokens = (self.tokens + elapsed * rate).min(capacity);
        if self.tokens >= grant as f64 {
            self.tokens -= grant as f64;
            Some(Ok(grant))
        } else {
            Some(Err(Duration::from_secs_f64((grant as f64 - self.tokens) / rate)))
        }
    }
}

fn accept_loop(shared: &Arc<Shared>, route: &Arc<NodeRoute>, listener: &TcpListener, upstream: SocketAddr) {
    while !shared.stopping.load(Ordering::SeqCst) {
        match listener.accept() {
            // A node that is cut off: the connection is closed at once, so its client fails fast.
            Ok((node_side, _)) if route.cut.load(Ordering::SeqCst) => drop(node_side),
            Ok((node_side, _)) => {
                let (for_thread, route) = (Arc::clone(shared), Arc::clone(route));
                shared.keep(std::thread::spawn(move || forward(&for_thread, &route, node_side, upstream)));
            }
            // WouldBlock: nobody is connecting; other errors (a peer that gave up): try again.
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// One connection: open its upstream side, pump both ways until both are done.
fn forward(shared: &Arc<Shared>, route: &Arc<NodeRoute>, node_side: TcpStream, upstream: SocketAddr) {
    let Ok(upstream_side) = TcpStream::connect_timeout(&upstream, CONNECT_LIMIT) else {
        return; // dropping node_side closes it: the node sees the service as down
    };
    let clones = (|| Ok::<_, io::Error>([node_side.try_clone()?, upstream_side.try_clone()?]))();
    let Ok(clones) = clones else { return };
    let id = shared.next_connection.fetch_add(1, Ordering::SeqCst);
    lock(&route.open).insert(id, clones);
    // Cut off between the accept and now: shut what cut_off could not see yet.
    if shared.stopped(route) {
        let _ = node_side.shutdown(Shutdown::Both);
        let _ = upstream_side.shutdown(Shutdown::Both);
    }
    let pumping_up = match (node_side.try_clone(), upstream_side.try_clone()) {
        (Ok(from), Ok(to)) => {
            let (shared, route) = (Arc::clone(shared), Arc::clone(route));
            Some(std::thread::spawn(move || pump(&shared, &route, from, to, Direction::Up)))
        }
        _ => None,
    };
    pump(shared, route, upstream_side, node_side, Direction::Down);
    if let Some(thread) = pumping_up {
        // The pump notices a stop within POLL; it ends by itself when the node closes its side.
        let _ = thread.join();
    }
    lock(&route.open).remove(&id);
}

/// Copy `from` to `to` until `from` ends (then pass the end on) or the connection must stop.
fn pump(shared: &Shared, route: &NodeRoute, mut from: TcpStream, mut to: TcpStream, direction: Direction) {
    let counter = match direction {
        Direction::Down => &route.down,
        Direction::Up => &route.up,
    };
    if from.set_read_timeout(Some(POLL)).is_err() || to.set_write_timeout(Some(POLL)).is_err() {
        return;
    }
    let mut buffer = vec![0u8; CHUNK];
    let ended = loop {
        if shared.stopped(route) {
            break false;
        }
        let read = match from.read(&mut buffer) {
            Ok(0) => break true,
            Ok(read) => read,
            Err(error) if is_timeout(&error) => continue,
            Err(_) => break false,
        };
        let mut sent = 0;
        while sent < read {
            let Some(granted) = shared.take_tokens(route, read - sent) else { break };
            match write_bounded(shared, route, &mut to, &buffer[sent..sent + granted], counter) {
                Ok(()) => sent += granted,
                Err(()) => break,
            }
        }
        if sent < read {
            break false;
        }
    };
    if ended {
        // A half-close: the other way may still be carrying the answer.
        let _ = to.shutdown(Shutdown::Write);
    } else {
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    }
}

/// Write all of `data`, counting each byte as it goes out; gives up once the connection must stop.
fn write_bounded(
    shared: &Shared,
    route: &NodeRoute,
    to: &mut TcpStream,
    mut data: &[u8],
    counter: &AtomicU64,
) -> Result<(), ()> {
    while !data.is_empty() {
        if shared.stopped(route) {
            return Err(());
        }
        match to.write(data) {
            Ok(0) => return Err(()),
            Ok(written) => {
                counter.fetch_add(written as u64, Ordering::SeqCst);
                data = &data[written..];
            }
            Err(error) if is_timeout(&error) || error.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Err(()),
        }
    }
    Ok(())
}

/// What a socket timeout looks like (`WouldBlock` on Linux).
fn is_timeout(error: &io::Error) -> bool {
    matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// A poisoned lock still holds consistent counters: a panicking test thread must not hide them.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
