//! What the core tells while it works (uv's `Reporter`): transfer progress, steps, warnings, log
//! lines. The core only calls this trait; the binary decides how it looks (bars on a terminal,
//! sparse lines in a log, nothing for `--json`), so nothing below `commands/` knows the terminal.

use std::fmt;

/// Progress of a long operation, as it happens. Every method may be called from any task.
pub trait Reporter: Send + Sync {
    /// A layer of an image being pulled or pushed: its status and bytes done of `total` (0 while
    /// the size is unknown).
    fn layer(&self, id: &str, status: &str, current: u64, total: u64);
    /// A layer is finished (pulled, or already here).
    fn layer_done(&self, id: &str, status: &str);
    /// `subject` (a toolbox, a node) begins `step`; its step before, if any, went well.
    fn step_started(&self, subject: &str, step: &str);
    /// `subject`'s last step is over: `outcome` says which and how ("staging: done",
    /// "… is sha256:…").
    fn step_finished(&self, subject: &str, outcome: &str);
    /// Something the user should know now, not only in the final report.
    fn warning(&self, text: &str);
    /// One line of a build's or a registry's log.
    fn line(&self, text: &str);
    /// The current transfer or batch of steps is over: bars end, a summary may follow.
    fn finish(&self);
}

/// Settings and cluster settings carry a reporter and derive Debug.
impl fmt::Debug for dyn Reporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Reporter")
    }
}

/// A reporter that shows nothing (tests, and callers that only want the result).
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Reporter for Silent {
    fn layer(&self, _id: &str, _status: &str, _current: u64, _total: u64) {}
    fn layer_done(&self, _id: &str, _status: &str) {}
    fn step_started(&self, _subject: &str, _step: &str) {}
    fn step_finished(&self, _subject: &str, _outcome: &str) {}
    fn warning(&self, _text: &str) {}
    fn line(&self, _text: &str) {}
    fn finish(&self) {}
}

/// A reporter that keeps what it is told, one line per event, for tests to read.
#[cfg(test)]
#[derive(Debug, Default)]
pub struct Recorder(std::sync::Mutex<Vec<String>>);

#[cfg(test)]
impl Recorder {
    pub fn events(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    fn record(&self, event: String) {
        self.0.lock().unwrap().push(event);
    }
}

#[cfg(test)]
impl Reporter for Recorder {
    fn layer(&self, id: &str, status: &str, current: u64, total: u64) {
        self.record(format!("layer {id}: {status} {current}/{total}"));
    }
    fn layer_done(&self, id: &str, status: &str) {
        self.record(format!("layer {id}: {status}"));
    }
    fn step_started(&self, subject: &str, step: &str) {
        self.record(format!("{subject}: {step}"));
    }
    fn step_finished(&self, subject: &str, outcome: &str) {
        self.record(format!("{subject} finished: {outcome}"));
    }
    fn warning(&self, text: &str) {
        self.record(format!("warning: {text}"));
    }
    fn line(&self, text: &str) {
        self.record(format!("line: {text}"));
    }
    fn finish(&self) {
        self.record("finish".into());
    }
}

/// A byte count as people read it, in binary units (`15 B`, `1.46 KiB`, `1.40 GiB`): what the
/// core's step messages say about sizes, the same way the progress bars do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 8] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"];
        if self.0 < 1024 {
            return write!(f, "{} B", self.0);
        }
        let mut amount = self.0 as f64 / 1024.0;
        let mut unit = 0;
        while amount >= 1024.0 && unit + 1 < UNITS.len() {
            amount /= 1024.0;
            unit += 1;
        }
        write!(f, "{amount:.2} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::Bytes;

    #[test]
    fn bytes_read_as_binary_units_like_the_progress_bars() {
        for count in [0, 15, 1023, 1024, 1_500, 1_500_000, 1_500_000_000, 1_500_000_000_000, u64::MAX] {
            assert_eq!(Bytes(count).to_string(), indicatif::HumanBytes(count).to_string(), "{count}");
        }
        assert_eq!(Bytes(1_500).to_string(), "1.46 KiB");
    }
}
