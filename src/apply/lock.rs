//! One refresh per toolbox name at a time: an advisory lock file under the XDG runtime dir.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::PathBuf;

use crate::error::{Error, Result};

/// Held for the whole refresh; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct ToolboxLock {
    _file: File,
}

/// `$XDG_RUNTIME_DIR/strix-toolbox`, else `/run/strix-toolbox` for root, else the temp dir.
pub fn lock_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("strix-toolbox");
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from("/run/strix-toolbox");
    }
    std::env::temp_dir().join(format!("strix-toolbox-{}", unsafe { libc::geteuid() }))
}

impl ToolboxLock {
    /// Take the lock for `name`, failing at once when another refresh holds it.
    pub fn acquire(name: &str) -> Result<ToolboxLock> {
        Self::acquire_in(&lock_dir(), name)
    }

    pub fn acquire_in(dir: &std::path::Path, name: &str) -> Result<ToolboxLock> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Failed(format!("cannot create the lock directory {}: {e}", dir.display())))?;
        let path = dir.join(format!("{name}.lock"));
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::Failed(format!("cannot open the lock file {}: {e}", path.display())))?;
        match file.try_lock() {
            Ok(()) => Ok(ToolboxLock { _file: file }),
            Err(TryLockError::WouldBlock) => Err(Error::Failed(format!(
                "another strix-toolbox is already refreshing {name} (lock {}). Fix: wait for it to finish",
                path.display()
            ))),
            Err(TryLockError::Error(e)) => Err(Error::Failed(format!("cannot lock {}: {e}", path.display()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_on_the_same_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = ToolboxLock::acquire_in(dir.path(), "vllm").unwrap();
        let error = ToolboxLock::acquire_in(dir.path(), "vllm").unwrap_err().to_string();
        assert!(error.contains("already refreshing vllm"), "{error}");
        let _other = ToolboxLock::acquire_in(dir.path(), "vllm-dev").unwrap();
        drop(first);
        ToolboxLock::acquire_in(dir.path(), "vllm").unwrap();
    }
}
