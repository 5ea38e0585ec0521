//! `cluster watch --pause` / `--resume`: a file in the cluster's state directory that the running
//! watch reads at every look (it then restarts nothing, and starts afresh once it is gone: the
//! operator may have restarted anything meanwhile).

use serde::{Deserialize, Serialize};

use super::dir::{unwritable, WatchDir};
use crate::error::Result;

/// What `--pause` and `--resume` did (their `--json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseReport {
    pub paused: bool,
    /// The pause file.
    pub file: String,
    /// It already was so (nothing changed).
    pub already: bool,
}

pub fn is_paused(dir: &WatchDir) -> bool {
    dir.pause_path().exists()
}

/// Pause (`true`) or resume the watch of this cluster, running or not.
pub fn set_paused(dir: &WatchDir, paused: bool) -> Result<PauseReport> {
    let path = dir.pause_path();
    let already = is_paused(dir) == paused;
    if paused && !already {
        dir.create()?;
        let since = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        std::fs::write(&path, format!("paused since {since} by `strix-toolbox cluster watch --pause`\n"))
            .map_err(|e| unwritable(&path, &e))?;
    }
    if !paused && !already {
        std::fs::remove_file(&path).map_err(|e| unwritable(&path, &e))?;
    }
    Ok(PauseReport { paused, file: path.display().to_string(), already })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_and_resume_are_idempotent() {
        let root = tempfile::tempdir().unwrap();
        let dir = WatchDir::at(root.path());
        assert!(!is_paused(&dir));
        assert!(!set_paused(&dir, true).unwrap().already);
        assert!(set_paused(&dir, true).unwrap().already);
        assert!(is_paused(&dir));
        assert!(!set_paused(&dir, false).unwrap().already);
        assert!(set_paused(&dir, false).unwrap().already);
        assert!(!is_paused(&dir));
    }
}
