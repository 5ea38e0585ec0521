//! The TCP sockets of a process's network namespace, from `/proc/PID/net/tcp` (which shows the
//! namespace of PID, whichever namespace the reader is in): who listens where, who is connected.

use std::net::{Ipv4Addr, SocketAddrV4};

/// One line of /proc/net/tcp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSocket {
    pub local: SocketAddrV4,
    pub remote: SocketAddrV4,
    pub state: TcpState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpState {
    Established,
    Listen,
    Other(u8),
}

/// The IPv4 TCP sockets in `pid`'s network namespace (empty once it is gone).
pub fn tcp_sockets(pid: u32) -> Vec<TcpSocket> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap_or_default();
    text.lines().skip(1).filter_map(parse_line).collect()
}

/// Whether something in `pid`'s namespace listens on exactly `address`.
pub fn listens_on(pid: u32, address: SocketAddrV4) -> bool {
    tcp_sockets(pid).iter().any(|socket| socket.state == TcpState::Listen && socket.local == address)
}

fn parse_line(line: &str) -> Option<TcpSocket> {
    let mut fields = line.split_whitespace().skip(1);
    let local = parse_address(fields.next()?)?;
    let remote = parse_address(fields.next()?)?;
    let state = match u8::from_str_radix(fields.next()?, 16).ok()? {
        0x01 => TcpState::Established,
        0x0A => TcpState::Listen,
        other => TcpState::Other(other),
    };
    Some(TcpSocket { local, remote, state })
}

/// `0202A8C0:C354`: the address as the kernel prints it (the network-order bytes read as a native
/// u32), then the port, in hex.
fn parse_address(text: &str) -> Option<SocketAddrV4> {
    let (address, port) = text.split_once(':')?;
    let address = u32::from_str_radix(address, 16).ok()?;
    let port = u16::from_str_radix(port, 16).ok()?;
    Some(SocketAddrV4::new(Ipv4Addr::from(address.to_ne_bytes()), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_listening_and_an_established_line() {
        let listen = "   0: 0202A8C0:C354 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1";
        let established =
            "   1: 0202A8C0:C354 0102A8C0:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2 1";
        let listen = parse_line(listen).expect("parsed");
        assert_eq!(listen.local, "192.168.2.2:50004".parse().expect("address"));
        assert_eq!(listen.state, TcpState::Listen);
        let established = parse_line(established).expect("parsed");
        assert_eq!(established.remote, "192.168.2.1:40000".parse().expect("address"));
        assert_eq!(established.state, TcpState::Established);
    }
}
