//! The one owner of stdout and stderr (cargo's `Shell`, uv's `Printer`): reports rendered as text
//! or `--json` in one place, check lists rendered once, status lines and warnings on stderr, and
//! the terminal's progress reporter. A reader that closes the pipe early is not a crash.

mod checks;
mod progress;
mod stream;
mod style;
mod table;

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use serde::Serialize;

pub use style::Style;
pub use table::Row;

use crate::check::Status;
use crate::container_engine::ExecSink;
use crate::reporter::Reporter;
use progress::{Bars, Lines, Quiet};
use stream::Stream;
use style::Palette;

/// How to talk to the user, decided once from flags, environment and the terminal.
#[derive(Debug, Clone, Copy)]
pub struct Mode {
    /// `--json`: stdout carries the report as JSON and nothing else.
    pub json: bool,
    pub color: bool,
    /// stderr is a terminal: progress is drawn as bars.
    pub bars: bool,
}

impl Mode {
    /// Colour when stderr is a terminal, unless `--no-color` or NO_COLOR says otherwise.
    pub fn detect(json: bool, no_color_flag: bool) -> Mode {
        let stderr_tty = std::io::stderr().is_terminal();
        let no_color_env = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Mode { json, color: stderr_tty && !no_color_flag && !no_color_env, bars: stderr_tty }
    }
}

/// A report's text form (its `--json` form is its `Serialize`). Implemented next to the command
/// that shows it.
pub trait Render {
    fn render(&self, out: &Output);
}

pub struct Output {
    mode: Mode,
    palette: Palette,
    stdout: Stream,
    stderr: Stream,
    reporter: Arc<dyn Reporter>,
}

impl Output {
    /// This process's stdout and stderr.
    pub fn for_terminal(json: bool, no_color_flag: bool) -> Output {
        Output::new(Mode::detect(json, no_color_flag), Box::new(std::io::stdout()), Box::new(std::io::stderr()))
    }

    /// Output to any writers (buffers in tests).
    pub fn new(mode: Mode, stdout: Box<dyn Write + Send>, stderr: Box<dyn Write + Send>) -> Output {
        let palette = Palette { color: mode.color };
        let stderr = Stream::new(stderr);
        let reporter: Arc<dyn Reporter> = match mode {
            Mode { json: true, .. } => Arc::new(Quiet::new(stderr.clone(), palette)),
            Mode { bars: true, .. } => Arc::new(Bars::new(stderr.clone(), palette)),
            Mode { .. } => Arc::new(Lines::new(stderr.clone(), palette)),
        };
        Output { mode, palette, stdout: Stream::new(stdout), stderr, reporter }
    }

    pub fn json(&self) -> bool {
        self.mode.json
    }

    /// The progress reporter the operations are given.
    pub fn reporter(&self) -> Arc<dyn Reporter> {
        self.reporter.clone()
    }

    /// A report on stdout: JSON with `--json`, else its text form. Progress is over by then: its
    /// bars end first, so the report is not drawn over.
    pub fn report<R: Serialize + Render + ?Sized>(&self, report: &R) {
        self.reporter.finish();
        if self.mode.json {
            self.print_json(report);
        } else {
            report.render(self);
        }
    }

    /// A value as pretty JSON on stdout.
    pub fn print_json<T: Serialize + ?Sized>(&self, value: &T) {
        match serde_json::to_string_pretty(value) {
            Ok(text) => self.stdout.line(&text),
            Err(e) => self.error(&format!("cannot render JSON: {e}")),
        }
    }

    /// A line of the command's output (stdout).
    pub fn line(&self, text: &str) {
        self.stdout.line(text);
    }

    /// Text on stdout as it is (a completion script).
    pub fn write(&self, text: &[u8]) {
        self.stdout.write(text);
    }

    /// Stdout's reader went away (`cluster top | head`): a live view has no one to draw for.
    pub fn stdout_closed(&self) -> bool {
        self.stdout.closed()
    }

    /// A status line on stderr; none with `--json`.
    pub fn status(&self, text: &str) {
        if !self.mode.json {
            self.stderr.line(text);
        }
    }

