//! Files copied out of a container arrive as a tar stream: collected within a bound, then read.

use std::io::Read;

use futures_util::{Stream, StreamExt};

use super::ARCHIVE_LIMIT;
use crate::error::{Error, Result};

/// Collect the archive stream of `path` in `container` within the limit: None when the engine
/// says the path is not there (`absent`), its other errors through `failed`.
pub async fn collect<S, B, E>(
    mut stream: S,
    engine: &'static str,
    container: &str,
    path: &str,
    absent: impl Fn(&E) -> bool,
    failed: impl Fn(E) -> Error,
) -> Result<Option<Vec<u8>>>
where
    S: Stream<Item = std::result::Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
{
    let mut archive = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(error) if absent(&error) => return Ok(None),
            Err(error) => return Err(failed(error)),
        };
        if archive.len() + chunk.as_ref().len() > ARCHIVE_LIMIT {
            return Err(Error::engine(
                engine,
                format!("copy {path} out of {container}"),
                format!("it is larger than {} MiB; refusing to read it into memory", ARCHIVE_LIMIT >> 20),
            ));
        }
        archive.extend_from_slice(chunk.as_ref());
    }
    Ok(Some(archive))
}

/// The contents of the first regular file in a tar archive `engine` sent.
pub fn first_file(engine: &'static str, archive: &[u8]) -> Result<Option<Vec<u8>>> {
    let bad =
        |e: std::io::Error| Error::engine(engine, "copy a file out", format!("it sent an unreadable archive: {e}"));
    let mut reader = tar::Archive::new(archive);
    for entry in reader.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        if entry.header().entry_type().is_file() {
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).map_err(bad)?;
            return Ok(Some(bytes));
        }
    }
    Ok(None)
}
