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
        // The lock directory is XDG_RUNTIME_DIR's (or /run's, or TMPDIR's): the fix is to give a writable one.
        let unusable = |message: String| {
            Error::host(dir.display().to_string(), message, "set XDG_RUNTIME_DIR to a writable directory")
        };
        std::fs::create_dir_all(dir)
            .map_err(|e| unusable(format!("cannot create the lock directory {}: {e}", dir.display())))?;
        let path = dir.join(format!("{name}.lock"));
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| unusable(format!("cannot open the lock file {}: {e}", path.display())))?;
        match file.try_lock() {
            Ok(()) => Ok(ToolboxLock { _file: file }),
            Err(TryLockError::WouldBlock) => Err(Error::toolbox(
                name,
                format!("another strix-toolbox is already refreshing {name} (lock {})", path.display()),
                "wait for it to finish",
            )),
            Err(TryLockError::Error(e)) => Err(unusable(format!("cannot lock {}: {e}", path.display()))),
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
        let error = ToolboxLock::acquire_in(dir.path(), "vllm").unwrap_err();
        assert_eq!(error.kind(), crate::error::ErrorKind::Toolbox);
        let error = error.to_string();
        assert!(error.contains("already refreshing vllm") && error.ends_with("Fix: wait for it to finish"), "{error}");
        let _other = ToolboxLock::acquire_in(dir.path(), "vllm-dev").unwrap();
        drop(first);
        ToolboxLock::acquire_in(dir.path(), "vllm").unwrap();
    }
}