    /// A question on stderr, the answer typed after it on the same line.
    pub fn prompt(&self, question: &str) {
        self.stderr.write(question.as_bytes());
    }

    /// `warning: text` on stderr, with `--json` too.
    pub fn warn(&self, text: &str) {
        self.stderr.line(&progress::warning_line(&self.palette, text));
    }

    /// `error: text` on stderr.
    pub fn error(&self, text: &dyn std::fmt::Display) {
        self.stderr.line(&format!("{} {text}", self.paint("error:", Style::Fail)));
    }

    pub fn paint(&self, text: &str, style: Style) -> String {
        self.palette.paint(text, style)
    }

    /// `text` in the colour of a check's status (dim for info, skipped and not checked).
    pub fn paint_status(&self, status: Option<Status>, text: &str) -> String {
        self.palette.paint_status(status, text)
    }

    /// A check's status as a word at the start of a line: `pass`, `info`, `skip`, `warn`, `FAIL`.
    pub fn status_label(&self, status: Status) -> String {
        self.palette.status_label(status)
    }

    /// End of the command: progress finished, and its exit code — 1 instead of 0 when its output
    /// could not be written for another reason than a reader that went away.
    pub fn finish(&self, code: i32) -> i32 {
        self.reporter.finish();
        let failed = [("stdout", &self.stdout), ("stderr", &self.stderr)]
            .into_iter()
            .find_map(|(name, stream)| stream.take_error().map(|error| (name, error)));
        match failed {
            Some((name, error)) => {
                self.error(&format!("cannot write to {name}: {error}"));
                code.max(crate::error::EXIT_FAILURE)
            }
            None => code,
        }
    }
}

/// `enter NAME -- CMD`: the command's output, as it arrives, on ours.
impl ExecSink for Output {
    fn stdout(&self, bytes: &[u8]) {
        self.stdout.write(bytes);
    }

    fn stderr(&self, bytes: &[u8]) {
        self.stderr.write(bytes);
    }
}

/// An Output writing into buffers, and the buffers (stdout, stderr).
#[cfg(test)]
pub fn captured(json: bool) -> (Output, stream::Captured, stream::Captured) {
    let (stdout, stderr) = (stream::Captured::default(), stream::Captured::default());
    let mode = Mode { json, color: false, bars: false };
    (Output::new(mode, Box::new(stdout.clone()), Box::new(stderr.clone())), stdout, stderr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Greeting {
        to: String,
    }

    impl Render for Greeting {
        fn render(&self, out: &Output) {
            out.line(&format!("hello {}", self.to));
            out.status("said hello");
        }
    }

    #[test]
    fn a_report_is_its_text_or_its_json() {
        let greeting = Greeting { to: "node1".into() };
        let (text, stdout, stderr) = captured(false);
        text.report(&greeting);
        assert_eq!((stdout.text(), stderr.text()), ("hello node1\n".into(), "said hello\n".into()));

        let (json, stdout, stderr) = captured(true);
        json.report(&greeting);
        assert_eq!(stdout.text(), "{\n  \"to\": \"node1\"\n}\n");
        assert_eq!(stderr.text(), "", "status lines stay off stderr with --json");
    }

    #[test]
    fn warnings_and_errors_go_to_stderr_with_json_too() {
        let (out, stdout, stderr) = captured(true);
        out.warn("careful");
        out.error(&"it broke");
        assert_eq!(stdout.text(), "");
        assert_eq!(stderr.text(), "warning: careful\nerror: it broke\n");
    }

    #[test]
    fn a_closed_stdout_keeps_the_exit_code() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let stderr = stream::Captured::default();
        let mode = Mode { json: false, color: false, bars: false };
        let out = Output::new(mode, Box::new(Closed), Box::new(stderr.clone()));
        out.line("nobody reads this");
        out.line("nor this");
        assert_eq!(out.finish(0), 0);
        assert_eq!(out.finish(1), 1);
        assert_eq!(stderr.text(), "", "quiet");
    }
}
