//! The watch's event log: one JSON line per change (`watch/events.jsonl` in the cluster's state
//! directory, and what the foreground watch prints), so that when a service stalled, when the
//! watch saw it, and when it served again can be read back (scripts/watch-recovery.sh does).
//! A line is written when a service's state changes or the watch acts, not at every look.

use std::io::Write;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::dir::unwritable;
use crate::error::Result;
use crate::watch::State;

/// What the watch did at an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WatchAction {
    /// It found the service (when it started, or once its record appeared).
    Watching,
    /// The state changed; nothing to do.
    Changed,
    /// Its operator launched it again (another start time): the watch reads the new record.
    Reread,
    /// Its record is gone (its operator stopped it): no longer watched.
    Dropped,
    /// A fault: the nodes' log tails saved, the whole service relaunched.
    Relaunch,
    /// The nodes still hold GPU memory: the relaunch waits.
    WaitMemory,
    /// A node's kernel says its GPU hung: the reason is the kernel's line.
    GpuHang,
    /// The relaunch proved it serves again (it loads until its first probe passes).
    Relaunched,
    RelaunchFailed,
    /// No restart left: given up, `--on-give-up` run.
    GiveUp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchEvent {
    /// When (RFC 3339, milliseconds).
    pub time: String,
    pub service: String,
    pub state: State,
    pub action: WatchAction,
    /// Why (the fault, the wait, the failure), or what was done (the saved logs' file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl WatchEvent {
    pub fn now(service: &str, state: State, action: WatchAction, reason: Option<String>) -> WatchEvent {
        WatchEvent {
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            service: service.to_string(),
            state,
            action,
            reason,
        }
    }
}

/// Appends events to the log file.
#[derive(Debug, Clone)]
pub struct EventLog {
    path: PathBuf,
}

impl EventLog {
    pub fn at(path: PathBuf) -> EventLog {
        EventLog { path }
    }

    pub fn append(&self, event: &WatchEvent) -> Result<()> {
        let line = serde_json::to_string(event).unwrap_or_default();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| unwritable(&self.path, &e))?;
        writeln!(file, "{line}").map_err(|e| unwritable(&self.path, &e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_is_one_json_line_appended() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::at(dir.path().join("events.jsonl"));
        let stalled = WatchEvent::now("tiny", State::Stalled, WatchAction::Relaunch, Some("stalled: …".into()));
        log.append(&stalled).unwrap();
        log.append(&WatchEvent::now("tiny", State::Serving, WatchAction::Changed, None)).unwrap();
        let text = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
        let lines: Vec<WatchEvent> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        assert_eq!(lines[0], stalled);
        assert_eq!((lines[1].state, lines[1].action), (State::Serving, WatchAction::Changed));
        assert!(text.lines().nth(1).unwrap().contains(r#""state":"serving","action":"changed""#), "{text}");
    }
}
