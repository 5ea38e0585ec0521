//! One watch per cluster: two would both relaunch the same service. The watch holds an
//! exclusive `flock` on the cluster's `watch.lock` for its whole life (the kernel drops it when the
//! process ends, however it ends), and writes its pid there for the refusal to name.

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};

use super::dir::{unwritable, WatchDir};
use crate::error::{Error, Result};
use crate::paths::open_lock_file;

/// Held while the watch runs.
#[derive(Debug)]
pub struct WatchLock {
    _file: File,
}

impl WatchLock {
    /// Take it, or refuse naming the watch that holds it.
    pub fn take(dir: &WatchDir) -> Result<WatchLock> {
        dir.create()?;
        let path = dir.lock_path();
        let mut file = open_lock_file(&path).map_err(|e| unwritable(&path, &e))?;
        match file.try_lock() {
            Ok(()) => {
                // Who holds it, for the refusal; the lock does not depend on it.
                let _ = file.set_len(0).and_then(|()| writeln!(file, "{}", std::process::id()));
                Ok(WatchLock { _file: file })
            }
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let holder =
                    file.rewind().and_then(|()| file.read_to_string(&mut text)).ok().map(|_| text.trim().to_string());
                let who = holder
                    .filter(|pid| !pid.is_empty())
                    .map_or("another process".to_string(), |pid| format!("pid {pid}"));
                // A conflict, not a wrong command line: a failure (exit 1).
                Err(Error::host(
                    path.display().to_string(),
                    format!(
                        "a watch already runs on this cluster ({who}, lock {}); two would relaunch the same service \
                         twice",
                        path.display()
                    ),
                    "stop that one first (`cluster watch --uninstall` if it was installed, else Ctrl-C it), or pause \
                     it (`cluster watch --pause`)",
                ))
            }
            Err(TryLockError::Error(e)) => Err(unwritable(&path, &e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_watch_is_refused_until_the_first_ends() {
        let root = tempfile::tempdir().unwrap();
        let dir = WatchDir::at(root.path());
        let first = WatchLock::take(&dir).unwrap();
        let refused = WatchLock::take(&dir).unwrap_err();
        assert_eq!((refused.kind(), refused.exit_code()), (crate::error::ErrorKind::Host, 1), "a failure, not usage");
        assert!(refused.to_string().contains(&format!("pid {}", std::process::id())), "{refused}");
        drop(first);
        WatchLock::take(&dir).unwrap();
    }
}
