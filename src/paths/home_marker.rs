//! A marker in the state directory that says which home this is: the first node to look writes a
//! random id there, and every node that mounts the same home (one NFS /home) reads the same one
//! back. Nodes compare their markers to know that they share a home; a device and inode would not
//! do, as each NFS client numbers the mount's device itself.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::Paths;
use crate::error::{Error, Result};

const MARKER: &str = "home-id";
/// The id's length: 16 random bytes, hex.
const ID_LEN: usize = 32;

/// The marker of the home whose state directory `paths` names, made when missing.
pub fn home_marker(paths: &Paths) -> Result<String> {
    let dir = paths.state_dir("the marker of this home")?;
    std::fs::create_dir_all(&dir).map_err(|e| unwritable(&dir, &e))?;
    let path = dir.join(MARKER);
    if let Some(id) = read_marker(&path) {
        return Ok(id);
    }
    let id = random_id()?;
    // Made whole or not at all (O_EXCL, which NFS keeps since v3): of two nodes making it at once,
    // one writes it, and the other reads what that one wrote.
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o644).open(&path) {
        Ok(mut file) => {
            file.write_all(format!("{id}\n").as_bytes()).map_err(|e| unwritable(&path, &e))?;
            Ok(id)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            read_marker(&path).ok_or_else(|| unwritable(&path, &std::io::Error::other("it holds no id")))
        }
        Err(e) => Err(unwritable(&path, &e)),
    }
}

/// The id in the marker at `path`, when it holds one (read bounded: it is a line of 32 digits).
fn read_marker(path: &Path) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(path).ok()?.take(ID_LEN as u64 + 1).read_to_string(&mut text).ok()?;
    let id = text.trim();
    (id.len() == ID_LEN && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_string())
}

fn random_id() -> Result<String> {
    let mut bytes = [0u8; ID_LEN / 2];
    std::fs::File::open("/dev/urandom").and_then(|mut random| random.read_exact(&mut bytes)).map_err(|e| {
        Error::host("/dev/urandom", format!("cannot read /dev/urandom: {e}"), "a Linux system has it; check /dev")
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn unwritable(path: &Path, error: &std::io::Error) -> Error {
    Error::host(
        path.display().to_string(),
        format!("cannot keep the marker of this home at {}: {error}", path.display()),
        "make the state directory writable for the user that runs strix-toolbox",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_of_one_home_reads_the_marker_the_first_one_made() {
        let home = tempfile::tempdir().unwrap();
        let first = home_marker(&Paths::under(home.path())).unwrap();
        assert_eq!(first.len(), ID_LEN);
        let other_node = Paths::under(home.path()).for_node(Some("4b8a2f0c9d1e4f6a8b7c5d3e2f1a0b9c"));
        assert_eq!(home_marker(&other_node).unwrap(), first);
        let elsewhere = tempfile::tempdir().unwrap();
        assert_ne!(home_marker(&Paths::under(elsewhere.path())).unwrap(), first);

        // A damaged marker is not taken for an id, and is left for the user to look at.
        let marker = Paths::under(elsewhere.path()).state_dir("it").unwrap().join(MARKER);
        std::fs::write(&marker, "x".repeat(1 << 16)).unwrap();
        assert!(home_marker(&Paths::under(elsewhere.path())).is_err());
    }
}
