//! The binary's [`Reporter`]s: bars on a terminal, sparse lines in a log, and for `--json` only
//! warnings (stdout carries the report alone; stderr stays readable).

mod bars;
mod lines;
mod transfer;

use std::time::Duration;

pub use bars::Bars;
pub use lines::Lines;

use super::stream::Stream;
use super::style::{Palette, Style};
use crate::reporter::Reporter;

/// `--json`: progress is not shown; a warning still is, on stderr.
pub struct Quiet {
    stderr: Stream,
    palette: Palette,
}

impl Quiet {
    pub fn new(stderr: Stream, palette: Palette) -> Quiet {
        Quiet { stderr, palette }
    }
}

impl Reporter for Quiet {
    fn layer(&self, _id: &str, _status: &str, _current: u64, _total: u64) {}
    fn layer_done(&self, _id: &str, _status: &str) {}
    fn step_started(&self, _subject: &str, _step: &str) {}
    fn step_finished(&self, _subject: &str, _outcome: &str) {}
    fn warning(&self, text: &str) {
        self.stderr.line(&warning_line(&self.palette, text));
    }
    fn line(&self, _text: &str) {}
    fn finish(&self) {}
}

/// `warning: text`, the word in the warning colour.
pub fn warning_line(palette: &Palette, text: &str) -> String {
    format!("{} {text}", palette.paint("warning:", Style::Warn))
}

/// `45s`, `3m 0s`, `1h 02m`.
fn human_duration(duration: Duration) -> String {
    let seconds = duration.as_secs();
    match seconds {
        s if s >= 3600 => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
        s if s >= 60 => format!("{}m {}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_a_person_would_say_them() {
        assert_eq!(human_duration(Duration::from_millis(45_900)), "45s");
        assert_eq!(human_duration(Duration::from_secs(180)), "3m 0s");
        assert_eq!(human_duration(Duration::from_secs(3725)), "1h 02m");
    }
}
