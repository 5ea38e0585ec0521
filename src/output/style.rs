//! Colour: on when stderr is a terminal, unless NO_COLOR is set or `--no-color` given.

use crate::check::Status;

#[derive(Debug, Clone, Copy)]
pub enum Style {
    Ok,
    Warn,
    Fail,
    Bold,
    Dim,
}

/// Paints text, or leaves it plain when colour is off.
#[derive(Debug, Clone, Copy)]
pub struct Palette {
    pub color: bool,
}

impl Palette {
    pub fn paint(&self, text: &str, style: Style) -> String {
        if !self.color {
            return text.to_string();
        }
        let code = match style {
            Style::Ok => "32",
            Style::Warn => "33",
            Style::Fail => "31",
            Style::Bold => "1",
            Style::Dim => "2",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }

    /// `text` in the colour of a check's status (dim for info, skipped and not checked).
    pub fn paint_status(&self, status: Option<Status>, text: &str) -> String {
        let style = match status {
            Some(Status::Pass) => Style::Ok,
            Some(Status::Warn) => Style::Warn,
            Some(Status::Fail) => Style::Fail,
            Some(Status::Info | Status::Skipped) | None => Style::Dim,
        };
        self.paint(text, style)
    }

    /// A check's status as a word at the start of a line: `pass`, `info`, `skip`, `warn`, `FAIL`.
    pub fn status_label(&self, status: Status) -> String {
        let word = match status {
            Status::Pass => "pass",
            Status::Info => "info",
            Status::Skipped => "skip",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        self.paint_status(Some(status), word)
    }
}
