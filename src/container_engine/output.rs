//! An exec's demultiplexed output: passed through to the command's output as it arrives (`enter`),
//! or captured (`verify` reads what its checks print).

use futures_util::{Stream, StreamExt};

use super::ExecIo;

/// Which of our streams a chunk belongs on.
pub enum Chunk {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
}

/// A captured stream keeps at most this much: a check's output is small, a runaway one is cut.
const CAPTURE_LIMIT: usize = 8 << 20;

/// Pass every chunk through as it arrives (no buffering), or capture them; returns what was
/// captured (stdout, stderr), empty when passed through.
pub async fn route_chunks<S: Stream<Item = Chunk> + Unpin>(mut chunks: S, io: ExecIo<'_>) -> (Vec<u8>, Vec<u8>) {
    let (mut captured_out, mut captured_err) = (Vec::new(), Vec::new());
    while let Some(chunk) = chunks.next().await {
        match (io, chunk) {
            (ExecIo::PassThrough(sink), Chunk::Stdout(bytes)) => sink.stdout(&bytes),
            (ExecIo::PassThrough(sink), Chunk::Stderr(bytes)) => sink.stderr(&bytes),
            (ExecIo::Capture, Chunk::Stdout(bytes)) => keep(&mut captured_out, &bytes),
            (ExecIo::Capture, Chunk::Stderr(bytes)) => keep(&mut captured_err, &bytes),
        }
    }
    (captured_out, captured_err)
}

fn keep(buffer: &mut Vec<u8>, bytes: &[u8]) {
    let room = CAPTURE_LIMIT.saturating_sub(buffer.len());
    buffer.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

/// podman-api's exec output.
pub async fn route_exec_output(output: &mut containers_api::conn::Multiplexer, io: ExecIo<'_>) -> (Vec<u8>, Vec<u8>) {
    use containers_api::conn::TtyChunk;
    let chunks = output.filter_map(|chunk| async move {
        match chunk {
            Ok(TtyChunk::StdOut(bytes)) => Some(Chunk::Stdout(bytes)),
            Ok(TtyChunk::StdErr(bytes)) => Some(Chunk::Stderr(bytes)),
            _ => None,
        }
    });
    route_chunks(Box::pin(chunks), io).await
}
