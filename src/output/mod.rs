//! Terminal output: colour (off with NO_COLOR or --no-color), progress bars, JSON on stdout.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::Mutex;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use crate::check::Status;
use crate::image::short_digest;

/// How to talk to the user, decided once from flags, environment and the terminal.
#[derive(Debug, Clone, Copy)]
pub struct Ui {
    pub json: bool,
    pub color: bool,
    /// stderr is a terminal: progress bars are drawn.
    pub interactive: bool,
}

impl Ui {
    pub fn new(json: bool, no_color_flag: bool) -> Self {
        let stderr_tty = std::io::stderr().is_terminal();
        let no_color_env = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Ui { json, color: stderr_tty && !no_color_flag && !no_color_env, interactive: stderr_tty }
    }

    /// A progress reporter: bars on a terminal, plain lines otherwise, silent for JSON.
    pub fn progress(&self) -> Progress {
        Progress::new(self.interactive && !self.json, !self.json)
    }

    /// Print a value as pretty JSON on stdout.
    pub fn print_json<T: Serialize>(&self, value: &T) {
        match serde_json::to_string_pretty(value) {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("error: cannot render JSON: {e}"),
        }
    }

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

    /// A status line on stderr (never on stdout, which belongs to --json and to commands' output).
    pub fn status(&self, text: &str) {
        if !self.json {
            eprintln!("{text}");
        }
    }

    pub fn warn(&self, text: &str) {
        eprintln!("{} {text}", self.paint("warning:", Style::Warn));
    }
}

#[derive(Debug, Clone, Copy)]
pub enum Style {
    Ok,
    Warn,
    Fail,
    Bold,
    Dim,
}

/// Pull/push/build progress: one bar per layer plus a log line area.
pub struct Progress {
    multi: Option<MultiProgress>,
    bars: Mutex<HashMap<String, ProgressBar>>,
    /// Print plain lines (when not drawing bars and not in JSON mode).
    lines: bool,
}

impl Progress {
    fn new(bars: bool, lines: bool) -> Self {
        let multi = bars.then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
        Progress { multi, bars: Mutex::new(HashMap::new()), lines }
    }

    /// A reporter that shows nothing (tests, JSON mode).
    pub fn hidden() -> Self {
        Progress::new(false, false)
    }

    /// Report a layer's status and bytes done (`total` 0 while the size is unknown).
    pub fn layer(&self, id: &str, status: &str, current: u64, total: u64) {
        let Some(multi) = &self.multi else { return };
        let Ok(mut bars) = self.bars.lock() else { return };
        let bar = bars.entry(id.to_string()).or_insert_with(|| {
            let bar = multi.add(ProgressBar::new(0));
            bar.set_style(status_style());
            bar.set_prefix(short_digest(id).to_string());
            bar
        });
        if total > 0 && bar.length() != Some(total) {
            bar.set_style(bytes_style());
            bar.set_length(total);
        }
        bar.set_position(current);
        bar.set_message(status.to_string());
    }

    /// Mark a layer finished (a plain line when no bars are drawn).
    pub fn layer_done(&self, id: &str, status: &str) {
        if self.multi.is_none() {
            if self.lines {
                eprintln!("{} {status}", short_digest(id));
            }
            return;
        }
        self.layer(id, status, 0, 0);
        if let Ok(bars) = self.bars.lock() {
            if let Some(bar) = bars.get(id) {
                bar.finish_with_message(status.to_string());
            }
        }
    }

    /// One line of build or pull log.
    pub fn line(&self, text: &str) {
        let text = text.trim_end();
        if text.is_empty() {
            return;
        }
        match &self.multi {
            Some(multi) => {
                let _ = multi.println(text);
            }
            None if self.lines => eprintln!("{text}"),
            None => {}
        }
    }

    pub fn finish(&self) {
        if let Ok(bars) = self.bars.lock() {
            for bar in bars.values() {
                if !bar.is_finished() {
                    bar.finish();
                }
            }
        }
    }
}

/// A layer whose size is not known yet: its id and status.
fn status_style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix:.dim} {msg}").unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// A layer being downloaded: a bar with bytes.
fn bytes_style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix:.dim} {msg:<12} [{bar:30}] {bytes}/{total_bytes}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}
