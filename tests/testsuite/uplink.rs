//! The uplink forwarder alone, on loopback: every byte counted once, each way and per node; one
//! rate cap shared by all connections; a node cut off while the others go on; and nothing left
//! waiting once it is dropped.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::support::uplink::Uplink;
use crate::support::wait_until;

/// How long any one socket operation of these tests may block.
const IO_LIMIT: Duration = Duration::from_secs(10);

/// An upstream service on loopback: per connection, it reads the request until the client
/// half-closes, then answers `answer` bytes (a pattern) and closes.
struct BlobServer {
    address: SocketAddr,
    stopping: Arc<AtomicBool>,
    accepting: Option<JoinHandle<()>>,
}

impl BlobServer {
    fn start(answer: usize) -> BlobServer {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let address = listener.local_addr().expect("address");
        let stopping = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&stopping);
        let accepting = std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        std::thread::spawn(move || serve(stream, answer));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        BlobServer { address, stopping, accepting: Some(accepting) }
    }
}

impl Drop for BlobServer {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        if let Some(thread) = self.accepting.take() {
            let _ = thread.join();
        }
    }
}

fn serve(mut stream: TcpStream, answer: usize) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(IO_LIMIT));
    let _ = stream.set_write_timeout(Some(IO_LIMIT));
    let mut request = Vec::new();
    if stream.read_to_end(&mut request).is_ok() {
        let _ = stream.write_all(&pattern(answer));
    }
}

/// `len` bytes that show a lost or repeated chunk.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// Connect through `address`, send `request`, half-close, read the whole answer.
fn exchange(address: SocketAddr, request: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect_timeout(&address, IO_LIMIT)?;
    stream.set_read_timeout(Some(IO_LIMIT))?;
    stream.set_write_timeout(Some(IO_LIMIT))?;
    stream.write_all(request)?;
    stream.shutdown(Shutdown::Write)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(answer)
}

/// An uplink with a route for each of `nodes` to `upstream`; returns their listening addresses.
fn uplink_to(upstream: SocketAddr, nodes: usize) -> (Uplink, Vec<SocketAddr>) {
    let uplink = Uplink::new();
    let routes = (1..=nodes)
        .map(|node| uplink.route(node, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), upstream).expect("route"))
        .collect();
    (uplink, routes)
}

#[test]
fn every_byte_is_counted_once_each_way_and_per_node() {
    let server = BlobServer::start(1_000_003);
    let (uplink, routes) = uplink_to(server.address, 2);

    let request = pattern(12_345);
    assert_eq!(exchange(routes[0], &request).expect("node1"), pattern(1_000_003));
    assert_eq!(exchange(routes[1], b"x").expect("node2"), pattern(1_000_003));
    assert_eq!(exchange(routes[1], b"yz").expect("node2 again"), pattern(1_000_003));

    // A counter moves right after its write returns: a moment at most.
    wait_until("the counts", Duration::from_secs(2), || uplink.bytes_up() == 12_348);
    assert_eq!((uplink.node_bytes_up(1), uplink.node_bytes_down(1)), (12_345, 1_000_003));
    assert_eq!((uplink.node_bytes_up(2), uplink.node_bytes_down(2)), (3, 2_000_006));
    assert_eq!((uplink.bytes_up(), uplink.bytes_down()), (12_348, 3_000_009));
    assert_eq!(uplink.node_bytes_down(3), 0, "a node without a route");
}

#[test]
fn the_rate_limit_is_shared_by_every_connection() {
    const RATE: u64 = 400_000;
    const EACH: usize = 400_000;
    let server = BlobServer::start(EACH);
    let (uplink, routes) = uplink_to(server.address, 2);
    let both_at_once = |routes: &[SocketAddr]| {
        let started = Instant::now();
        let downloads: Vec<_> =
            routes.iter().map(|&route| std::thread::spawn(move || exchange(route, b"GET"))).collect();
        for download in downloads {
            assert_eq!(download.join().expect("download thread").expect("download").len(), EACH);
        }
        started.elapsed()
    };

    uplink.set_rate_limit(Some(RATE));
    let capped = both_at_once(&routes);
    // 800 kB at 400 kB/s: 2 s, less the bucket's 100 ms of burst; more on a busy machine.
    println!("two downloads of {EACH} bytes at {RATE} B/s took {capped:?}");
    // Only the lower bound: a cap cannot be beaten, but a busy machine may be slower than it.
    assert!(capped >= Duration::from_millis(1800), "faster than the cap: {capped:?}");

    uplink.set_rate_limit(None);
    let free = both_at_once(&routes);
    println!("the same without a cap took {free:?}");
    assert!(free < Duration::from_millis(1800), "still capped: {free:?}");
}

#[test]
fn a_node_cut_off_loses_its_connections_and_the_others_go_on() {
    let server = BlobServer::start(1000);
    let (uplink, routes) = uplink_to(server.address, 2);

    // An open connection of node2, its request not finished: the server still waits for it.
    let mut open = TcpStream::connect(routes[1]).expect("connect");
    open.set_read_timeout(Some(IO_LIMIT)).expect("timeout");
    open.write_all(b"partial").expect("write");
    wait_until("node2's request upstream", Duration::from_secs(2), || uplink.node_bytes_up(2) == 7);

    uplink.cut_off(2);
    let mut rest = Vec::new();
    let ended = open.read_to_end(&mut rest);
    assert!(!timed_out(&ended), "the open connection lingered until the read timeout ({IO_LIMIT:?})");
    assert!(rest.is_empty(), "{ended:?}: {} bytes after the cut", rest.len());
    // New connections are closed at once: no answer, no waiting (a wait ends in a timeout error).
    match exchange(routes[1], b"again") {
        Ok(answer) => assert!(answer.is_empty(), "node2 got {} bytes while cut off", answer.len()),
        Err(error) => {
            assert!(matches!(error.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe), "unexpected {error}")
        }
    }
    assert_eq!(exchange(routes[0], b"node1").expect("node1 still has its uplink"), pattern(1000));

    uplink.reconnect(2);
    assert_eq!(exchange(routes[1], b"back").expect("node2 reconnected"), pattern(1000));
}

#[test]
fn dropping_the_uplink_ends_every_connection_at_once() {
    let server = BlobServer::start(1 << 20);
    let (uplink, routes) = uplink_to(server.address, 1);
    // A crawl (1 kB/s): the download is still running when the uplink goes.
    uplink.set_rate_limit(Some(1000));
    let download = std::thread::spawn(move || exchange(routes[0], b"GET"));
    wait_until("the download to start", Duration::from_secs(5), || uplink.bytes_down() > 0);

    drop(uplink);
    // The download ends because its connection went, not because its read timed out.
    let received = download.join().expect("download thread");
    assert!(!timed_out(&received), "the client waited out its read timeout ({IO_LIMIT:?})");
    assert!(received.as_ref().map_or(true, |answer| answer.len() < 1 << 20), "{:?}", received.map(|a| a.len()));
}

/// A blocking read or write that gave up on its timeout (std reports it as either kind).
fn timed_out<T>(result: &std::io::Result<T>) -> bool {
    result.as_ref().is_err_and(|e| matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut))
}
