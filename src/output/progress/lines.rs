//! Progress in a log (stderr is not a terminal): a line per step, per finished layer, and the
//! registry's and the build's log lines.

use super::warning_line;
use crate::image::short_digest;
use crate::output::stream::Stream;
use crate::output::style::Palette;
use crate::reporter::Reporter;

pub struct Lines {
    stderr: Stream,
    palette: Palette,
}

impl Lines {
    pub fn new(stderr: Stream, palette: Palette) -> Lines {
        Lines { stderr, palette }
    }
}

impl Reporter for Lines {
    fn layer(&self, _id: &str, _status: &str, _current: u64, _total: u64) {}

    fn layer_done(&self, id: &str, status: &str) {
        self.stderr.line(&format!("{} {status}", short_digest(id)));
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

    fn finish(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::stream::Captured;

    #[test]
    fn steps_and_warnings_are_lines() {
        let captured = Captured::default();
        let lines = Lines::new(Stream::new(Box::new(captured.clone())), Palette { color: false });
        lines.step_started("node1", "staging");
        lines.step_finished("node1", "staging: done");
        lines.warning("kept a pin");
        assert_eq!(captured.text(), "• node1: staging\nnode1: staging: done\nwarning: kept a pin\n");
    }
}
