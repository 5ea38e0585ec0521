//! Passing a command's output through: demultiplexed exec streams to our stdout and stderr.

use futures_util::{Stream, StreamExt};
use tokio::io::AsyncWriteExt;

/// Which of our streams a chunk belongs on.
pub enum Chunk {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
}

/// Copy every chunk as it arrives (no buffering of the whole output).
pub async fn copy_chunks<S: Stream<Item = Chunk> + Unpin>(mut chunks: S) {
    let mut stdout = tokio::io::stdout();
    let mut stderr = tokio::io::stderr();
    while let Some(chunk) = chunks.next().await {
        let _ = match chunk {
            Chunk::Stdout(bytes) => stdout.write_all(&bytes).await.and(stdout.flush().await),
            Chunk::Stderr(bytes) => stderr.write_all(&bytes).await.and(stderr.flush().await),
        };
    }
}

/// podman-api's exec output.
pub async fn copy_exec_output(output: &mut containers_api::conn::Multiplexer) {
    use containers_api::conn::TtyChunk;
    let chunks = output.filter_map(|chunk| async move {
        match chunk {
            Ok(TtyChunk::StdOut(bytes)) => Some(Chunk::Stdout(bytes)),
            Ok(TtyChunk::StdErr(bytes)) => Some(Chunk::Stderr(bytes)),
            _ => None,
        }
    });
    copy_chunks(Box::pin(chunks)).await;
}
