//! Progress in a log (stderr is not a terminal): a line per step, the registry's and the build's
//! log lines, and for a transfer at most one line a minute plus a final one, so a pull of many
//! gigabytes does not flood the log.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use indicatif::HumanBytes;

use super::transfer::Transfer;
use super::{human_duration, warning_line};
use crate::output::stream::Stream;
use crate::output::style::Palette;
use crate::reporter::Reporter;

/// Where the time comes from: the system's, or a test's.
pub type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// The longest a transfer goes without a line.
const EVERY: Duration = Duration::from_secs(60);

pub struct Lines {
    stderr: Stream,
    palette: Palette,
    clock: Clock,
    transfer: Mutex<Option<Paced>>,
}

/// The transfer under way and when its last line was written.
struct Paced {
    started: Instant,
    last_line: Instant,
    transfer: Transfer,
}

impl Lines {
    pub fn new(stderr: Stream, palette: Palette) -> Lines {
        Lines::with_clock(stderr, palette, Arc::new(Instant::now))
    }

    pub fn with_clock(stderr: Stream, palette: Palette, clock: Clock) -> Lines {
        Lines { stderr, palette, clock, transfer: Mutex::new(None) }
    }

    /// Record a layer's news; write the transfer's line when a minute has passed since the last.
    fn update(&self, change: impl FnOnce(&mut Transfer)) {
        let now = (self.clock)();
        let mut current = self.transfer.lock().unwrap_or_else(PoisonError::into_inner);
        let paced =
            current.get_or_insert_with(|| Paced { started: now, last_line: now, transfer: Transfer::default() });
        change(&mut paced.transfer);
        if paced.transfer.total() > 0 && now.duration_since(paced.last_line) >= EVERY {
            paced.last_line = now;
            self.stderr.line(&progress_line(&paced.transfer, now.duration_since(paced.started)));
        }
    }
}

impl Reporter for Lines {
    fn layer(&self, id: &str, status: &str, current: u64, total: u64) {
        self.update(|transfer| transfer.layer(id, status, current, total));
    }

    fn layer_done(&self, id: &str, _status: &str) {
        self.update(|transfer| transfer.layer_done(id));
    }

    fn step_started(&self, subject: &str, step: &str) {
        self.stderr.line(&format!("• {subject}: {step}"));
    }

    fn step_finished(&self, subject: &str, outcome: &str) {
        self.stderr.line(&format!("{subject}: {outcome}"));
    }

    fn warning(&self, text: &str) {
        self.stderr.line(&warning_line(&self.palette, text));
    }

    fn line(&self, text: &str) {
        let text = text.trim_end();
        if !text.is_empty() {
            self.stderr.line(text);
        }
    }

    fn finish(&self) {
        let now = (self.clock)();
        let finished = self.transfer.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(paced) = finished.filter(|p| p.transfer.total() > 0) {
            self.stderr.line(&final_line(&paced.transfer, now.duration_since(paced.started)));
        }
    }
}

/// `image: 1.2 GiB of 4.5 GiB (27%), 35.2 MiB/s, about 1m 36s left`
fn progress_line(transfer: &Transfer, elapsed: Duration) -> String {
    let (done, total) = (transfer.done(), transfer.total());
    let percent = done * 100 / total.max(1);
    let rate = transfer.rate(elapsed).map_or("-".into(), |r| format!("{}/s", HumanBytes(r as u64)));
    let left = transfer.eta(elapsed).map_or("unknown".into(), human_duration);
    format!("image: {} of {} ({percent}%), {rate}, about {left} left", HumanBytes(done), HumanBytes(total))
}

/// `image: 4.5 GiB in 2m 10s (35.0 MiB/s)`, or what was done of what when it stopped early.
fn final_line(transfer: &Transfer, elapsed: Duration) -> String {
    let (done, total) = (transfer.done(), transfer.total());
    let amount = if done == total {
        HumanBytes(total).to_string()
    } else {
        format!("{} of {}", HumanBytes(done), HumanBytes(total))
    };
    let rate = transfer.rate(elapsed).map_or(String::new(), |r| format!(" ({}/s)", HumanBytes(r as u64)));
    format!("image: {amount} in {}{rate}", human_duration(elapsed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::stream::Captured;

    /// A clock the test moves by hand.
    fn clock() -> (Clock, Arc<Mutex<Duration>>) {
        let start = Instant::now();
        let offset = Arc::new(Mutex::new(Duration::ZERO));
        let now = offset.clone();
        (Arc::new(move || start + *now.lock().unwrap()), offset)
    }

    fn lines() -> (Lines, Captured, Arc<Mutex<Duration>>) {
        let captured = Captured::default();
        let (clock, offset) = clock();
        let lines = Lines::with_clock(Stream::new(Box::new(captured.clone())), Palette { color: false }, clock);
        (lines, captured, offset)
    }

    #[test]
    fn a_transfer_writes_at_most_a_line_a_minute_and_a_final_one() {
        let (lines, captured, time) = lines();
        let at = |seconds: u64| *time.lock().unwrap() = Duration::from_secs(seconds);
        let mib = 1 << 20;
        lines.layer("a", "Downloading", 0, 600 * mib);
        lines.layer("b", "Downloading", 0, 600 * mib);
        for second in 1..=59 {
            at(second);
            lines.layer("a", "Downloading", second * 5 * mib, 600 * mib);
        }
        assert_eq!(captured.text(), "", "nothing in the first minute");
        at(60);
        lines.layer("a", "Downloading", 300 * mib, 600 * mib);
        at(61);
        lines.layer("b", "Downloading", 100 * mib, 600 * mib);
        at(119);
        lines.layer_done("a", "Pull complete");
        assert_eq!(
            captured.text(),
            "image: 300.00 MiB of 1.17 GiB (25%), 5.00 MiB/s, about 3m 0s left\n",
            "one line at the minute"
        );
        at(120);
        lines.layer("b", "Downloading", 600 * mib, 600 * mib);
        at(125);
        lines.finish();
        let text = captured.text();
        let written: Vec<&str> = text.lines().collect();
        assert_eq!(written.len(), 3, "{text}");
        assert_eq!(written[1], "image: 1.17 GiB of 1.17 GiB (100%), 10.00 MiB/s, about 0s left");
        assert_eq!(written[2], "image: 1.17 GiB in 2m 5s (9.60 MiB/s)");
    }

    #[test]
    fn an_image_already_here_writes_no_transfer_line() {
        let (lines, captured, _) = lines();
        lines.layer_done("a", "Already exists");
        lines.line("Digest: sha256:abc\n");
        lines.finish();
        assert_eq!(captured.text(), "Digest: sha256:abc\n");
    }

    #[test]
    fn each_transfer_starts_its_own_clock_and_tally() {
        let (lines, captured, time) = lines();
        lines.layer("a", "Downloading", 0, 1000);
        *time.lock().unwrap() = Duration::from_secs(10);
        lines.layer_done("a", "Pull complete");
        lines.finish();
        lines.layer("b", "Downloading", 0, 500);
        *time.lock().unwrap() = Duration::from_secs(15);
        lines.layer_done("b", "Pull complete");
        lines.finish();
        assert_eq!(captured.text(), "image: 1000 B in 10s (100 B/s)\nimage: 500 B in 5s (100 B/s)\n");
    }

    #[test]
    fn steps_and_warnings_are_lines() {
        let (lines, captured, _) = lines();
        lines.step_started("node1", "staging");
        lines.step_finished("node1", "staging: done");
        lines.warning("kept a pin");
        assert_eq!(captured.text(), "• node1: staging\nnode1: staging: done\nwarning: kept a pin\n");
    }
}
