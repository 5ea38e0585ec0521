//! One watch per cluster: two would both relaunch the same service. The watch holds an
//! exclusive `flock` on the cluster's `watch.lock` for its whole life (the kernel drops it when the
//! process ends, however it ends), and writes its pid there for the refusal to name. Whether a
//! watch runs now is asked of the lock too ([`running_watch`]): `cluster status` tells the
//! running watch's word from a past one's.

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::time::{Duration, Instant};

use super::dir::{unwritable, WatchDir};
use crate::error::{Error, Result};
use crate::paths::open_lock_file;

/// Held while the watch runs.
#[derive(Debug)]
pub struct WatchLock {
    _file: File,
}

impl WatchLock {
    /// Take it, or refuse naming the watch that holds it. `cluster status` may hold it shared for
    /// a moment ([`running_watch`]): a refusal is said only when it stays held for
    /// [`TAKE_PATIENCE`].
    pub fn take(dir: &WatchDir) -> Result<WatchLock> {
        dir.create()?;
        let path = dir.lock_path();
        let mut file = open_lock_file(&path).map_err(|e| unwritable(&path, &e))?;
        let deadline = Instant::now() + TAKE_PATIENCE;
        loop {
            match file.try_lock() {
                Ok(()) => {
                    // Who holds it, for the refusal and for `cluster status`; the lock does not depend on it.
                    let _ = file.set_len(0).and_then(|()| writeln!(file, "{}", std::process::id()));
                    return Ok(WatchLock { _file: file });
                }
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => std::thread::sleep(TAKE_RETRY),
                Err(TryLockError::WouldBlock) => {
                    let who = holder_pid(&mut file).map_or("another process".to_string(), |pid| format!("pid {pid}"));
                    // A conflict, not a wrong command line: a failure (exit 1).
                    return Err(Error::host(
                        path.display().to_string(),
                        format!(
                            "a watch already runs on this cluster ({who}, lock {}); two would relaunch the same \
                             service twice",
                            path.display()
                        ),
                        "stop that one first (`cluster watch --uninstall` if it was installed, else Ctrl-C it), or \
                         pause it (`cluster watch --pause`)",
                    ));
                }
                Err(TryLockError::Error(e)) => return Err(unwritable(&path, &e)),
            }
        }
    }
}

/// How long a watch starting waits for the lock before it refuses: longer than `cluster status`
/// holds it to look.
const TAKE_PATIENCE: Duration = Duration::from_millis(500);
const TAKE_RETRY: Duration = Duration::from_millis(20);

/// The pid of the watch that runs on the cluster of `dir` now (None: none runs). Asked by taking
/// the lock shared for a moment: the kernel holds the running watch's lock for as long as it
/// lives, however it ended, so a state file's writer is running only while it holds it.
pub fn running_watch(dir: &WatchDir) -> Option<u32> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(dir.lock_path()).ok()?;
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            None
        }
        Err(TryLockError::WouldBlock) => holder_pid(&mut file),
        Err(TryLockError::Error(_)) => None,
    }
}

/// The pid the lock's holder wrote in it.
fn holder_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.rewind().and_then(|()| file.read_to_string(&mut text)).ok()?;
    text.trim().parse().ok()
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
        assert_eq!(running_watch(&dir), Some(std::process::id()), "the holder, as status asks it");
        drop(first);
        assert_eq!(running_watch(&dir), None, "it ended: none runs");
        WatchLock::take(&dir).unwrap();
    }
}
