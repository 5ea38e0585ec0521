//! A marker in the state directory that says which home this is: the first node to look writes a
//! random id there, and every node that mounts the same home (one NFS /home) reads the same one
//! back. Nodes compare their markers to know that they share a home; a device and inode would not
//! do, as each NFS client numbers the mount's device itself.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
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
    // Made whole or not at all: the id goes into a file of its own beside the marker, closed
    // (NFS writes it back on close), which then takes the marker's name only if no other node's
    // did (rename with RENAME_NOREPLACE, or link(2) where the filesystem has no such rename, NFS
    // among them; atomic either way). Of two nodes making it at once, one's is the marker and the
    // other reads that one back. A marker made empty (O_EXCL) and written after was read empty,
    // so as no id, by a node that looked in between: `cluster doctor` asks every node at once.
    let mut temp = tempfile::Builder::new()
        .prefix(".home-id-")
        .permissions(std::fs::Permissions::from_mode(0o644))
        .tempfile_in(&dir)
        .map_err(|e| unwritable(&dir, &e))?;
    temp.write_all(format!("{id}\n").as_bytes()).map_err(|e| unwritable(temp.path(), &e))?;
    match temp.into_temp_path().persist_noclobber(&path) {
        Ok(()) => Ok(id),
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
            read_marker(&path).ok_or_else(|| unwritable(&path, &std::io::Error::other("it holds no id")))
        }
        Err(e) => Err(unwritable(&path, &e.error)),
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

    #[test]
    fn nodes_that_look_at_once_all_read_the_one_marker_made() {
        // `cluster doctor` asks every node of a shared home at once: none may read the marker
        // half made. (Made empty and written after, about 4 in 10 of these rounds had one that did.)
        for _ in 0..200 {
            let home = tempfile::tempdir().unwrap();
            let barrier = std::sync::Barrier::new(4);
            let markers: Vec<String> = std::thread::scope(|scope| {
                let nodes: Vec<_> = (0..4)
                    .map(|_| {
                        scope.spawn(|| {
                            barrier.wait();
                            home_marker(&Paths::under(home.path())).map_err(|e| e.to_string())
                        })
                    })
                    .collect();
                nodes.into_iter().map(|node| node.join().unwrap().unwrap()).collect()
            });
            assert!(markers.iter().all(|marker| *marker == markers[0]), "{markers:?}");
            let dir = Paths::under(home.path()).state_dir("it").unwrap();
            let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(left, [MARKER], "no temporary file is left");
        }
    }
}
