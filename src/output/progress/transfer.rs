//! An image transfer over all its layers: how many bytes are known, how many are done. The
//! engines report per layer; the user wants the image's total, rate and time left.

use std::collections::HashMap;
use std::time::Duration;

/// Bytes of every layer reported so far. A layer's size is known once it starts downloading,
/// so the total grows while a pull begins; layers already here never have one.
#[derive(Debug, Default)]
pub struct Transfer {
    layers: HashMap<String, Layer>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Layer {
    done: u64,
    total: u64,
}

impl Transfer {
    /// A layer's progress as the engine reports it. Once downloaded a layer is extracted, and
    /// its bytes restart from zero: those are not transferred again.
    pub fn layer(&mut self, id: &str, status: &str, current: u64, total: u64) {
        let layer = self.layers.entry(id.to_string()).or_default();
        if downloaded(status) {
            layer.done = layer.total;
        } else if total > 0 {
            layer.total = total;
            layer.done = current.min(total);
        }
    }

    /// The layer is complete: all its bytes are done.
    pub fn layer_done(&mut self, id: &str) {
        let layer = self.layers.entry(id.to_string()).or_default();
        layer.done = layer.total;
    }

    pub fn done(&self) -> u64 {
        self.layers.values().map(|l| l.done).sum()
    }

    pub fn total(&self) -> u64 {
        self.layers.values().map(|l| l.total).sum()
    }

    /// Bytes per second over `elapsed` (None before any time passed).
    pub fn rate(&self, elapsed: Duration) -> Option<f64> {
        let seconds = elapsed.as_secs_f64();
        (seconds > 0.0).then(|| self.done() as f64 / seconds)
    }

    /// The time left at the rate so far (None while nothing is done).
    pub fn eta(&self, elapsed: Duration) -> Option<Duration> {
        let rate = self.rate(elapsed).filter(|r| *r > 0.0)?;
        Some(Duration::from_secs_f64(self.total().saturating_sub(self.done()) as f64 / rate))
    }
}

/// The statuses that come after a layer's bytes are all here.
fn downloaded(status: &str) -> bool {
    status.starts_with("Extracting")
        || matches!(status, "Verifying Checksum" | "Download complete" | "Pull complete" | "Already exists")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_add_up_over_every_layer() {
        let mut transfer = Transfer::default();
        transfer.layer("a", "Pulling fs layer", 0, 0);
        transfer.layer("a", "Downloading", 100, 1000);
        transfer.layer("b", "Downloading", 50, 500);
        transfer.layer("c", "Already exists", 0, 0);
        assert_eq!((transfer.done(), transfer.total()), (150, 1500));
        transfer.layer("a", "Downloading", 600, 1000);
        assert_eq!((transfer.done(), transfer.total()), (650, 1500));
    }

    #[test]
    fn extracting_does_not_count_the_bytes_again() {
        let mut transfer = Transfer::default();
        transfer.layer("a", "Downloading", 900, 1000);
        transfer.layer("a", "Extracting", 10, 1000);
        assert_eq!(transfer.done(), 1000);
        transfer.layer("a", "Extracting", 500, 1000);
        assert_eq!(transfer.done(), 1000);
        transfer.layer_done("a");
        assert_eq!((transfer.done(), transfer.total()), (1000, 1000));
    }

    #[test]
    fn a_finished_layer_counts_whole() {
        let mut transfer = Transfer::default();
        transfer.layer("a", "Downloading", 10, 1000);
        transfer.layer_done("a");
        transfer.layer_done("b"); // never had a size: nothing to add
        assert_eq!((transfer.done(), transfer.total()), (1000, 1000));
    }

    #[test]
    fn rate_and_time_left_follow_the_bytes_done() {
        let mut transfer = Transfer::default();
        assert_eq!(transfer.rate(Duration::ZERO), None);
        transfer.layer("a", "Downloading", 0, 4000);
        assert_eq!(transfer.eta(Duration::from_secs(1)), None, "nothing done: no estimate");
        transfer.layer("a", "Downloading", 1000, 4000);
        assert_eq!(transfer.rate(Duration::from_secs(10)), Some(100.0));
        assert_eq!(transfer.eta(Duration::from_secs(10)), Some(Duration::from_secs(30)));
    }
}
