//! Device nodes under /dev: only character devices count (skips by-path symlinks and stray files).

use std::os::unix::fs::FileTypeExt;
use std::path::PathBuf;

use walkdir::WalkDir;

use super::HostRoot;

/// Node paths (`/dev/dri/renderD128`) of the character devices under `dir`, sorted.
pub fn char_devices_under(root: &HostRoot, dir: &str) -> Vec<PathBuf> {
    let base = root.path(dir);
    let mut found: Vec<PathBuf> = WalkDir::new(&base)
        .follow_links(false)
        .into_iter()
        .flatten()
        .filter(|entry| entry.file_type().is_char_device())
        .map(|entry| root.node_path(entry.path()))
        .collect();
    found.sort();
    found
}

/// True when the node path is a character device.
pub fn is_char_device(root: &HostRoot, node_path: &str) -> bool {
    root.metadata(node_path).is_some_and(|m| m.file_type().is_char_device())
}
