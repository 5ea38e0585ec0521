//! `HostRoot`: the one door to the node's files. Default `/`; tests point it at a fake tree.

use std::fs::Metadata;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRoot {
    root: PathBuf,
    /// This process's network interfaces are the node's: ask them (ethtool) for what no file
    /// holds. Always for `/`; a fake tree only when a test says so (inside its own namespace).
    live_interfaces: bool,
}

impl HostRoot {
    /// Open a host root, failing clearly when it is missing, not a directory, or unreadable. A
    /// relative one (`examples/hosts/e810-roce`) is made absolute: the engine needs absolute
    /// device paths.
    pub fn open(root: &Path) -> Result<Self> {
        let unusable = |why: String| {
            Error::host(
                root.display().to_string(),
                format!("host root {} {why}", root.display()),
                "pass an existing directory to --host-root (or unset STRIX_HOST_ROOT)",
            )
        };
        let metadata = std::fs::metadata(root).map_err(|e| unusable(format!("cannot be used: {e}")))?;
        if !metadata.is_dir() {
            return Err(unusable("is not a directory".into()));
        }
        std::fs::read_dir(root).map_err(|e| unusable(format!("cannot be listed: {e}")))?;
        let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
        let live_interfaces = root == Path::new("/");
        Ok(HostRoot { root, live_interfaces })
    }

    /// The real node.
    pub fn system() -> Self {
        HostRoot { root: PathBuf::from("/"), live_interfaces: true }
    }

    /// Also ask this process's network interfaces under a fake tree: for tests that name a veth
    /// in their own network namespace after the tree's netdev.
    pub fn with_live_interfaces(mut self, live: bool) -> Self {
        self.live_interfaces |= live;
        self
    }

    /// Whether the node's network interfaces may be asked directly (see [`HostRoot::with_live_interfaces`]).
    pub fn live_interfaces(&self) -> bool {
        self.live_interfaces
    }

    /// True for the real node's `/`.
    pub fn is_system(&self) -> bool {
        self.root == Path::new("/")
    }

    /// Where a node path (`/dev/kfd` or `dev/kfd`) lives under this root.
    pub fn path(&self, node_path: impl AsRef<Path>) -> PathBuf {
        let relative = node_path.as_ref().strip_prefix("/").unwrap_or(node_path.as_ref());
        self.root.join(relative)
    }

    /// The node path (`/dev/kfd`) of a path under this root, as a container sees it.
    pub fn node_path(&self, path: &Path) -> PathBuf {
        match path.strip_prefix(&self.root) {
            Ok(relative) => Path::new("/").join(relative),
            Err(_) => path.to_path_buf(),
        }
    }

    /// Read a text file; `Ok(None)` when it does not exist, an error when it exists but
    /// cannot be read.
    pub fn read(&self, node_path: impl AsRef<Path>) -> Result<Option<String>> {
        let path = self.path(node_path);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::read(path, e)),
        }
    }

    /// Read a one-line sysfs attribute, trimmed; `None` when missing or unreadable
    /// (sysfs answers EINVAL for attributes of unpopulated entries, e.g. empty GID slots).
    pub fn attribute(&self, node_path: impl AsRef<Path>) -> Option<String> {
        self.read(node_path).ok().flatten().map(|text| text.trim().to_string())
    }

    /// Metadata without following a final symlink; None when missing.
    pub fn metadata(&self, node_path: impl AsRef<Path>) -> Option<Metadata> {
        std::fs::symlink_metadata(self.path(node_path)).ok()
    }

    /// Names of the entries of a directory, sorted; empty when it is missing.
    pub fn list(&self, node_path: impl AsRef<Path>) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.path(node_path)) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort_by_key(|name| natural_key(name));
        names
    }
}

/// Sort "port10" after "port9": split a trailing number off for comparison.
fn natural_key(name: &str) -> (String, u64) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (stem, number) = name.split_at(name.len() - digits);
    (stem.to_string(), number.parse().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_node_paths_both_ways() {
        let root = HostRoot { root: PathBuf::from("/tmp/fake"), live_interfaces: false };
        assert_eq!(root.path("/dev/kfd"), PathBuf::from("/tmp/fake/dev/kfd"));
        assert_eq!(root.node_path(Path::new("/tmp/fake/dev/kfd")), PathBuf::from("/dev/kfd"));
        assert_eq!(HostRoot::system().path("/dev/kfd"), PathBuf::from("/dev/kfd"));
    }

    #[test]
    fn only_the_real_root_asks_live_interfaces_unless_told() {
        assert!(HostRoot::open(Path::new("/")).unwrap().live_interfaces());
        let fake = tempfile::tempdir().unwrap();
        let root = HostRoot::open(fake.path()).unwrap();
        assert!(!root.live_interfaces());
        assert!(root.with_live_interfaces(true).live_interfaces());
    }

    #[test]
    fn a_relative_root_is_made_absolute() {
        let root = HostRoot::open(Path::new("src")).unwrap();
        assert_eq!(root.path("/dev/kfd"), std::env::current_dir().unwrap().join("src/dev/kfd"));
    }

    #[test]
    fn missing_root_is_a_clear_error() {
        let error = HostRoot::open(Path::new("/nonexistent/strix")).unwrap_err();
        assert_eq!(error.kind(), crate::error::ErrorKind::Host);
        assert_eq!(error.fix(), Some("pass an existing directory to --host-root (or unset STRIX_HOST_ROOT)"));
        let error = error.to_string();
        assert!(error.contains("/nonexistent/strix") && error.contains("--host-root"), "{error}");
    }

    #[test]
    fn natural_order() {
        let mut names = vec!["10", "9", "1"];
        names.sort_by_key(|name| natural_key(name));
        assert_eq!(names, ["1", "9", "10"]);
    }
}
