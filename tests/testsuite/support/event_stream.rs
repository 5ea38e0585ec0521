//! A streamed answer read the way an SSE client reads it, one event at a time as it arrives:
//! HTTP/1.1, the chunked body de-chunked as it comes, `data: …` events split on their blank line.
//! The test decides when to read the next event, when to stop reading and when to hang up (drop).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

/// How long one read may wait for the server.
const READ_LIMIT: Duration = Duration::from_secs(60);

pub struct EventStream {
    reader: BufReader<TcpStream>,
    /// The answer's status.
    pub status: u16,
    chunked: bool,
    /// De-chunked bytes not yet split into events.
    pending: Vec<u8>,
    /// The body has ended (its last chunk, or the connection closed).
    ended: bool,
}

impl EventStream {
    /// `POST path` on `address` with `body` (and `key` as bearer token), its answer's head read.
    pub fn open(address: SocketAddr, path: &str, key: Option<&str>, body: &Value) -> EventStream {
        let body = body.to_string();
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        );
        if let Some(key) = key {
            head.push_str(&format!("Authorization: Bearer {key}\r\n"));
        }
        head.push_str("Accept: text/event-stream\r\n\r\n");
        let mut stream = TcpStream::connect_timeout(&address, READ_LIMIT).expect("connect");
        stream.set_read_timeout(Some(READ_LIMIT)).expect("read timeout");
        stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body.as_bytes())).expect("send");
        let mut reader = BufReader::new(stream);
        let mut status = 0;
        let mut chunked = false;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("read the answer's head");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if status == 0 {
                status = line.split_whitespace().nth(1).and_then(|code| code.parse().ok()).expect("a status line");
            }
            let lower = line.to_ascii_lowercase();
            chunked |= lower.starts_with("transfer-encoding:") && lower.contains("chunked");
        }
        EventStream { reader, status, chunked, pending: Vec::new(), ended: false }
    }

    /// The next `data:` event's payload, parsed; None at `data: [DONE]` or the body's end.
    pub fn next_event(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.pending.windows(2).position(|window| window == b"\n\n") {
                let event: Vec<u8> = self.pending.drain(..end + 2).collect();
                let text = String::from_utf8_lossy(&event);
                let Some(data) = text.lines().find_map(|line| line.strip_prefix("data: ")) else { continue };
                if data.trim() == "[DONE]" {
                    return None;
                }
                return Some(serde_json::from_str(data).unwrap_or_else(|e| panic!("event {data:?}: {e}")));
            }
            if self.ended || !self.read_more() {
                return None;
            }
        }
    }

    /// Every event left, until the end.
    pub fn rest(&mut self) -> Vec<Value> {
        std::iter::from_fn(|| self.next_event()).collect()
    }

    /// Read to the end: whether the body ended with its last chunk (a chunked body), rather than
    /// the connection being cut.
    pub fn ended_cleanly(&mut self) -> bool {
        while self.next_event().is_some() {}
        while !self.ended && self.read_more() {}
        self.ended
    }

    /// The whole body, for an answer that is not a stream (an error).
    pub fn body(&mut self) -> String {
        while !self.ended && self.read_more() {}
        String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned()
    }

    /// More of the body into `pending`; false when the connection closed or broke off.
    fn read_more(&mut self) -> bool {
        if !self.chunked {
            let mut buffer = [0u8; 8192];
            return match self.reader.read(&mut buffer) {
                Ok(0) | Err(_) => {
                    self.ended = true;
                    false
                }
                Ok(read) => {
                    self.pending.extend_from_slice(&buffer[..read]);
                    true
                }
            };
        }
        let mut size_line = String::new();
        if self.reader.read_line(&mut size_line).unwrap_or(0) == 0 {
            return false;
        }
        let Ok(size) = usize::from_str_radix(size_line.trim().split(';').next().unwrap_or(""), 16) else {
            return false;
        };
        if size == 0 {
            self.ended = true;
            return false;
        }
        let mut chunk = vec![0u8; size + 2];
        if self.reader.read_exact(&mut chunk).is_err() {
            return false;
        }
        self.pending.extend_from_slice(&chunk[..size]);
        true
    }
}
