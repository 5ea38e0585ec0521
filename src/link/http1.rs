//! The little of HTTP/1.1 the blob transfer between nodes speaks: one `GET` per connection, a
//! response with `Content-Length` and the raw bytes after it (never chunked), then the
//! connection closes. Heads are bounded in size and time; bodies are streamed by the caller.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

/// The largest head read: a request or response head here is a few hundred bytes.
const HEAD_LIMIT: usize = 16 << 10;

/// A parsed head: its first line's words and its headers (names lowercased).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub first_line: Vec<String>,
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// `Content-Length`, when present and a number.
    pub fn content_length(&self) -> Option<u64> {
        self.header("content-length")?.trim().parse().ok()
    }

    /// A response's status code.
    pub fn status(&self) -> Option<u16> {
        let version = self.first_line.first()?;
        version.starts_with("HTTP/1.").then(|| self.first_line.get(1)?.parse().ok()).flatten()
    }
}

/// Read a head (up to the empty line) within `limit`; what was read past it is returned too (the
/// start of the body).
pub async fn read_head(reader: &mut (impl AsyncRead + Unpin), limit: Duration) -> std::io::Result<(Head, Vec<u8>)> {
    let reading = async {
        let mut raw = Vec::with_capacity(1024);
        let mut buffer = [0u8; 4096];
        loop {
            if let Some(end) = find_end(&raw) {
                let rest = raw.split_off(end + 4);
                return parse(&raw).map(|head| (head, rest));
            }
            if raw.len() > HEAD_LIMIT {
                return Err(invalid("the head is too long"));
            }
            let read = reader.read(&mut buffer).await?;
            if read == 0 {
                return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the connection closed"));
            }
            raw.extend_from_slice(&buffer[..read]);
        }
    };
    tokio::time::timeout(limit, reading)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no complete head in time"))?
}

fn find_end(raw: &[u8]) -> Option<usize> {
    raw.windows(4).position(|window| window == b"\r\n\r\n")
}

fn parse(raw: &[u8]) -> std::io::Result<Head> {
    let text = std::str::from_utf8(raw).map_err(|_| invalid("the head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let first_line: Vec<String> = lines.next().unwrap_or_default().split(' ').map(str::to_string).collect();
    if first_line.len() < 2 {
        return Err(invalid("no request or status line"));
    }
    let mut headers = Vec::new();
    for line in lines.filter(|line| !line.is_empty()) {
        let (name, value) = line.split_once(':').ok_or_else(|| invalid("a header without ':'"))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    Ok(Head { first_line, headers })
}

fn invalid(why: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_head_and_the_start_of_its_body() {
        let raw: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A:  b \r\n\r\nhel";
        let (head, rest) = read_head(&mut &raw[..], Duration::from_secs(1)).await.unwrap();
        assert_eq!((head.status(), head.content_length()), (Some(200), Some(5)));
        assert_eq!(head.header("x-a"), Some("b"));
        assert_eq!(rest, b"hel");
        let request: &[u8] = b"GET /blobs/ab HTTP/1.1\r\nHost: x\r\n\r\n";
        let (head, _) = read_head(&mut &request[..], Duration::from_secs(1)).await.unwrap();
        assert_eq!(head.first_line, ["GET", "/blobs/ab", "HTTP/1.1"]);
        assert_eq!(head.status(), None);
    }

    #[tokio::test]
    async fn truncated_endless_and_garbled_heads_fail() {
        for raw in [&b"HTTP/1.1 200 OK\r\n"[..], b"\xff\xfe\r\n\r\n", b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n"] {
            assert!(read_head(&mut &raw[..], Duration::from_secs(1)).await.is_err(), "{raw:?}");
        }
        let endless = vec![b'a'; HEAD_LIMIT + 8192];
        assert!(read_head(&mut &endless[..], Duration::from_secs(1)).await.is_err());
        let (_open, mut silent) = tokio::io::duplex(64);
        let error = read_head(&mut silent, Duration::from_millis(50)).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
    }
}
