//! Progress on a terminal: a bar for the whole image (total size, bytes done, rate, time left)
//! above one bar per layer, and a status line per subject whose steps are under way.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::transfer::Transfer;
use super::warning_line;
use crate::image::short_digest;
use crate::output::stream::Stream;
use crate::output::style::Palette;
use crate::reporter::Reporter;

pub struct Bars {
    stderr: Stream,
    palette: Palette,
    batch: Mutex<Option<Batch>>,
}

/// The bars of one transfer or batch of steps, drawn together until [`Reporter::finish`].
struct Batch {
    multi: MultiProgress,
    transfer: Transfer,
    /// The whole image, once a layer's size is known.
    image: Option<ProgressBar>,
    layers: HashMap<String, ProgressBar>,
    /// The step under way for each subject, and its text.
    steps: HashMap<String, (ProgressBar, String)>,
}

impl Batch {
    fn new() -> Batch {
        Batch {
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
            transfer: Transfer::default(),
            image: None,
            layers: HashMap::new(),
            steps: HashMap::new(),
        }
    }

    fn layer_bar(&mut self, id: &str) -> &ProgressBar {
        let multi = &self.multi;
        self.layers.entry(id.to_string()).or_insert_with(|| {
            let bar = multi.add(ProgressBar::new(0));
            bar.set_style(status_style());
            bar.set_prefix(short_digest(id).to_string());
            bar
        })
    }

    /// A status line for `subject`'s step.
    fn step_bar(&self, subject: &str) -> ProgressBar {
        let bar = self.multi.add(ProgressBar::new(0));
        bar.set_style(status_style());
        bar.set_prefix(subject.to_string());
        bar
    }

    /// The image's bar follows the sum over its layers (the first line, above the layers).
    fn update_image_bar(&mut self) {
        let total = self.transfer.total();
        if total == 0 {
            return;
        }
        let multi = &self.multi;
        let bar = self.image.get_or_insert_with(|| {
            let bar = multi.insert(0, ProgressBar::new(total));
            bar.set_style(image_style());
            bar.set_prefix("image");
            bar
        });
        bar.set_length(total);
        bar.set_position(self.transfer.done());
    }

    fn finish(self) {
        for bar in self.image.iter().chain(self.layers.values()).chain(self.steps.values().map(|(bar, _)| bar)) {
            if !bar.is_finished() {
                bar.finish();
            }
        }
    }
}

impl Bars {
    pub fn new(stderr: Stream, palette: Palette) -> Bars {
        Bars { stderr, palette, batch: Mutex::new(None) }
    }

    fn with_batch<T>(&self, work: impl FnOnce(&mut Batch) -> T) -> T {
        let mut batch = self.batch.lock().unwrap_or_else(PoisonError::into_inner);
        work(batch.get_or_insert_with(Batch::new))
    }

    /// A line above the bars while they are drawn, else straight to stderr.
    fn print(&self, text: &str) {
        let batch = self.batch.lock().unwrap_or_else(PoisonError::into_inner);
        match &*batch {
            Some(batch) => {
                let _ = batch.multi.println(text);
            }
            None => self.stderr.line(text),
        }
    }
}

impl Reporter for Bars {
    fn layer(&self, id: &str, status: &str, current: u64, total: u64) {
        self.with_batch(|batch| {
            batch.transfer.layer(id, status, current, total);
            let bar = batch.layer_bar(id);
            if total > 0 && bar.length() != Some(total) {
                bar.set_style(bytes_style());
                bar.set_length(total);
            }
            bar.set_position(current);
            bar.set_message(status.to_string());
            batch.update_image_bar();
        });
    }

    fn layer_done(&self, id: &str, status: &str) {
        self.with_batch(|batch| {
            batch.transfer.layer_done(id);
            let bar = batch.layer_bar(id);
            if let Some(length) = bar.length().filter(|l| *l > 0) {
                bar.set_position(length);
            }
            bar.finish_with_message(status.to_string());
            batch.update_image_bar();
        });
    }

    /// The subject's step before stays on screen, done; the new one is drawn under it.
    fn step_started(&self, subject: &str, step: &str) {
        self.with_batch(|batch| {
            if let Some((bar, before)) = batch.steps.remove(subject) {
                bar.finish_with_message(before);
            }
            let bar = batch.step_bar(subject);
            bar.set_message(format!("{step}…"));
            batch.steps.insert(subject.to_string(), (bar, step.to_string()));
        });
    }

    fn step_finished(&self, subject: &str, outcome: &str) {
        self.with_batch(|batch| {
            let bar = match batch.steps.remove(subject) {
                Some((bar, _)) => bar,
                None => batch.step_bar(subject),
            };
            bar.finish_with_message(outcome.to_string());
        });
    }

    fn warning(&self, text: &str) {
        self.print(&warning_line(&self.palette, text));
    }

    fn line(&self, text: &str) {
        let text = text.trim_end();
        if !text.is_empty() {
            self.print(text);
        }
    }

    fn finish(&self) {
        if let Some(batch) = self.batch.lock().unwrap_or_else(PoisonError::into_inner).take() {
            batch.finish();
        }
    }
}

/// A layer or subject with a status and no size.
fn status_style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix:.dim} {msg}").unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// A layer being downloaded: a bar with bytes.
fn bytes_style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix:.dim} {msg:<12} [{bar:30}] {bytes}/{total_bytes}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// The whole image: bytes of the total, rate and time left.
fn image_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{prefix:<12.bold} {msg:<12} [{bar:30}] {bytes}/{total_bytes}  {bytes_per_sec}, {eta} left",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_bar_sums_every_layer() {
        let bars = Bars::new(Stream::new(Box::new(std::io::sink())), Palette { color: false });
        bars.layer("a", "Downloading", 100, 1000);
        bars.layer("b", "Downloading", 50, 500);
        bars.layer_done("c", "Already exists");
        let image = |bars: &Bars| {
            let batch = bars.batch.lock().unwrap();
            let bar = batch.as_ref().unwrap().image.clone().unwrap();
            (bar.position(), bar.length())
        };
        assert_eq!(image(&bars), (150, Some(1500)));
        bars.layer_done("a", "Pull complete");
        assert_eq!(image(&bars), (1050, Some(1500)));
        bars.finish();
        assert!(bars.batch.lock().unwrap().is_none(), "the next transfer starts afresh");
    }

    #[test]
    fn each_step_of_a_subject_stays_on_screen_done_in_turn() {
        let bars = Bars::new(Stream::new(Box::new(std::io::sink())), Palette { color: false });
        bars.step_started("vllm", "create vllm-strix-new");
        let first = bars.batch.lock().unwrap().as_ref().unwrap().steps["vllm"].0.clone();
        assert_eq!(first.message(), "create vllm-strix-new…");
        bars.step_started("vllm", "swap it in");
        assert!(first.is_finished());
        assert_eq!(first.message(), "create vllm-strix-new");
        let second = bars.batch.lock().unwrap().as_ref().unwrap().steps["vllm"].0.clone();
        bars.step_finished("vllm", "swap it in: done");
        assert!(second.is_finished());
        assert_eq!(second.message(), "swap it in: done");
    }
}
