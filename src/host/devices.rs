//! Device nodes under /dev: character devices count, and so do links to character devices (a tree
//! in git cannot hold device nodes, so `examples/hosts/` links them to `/dev/null`). udev's alias
//! directories (`by-path`, `by-id`, … every `by-*`) hold links to the real nodes and are skipped,
//! so a node is never counted twice; stray files are skipped too.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use walkdir::{DirEntry, WalkDir};

use super::HostRoot;

/// Node paths (`/dev/dri/renderD128`) of the character devices under `dir`, sorted.
pub fn char_devices_under(root: &HostRoot, dir: &str) -> Vec<PathBuf> {
    let base = root.path(dir);
    let mut found: Vec<PathBuf> = WalkDir::new(&base)
        .follow_links(false)
        .into_iter()
        .filter_entry(|entry| !is_alias_dir(entry))
        .flatten()
        .filter(|entry| is_device_node(entry.path(), entry.file_type()))
        .map(|entry| root.node_path(entry.path()))
        .collect();
    found.sort();
    found
}

/// True when the node path is a character device, or a link to one.
pub fn is_char_device(root: &HostRoot, node_path: &str) -> bool {
    root.metadata(node_path).is_some_and(|m| is_device_node(&root.path(node_path), m.file_type()))
}

/// A character device, or a link whose target is one.
fn is_device_node(path: &Path, file_type: std::fs::FileType) -> bool {
    file_type.is_char_device()
        || (file_type.is_symlink() && std::fs::metadata(path).is_ok_and(|target| target.file_type().is_char_device()))
}

/// udev's directories of aliases (`/dev/dri/by-path`, `/dev/disk/by-id`): links to nodes found
/// under their own names.
fn is_alias_dir(entry: &DirEntry) -> bool {
    entry.depth() > 0 && entry.file_type().is_dir() && entry.file_name().to_string_lossy().starts_with("by-")
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// A tree whose "device nodes" are links to /dev/null, as `examples/hosts/` has them.
    fn linked_tree() -> (tempfile::TempDir, HostRoot) {
        let dir = tempfile::tempdir().unwrap();
        let dri = dir.path().join("dev/dri");
        std::fs::create_dir_all(dri.join("by-path")).unwrap();
        symlink("/dev/null", dir.path().join("dev/kfd")).unwrap();
        symlink("/dev/null", dri.join("card0")).unwrap();
        symlink("/dev/null", dri.join("renderD128")).unwrap();
        let root = HostRoot::open(dir.path()).unwrap();
        (dir, root)
    }

    #[test]
    fn a_link_to_a_character_device_is_a_device_node() {
        let (dir, root) = linked_tree();
        assert!(is_char_device(&root, "/dev/kfd"));
        assert_eq!(
            char_devices_under(&root, "/dev/dri"),
            [PathBuf::from("/dev/dri/card0"), PathBuf::from("/dev/dri/renderD128")]
        );
        // A link to a regular file, a dangling link and a plain file are none.
        std::fs::write(dir.path().join("dev/dri/notes"), "").unwrap();
        symlink(dir.path().join("dev/dri/notes"), dir.path().join("dev/dri/card1")).unwrap();
        symlink("/nonexistent/strix", dir.path().join("dev/dri/card2")).unwrap();
        assert_eq!(char_devices_under(&root, "/dev/dri").len(), 2);
        assert!(!is_char_device(&root, "/dev/dri/card1") && !is_char_device(&root, "/dev/dri/card2"));
    }

    #[test]
    fn aliases_under_by_path_and_by_id_are_not_counted_twice() {
        let (dir, root) = linked_tree();
        // As udev makes them: relative links to the real nodes.
        let by_path = dir.path().join("dev/dri/by-path");
        symlink("../card0", by_path.join("pci-0000:c5:00.0-card")).unwrap();
        symlink("../renderD128", by_path.join("pci-0000:c5:00.0-render")).unwrap();
        std::fs::create_dir_all(dir.path().join("dev/dri/by-id")).unwrap();
        symlink("../renderD128", dir.path().join("dev/dri/by-id/render")).unwrap();
        assert!(is_char_device(&root, "/dev/dri/by-path/pci-0000:c5:00.0-card"), "the alias does lead to a node");
        assert_eq!(
            char_devices_under(&root, "/dev/dri"),
            [PathBuf::from("/dev/dri/card0"), PathBuf::from("/dev/dri/renderD128")]
        );
    }

    #[test]
    fn real_character_devices_still_count() {
        // /dev itself holds real nodes on every Linux machine.
        let root = HostRoot::system();
        assert!(is_char_device(&root, "/dev/null"));
        assert!(char_devices_under(&root, "/dev").contains(&PathBuf::from("/dev/null")));
    }
}
