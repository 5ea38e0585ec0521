//! Files copied out of a container arrive as a tar stream: collected within a bound, then read.

use std::io::Read;

use super::ARCHIVE_LIMIT;
use crate::error::{Error, Result};

/// Add a chunk of the archive of `path` in `container`, refusing to grow past the limit.
pub fn append(archive: &mut Vec<u8>, chunk: &[u8], container: &str, path: &str) -> Result<()> {
    if archive.len() + chunk.len() > ARCHIVE_LIMIT {
        return Err(Error::Failed(format!(
            "{path} in {container} is larger than {} MiB; refusing to read it into memory",
            ARCHIVE_LIMIT >> 20
        )));
    }
    archive.extend_from_slice(chunk);
    Ok(())
}

/// The contents of the first regular file in a tar archive.
pub fn first_file(archive: &[u8]) -> Result<Option<Vec<u8>>> {
    let bad = |e: std::io::Error| Error::Failed(format!("the engine sent an unreadable archive: {e}"));
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
