//! Where the watch of one cluster keeps its files on the machine that drives the cluster:
//! `$XDG_STATE_HOME/strix-toolbox/clusters/HEAD/` (the cluster named by its head, as ssh reaches
//! it), holding the watch's lock (`watch.lock`: one watch per cluster), the pause file
//! (`watch.paused`), its event log (`watch/events.jsonl`), and per service
//! (`watch/SERVICE/`, the service's file-safe name) its state and the log tails saved at each
//! fault.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::paths::Paths;
use crate::serving::service_name::ServiceName;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchDir {
    root: PathBuf,
}

impl WatchDir {
    /// The watch's files of the cluster whose head is `head`.
    pub fn of(paths: &Paths, head: &str) -> Result<WatchDir> {
        Ok(WatchDir { root: paths.state_dir("the watch's state")?.join("clusters").join(file_safe(head)) })
    }

    /// Under `root` itself (a test's).
    #[cfg(test)]
    pub fn at(root: &Path) -> WatchDir {
        WatchDir { root: root.to_path_buf() }
    }

    /// Made when missing.
    pub fn create(&self) -> Result<()> {
        let dir = self.root.join("watch");
        std::fs::create_dir_all(&dir).map_err(|e| unwritable(&dir, &e))
    }

    pub fn lock_path(&self) -> PathBuf {
        self.root.join("watch.lock")
    }

    pub fn pause_path(&self) -> PathBuf {
        self.root.join("watch.paused")
    }

    pub fn events_path(&self) -> PathBuf {
        self.root.join("watch").join("events.jsonl")
    }

    /// `watch/SERVICE/`, made when missing.
    pub fn service_dir(&self, service: &ServiceName) -> Result<PathBuf> {
        let dir = self.root.join("watch").join(service.file_safe());
        std::fs::create_dir_all(&dir).map_err(|e| unwritable(&dir, &e))?;
        Ok(dir)
    }

    /// Every service's directory there is (what `cluster status` reads), at most `limit`.
    pub fn service_dirs(&self, limit: usize) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(self.root.join("watch")) else { return Vec::new() };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.path())
            .filter(|path| path.is_dir())
            .take(limit)
            .collect();
        dirs.sort();
        dirs
    }
}

/// A name as a file's: letters, digits, `.`, `_` and `-` kept, any other byte `%XX`.
fn file_safe(name: &str) -> String {
    let mut safe = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-') {
            safe.push(char::from(byte));
        } else {
            safe.push_str(&format!("%{byte:02X}"));
        }
    }
    if safe.starts_with('.') {
        safe.replace_range(0..1, "%2E");
    }
    safe
}

pub(super) fn unwritable(path: &Path, error: &std::io::Error) -> Error {
    Error::host(
        path.display().to_string(),
        format!("cannot write the watch's state at {}: {error}", path.display()),
        "make the state directory writable (XDG_STATE_HOME, else ~/.local/state)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_is_kept_under_its_head_as_a_file_may_name_it() {
        assert_eq!(file_safe("root@node1"), "root%40node1");
        assert_eq!(file_safe("../x"), "%2E.%2Fx");
        assert_eq!(file_safe("strix1.lan"), "strix1.lan");
    }
}
