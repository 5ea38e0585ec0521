//! A small HTTP/1.1 client that can run inside a network namespace the test made: the request is
//! made from a thread that joins the namespace (setns(2) changes only the calling thread), so a
//! test reaches a server bound to a node's link address without starting a process per request.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// A response: the status, the head's fields and the (de-chunked) body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// Each field's name (lower case) and value, in order.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    /// The value of the field `name` (lower case), if the head has it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(field, _)| field == name).map(|(_, value)| value.as_str())
    }
}

/// `METHOD http://ADDR/PATH` with an optional JSON body, from `netns` (None: the test's own
/// namespace), everything bounded by `limit`. An error says what failed; it never panics, so a
/// poll can retry.
pub fn request(
    netns: Option<&str>,
    method: &str,
    url: &str,
    json: Option<&str>,
    limit: Duration,
) -> Result<Response, String> {
    request_with_key(netns, method, url, json, None, limit)
}

/// [`request`] with `key` as its bearer token (`Authorization: Bearer KEY`), when given.
pub fn request_with_key(
    netns: Option<&str>,
    method: &str,
    url: &str,
    json: Option<&str>,
    key: Option<&str>,
    limit: Duration,
) -> Result<Response, String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("{url}: only http:// URLs"))?;
    let (authority, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(a, p)| (a, format!("/{p}")));
    let address: SocketAddr = authority.parse().map_err(|e| format!("{url}: {authority} is no IP:PORT ({e})"))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n");
    if let Some(key) = key {
        head.push_str(&format!("Authorization: Bearer {key}\r\n"));
    }
    if let Some(json) = json {
        head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", json.len()));
    }
    head.push_str("\r\n");
    let message = [head.as_bytes(), json.unwrap_or("").as_bytes()].concat();
    let netns = netns.map(str::to_string);
    let exchange = move || -> Result<Vec<u8>, String> {
        if let Some(netns) = &netns {
            join_netns(netns)?;
        }
        let mut stream = TcpStream::connect_timeout(&address, limit).map_err(|e| format!("connect {address}: {e}"))?;
        stream
            .set_read_timeout(Some(limit))
            .and_then(|()| stream.set_write_timeout(Some(limit)))
            .map_err(|e| e.to_string())?;
        stream.write_all(&message).map_err(|e| format!("send to {address}: {e}"))?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).map_err(|e| format!("read from {address}: {e}"))?;
        Ok(raw)
    };
    let raw = std::thread::spawn(exchange).join().map_err(|_| "the request thread panicked".to_string())??;
    parse(&raw).ok_or_else(|| format!("{method} {url}: not an HTTP response: {}", String::from_utf8_lossy(&raw)))
}

/// This thread into `/run/netns/NAME` (`ip netns add`'s bind mount).
fn join_netns(name: &str) -> Result<(), String> {
    let file = std::fs::File::open(format!("/run/netns/{name}")).map_err(|e| format!("open netns {name}: {e}"))?;
    // SAFETY: setns(2) on a namespace file this thread opened; it changes only this thread.
    let status = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if status != 0 {
        return Err(format!("setns into {name}: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

fn parse(raw: &[u8]) -> Option<Response> {
    let split = raw.windows(4).position(|window| window == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let chunked = head.lines().any(|line| {
        let line = line.to_ascii_lowercase();
        line.starts_with("transfer-encoding:") && line.contains("chunked")
    });
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let body = &raw[split + 4..];
    let body = if chunked { dechunk(body)? } else { body.to_vec() };
    Some(Response { status, headers, body: String::from_utf8_lossy(&body).into_owned() })
}

fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|window| window == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}
