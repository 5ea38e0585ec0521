//! Each watched service's state, kept in `watch/SERVICE/state.json` as the watch last saw it:
//! what `cluster status` shows (given up, and why, above all), and the watch's own memory of the
//! service (its restart budget, the boot ids it saw) for a watch started again, which takes it up
//! where the last one left it when the record is still the same launch. The file outlives its
//! watch: what reads it asks whether that watch still runs ([`watched`]) and whether the launch
//! it speaks of is still there (`cluster status`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::dir::{unwritable, WatchDir};
use super::lock::running_watch;
use crate::error::Result;
use crate::watch::{State, Watcher};

/// The largest state file read (a few KiB).
const MAX_STATE_BYTES: u64 = 1 << 20;
/// The most services' states `cluster status` reads.
const MAX_SERVICES: usize = 256;
const STATE_FILE: &str = "state.json";

/// A watched service as `cluster status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchedService {
    pub service: String,
    pub state: State,
    /// The watch stopped restarting it: a human looks next.
    pub given_up: bool,
    /// Why it gave up, else the last fault it relaunched for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Relaunches the watch made since it started.
    pub restarts: u64,
    /// When the watch last looked (RFC 3339).
    pub updated: String,
    /// The pid of the watch that wrote it.
    pub watch_pid: u32,
    /// The record's start time: the launch it speaks of.
    #[serde(default)]
    pub record_started: String,
    /// The watch that wrote it runs now; else this is a past watch's last word.
    #[serde(default)]
    pub watching: bool,
}

/// What the file holds: the shown state, and the watch's memory of the launch it watched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedWatch {
    #[serde(flatten)]
    pub shown: WatchedService,
    pub watcher: Watcher,
}

pub fn state_path(service_dir: &Path) -> PathBuf {
    service_dir.join(STATE_FILE)
}

pub fn save(service_dir: &Path, saved: &SavedWatch) -> Result<()> {
    let path = state_path(service_dir);
    let partial = service_dir.join(format!("{STATE_FILE}.partial"));
    let text = serde_json::to_string_pretty(saved).unwrap_or_default();
    std::fs::write(&partial, text).and_then(|()| std::fs::rename(&partial, &path)).map_err(|e| unwritable(&path, &e))
}

pub fn load(service_dir: &Path) -> Option<SavedWatch> {
    let text = read_bounded(&state_path(service_dir))?;
    serde_json::from_str(&text).ok()
}

/// The service is no longer watched (its record is gone): its state goes.
pub fn forget(service_dir: &Path) {
    let _ = std::fs::remove_file(state_path(service_dir));
}

/// Every watched service's state in `dir`, by name, each saying whether the watch that wrote it
/// runs now.
pub fn watched(dir: &WatchDir) -> Vec<WatchedService> {
    let running = running_watch(dir);
    let mut found: Vec<WatchedService> = dir
        .service_dirs(MAX_SERVICES)
        .iter()
        .filter_map(|service| load(service))
        .map(|saved| WatchedService { watching: running == Some(saved.shown.watch_pid), ..saved.shown })
        .collect();
    found.sort_by(|a, b| a.service.cmp(&b.service));
    found
}

fn read_bounded(path: &Path) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    file.take(MAX_STATE_BYTES).read_to_string(&mut text).ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::{Start, WatchPolicy};

    #[test]
    fn a_saved_state_reads_back_and_status_lists_it() {
        let root = tempfile::tempdir().unwrap();
        let dir = WatchDir::at(root.path());
        let service = crate::serving::service_name::ServiceName::parse("tiny").unwrap();
        let service_dir = dir.service_dir(&service).unwrap();
        let mut watcher = Watcher::new(WatchPolicy::default(), Start::Serving);
        let step = watcher.give_up("3 restart(s) in the last 6h already".into());
        let saved = SavedWatch {
            shown: WatchedService {
                service: "tiny".into(),
                state: step.state,
                given_up: true,
                reason: watcher.given_up().map(str::to_string),
                restarts: 3,
                updated: "2026-11-26T10:00:00Z".into(),
                watch_pid: std::process::id(),
                record_started: "2026-11-26T09:00:00Z".into(),
                watching: true,
            },
            watcher,
        };
        save(&service_dir, &saved).unwrap();
        assert_eq!(load(&service_dir), Some(saved.clone()));
        // Its watch ended: its word is a past one's.
        let past = WatchedService { watching: false, ..saved.shown.clone() };
        assert_eq!(watched(&dir), std::slice::from_ref(&past));
        // A watch runs, but not the one that wrote it: still a past word.
        let other = crate::cluster::watch::lock::WatchLock::take(&dir).unwrap();
        let mut by_another = saved.clone();
        by_another.shown.watch_pid = std::process::id() + 1;
        save(&service_dir, &by_another).unwrap();
        assert!(!watched(&dir)[0].watching);
        // The one that wrote it runs.
        save(&service_dir, &saved).unwrap();
        assert_eq!(watched(&dir), [saved.shown]);
        drop(other);
        assert_eq!(watched(&dir), [past]);
        forget(&service_dir);
        assert!(watched(&dir).is_empty());
    }
}
