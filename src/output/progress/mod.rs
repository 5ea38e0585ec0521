//! The binary's [`Reporter`]s: bars on a terminal, sparse lines in a log, and for `--json` only
//! warnings (stdout carries the report alone; stderr stays readable).

mod bars;
mod lines;

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
