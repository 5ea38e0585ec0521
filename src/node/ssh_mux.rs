//! The two questions the head puts to its own ssh master, asked on the control socket in the
//! master's multiplexing protocol (OpenSSH's PROTOCOL.mux) instead of by starting `ssh -O check`
//! or `ssh -O exit`: a process start for each (tens of milliseconds, on every node of every
//! cluster command) for a message of a few bytes. Packets are a length, then SSH `uint32` fields.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

const MUX_MSG_HELLO: u32 = 0x0000_0001;
const MUX_C_ALIVE_CHECK: u32 = 0x1000_0004;
const MUX_C_TERMINATE: u32 = 0x1000_0005;
const MUX_S_OK: u32 = 0x8000_0001;
const MUX_S_ALIVE: u32 = 0x8000_0005;
const MUX_VERSION: u32 = 4;
/// A master answers these at once; one that does not within this is as good as gone.
const ANSWER_LIMIT: Duration = Duration::from_secs(2);
/// The most of a reply read (a reply with a reason string is a few hundred bytes).
const PACKET_LIMIT: u32 = 64 << 10;

/// A master answers on `control_path` (`ssh -O check`).
pub fn alive(control_path: &Path) -> bool {
    matches!(ask(control_path, MUX_C_ALIVE_CHECK).as_deref(), Ok([MUX_S_ALIVE, ..]))
}

/// Ask the master on `control_path` to end its connection (`ssh -O exit`); true when it agreed.
pub fn terminate(control_path: &Path) -> bool {
    matches!(ask(control_path, MUX_C_TERMINATE).as_deref(), Ok([MUX_S_OK, ..]))
}

/// Say hello, send `request` (request id 1), and return the reply's `uint32` fields.
fn ask(control_path: &Path, request: u32) -> std::io::Result<Vec<u32>> {
    let mut socket = UnixStream::connect(control_path)?;
    socket.set_read_timeout(Some(ANSWER_LIMIT))?;
    socket.set_write_timeout(Some(ANSWER_LIMIT))?;
    socket.write_all(&packet(&[MUX_MSG_HELLO, MUX_VERSION]))?;
    let hello = read_packet(&mut socket)?;
    if hello.get(..2) != Some(&[MUX_MSG_HELLO, MUX_VERSION]) {
        return Err(std::io::Error::other(format!("not an ssh master of protocol {MUX_VERSION}: {hello:x?}")));
    }
    socket.write_all(&packet(&[request, 1]))?;
    read_packet(&mut socket)
}

fn packet(fields: &[u32]) -> Vec<u8> {
    let length = u32::try_from(fields.len() * 4).unwrap_or(u32::MAX);
    std::iter::once(length).chain(fields.iter().copied()).flat_map(u32::to_be_bytes).collect()
}

/// One packet, as whole `uint32`s (a trailing string's odd bytes are dropped: nothing here reads it).
fn read_packet(socket: &mut impl Read) -> std::io::Result<Vec<u32>> {
    let mut length = [0u8; 4];
    socket.read_exact(&mut length)?;
    let length = u32::from_be_bytes(length);
    if length > PACKET_LIMIT {
        return Err(std::io::Error::other(format!("a mux packet of {length} bytes")));
    }
    let mut body = vec![0u8; length as usize];
    socket.read_exact(&mut body)?;
    Ok(body.chunks_exact(4).map(|word| u32::from_be_bytes([word[0], word[1], word[2], word[3]])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_are_a_length_then_big_endian_words() {
        assert_eq!(packet(&[MUX_MSG_HELLO, MUX_VERSION]), [0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 4]);
        let mut reply: &[u8] = &[0, 0, 0, 12, 0x80, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0x30, 0x39];
        assert_eq!(read_packet(&mut reply).unwrap(), [MUX_S_ALIVE, 1, 12345]);
        let mut huge: &[u8] = &[0xff, 0xff, 0xff, 0xff];
        assert!(read_packet(&mut huge).is_err());
    }

    #[test]
    fn no_master_is_not_alive_and_cannot_be_told_to_exit() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!alive(&dir.path().join("master")));
        assert!(!terminate(&dir.path().join("master")));
    }
}
