//! A stall: work pending and the engine's progress counter standing still. Work is pending when
//! the engine says requests are running, or when the watch's own probe was taken and got no
//! answer in time (a stopped server answers no metrics either). The stall lasts from the last look
//! at which the counter moved or nothing was pending.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::clock::Moment;
use super::observation::Progress;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StallClock {
    /// The counter's last reading.
    last_generated: Option<f64>,
    /// The last look at which it moved, or nothing was pending.
    quiet_since: Option<Moment>,
}

impl StallClock {
    /// Take one look: how long work has been pending without progress; None when it is not.
    pub fn observe(&mut self, at: Moment, progress: Option<Progress>, probe_timed_out: bool) -> Option<Duration> {
        let pending = progress.is_some_and(|progress| progress.running > 0.0) || probe_timed_out;
        // Any change is motion (down too: the engine started again); the first reading is a baseline.
        let moved = match (progress, self.last_generated) {
            (Some(progress), Some(last)) => progress.generated != last,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if let Some(progress) = progress {
            self.last_generated = Some(progress.generated);
        }
        if moved || !pending {
            self.quiet_since = Some(at);
            return None;
        }
        let since = *self.quiet_since.get_or_insert(at);
        Some(at.since(since))
    }

    /// Forget what was seen: the engine starts again.
    pub fn reset(&mut self) {
        *self = StallClock::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64) -> Moment {
        Moment(seconds * 1000)
    }

    fn progress(generated: f64, running: f64) -> Option<Progress> {
        Some(Progress { generated, running })
    }

    #[test]
    fn pending_work_and_a_still_counter_make_a_stall_from_the_last_motion() {
        let mut clock = StallClock::default();
        assert_eq!(clock.observe(at(0), progress(10.0, 1.0), false), None, "a first reading is a baseline");
        assert_eq!(clock.observe(at(30), progress(20.0, 1.0), false), None, "moved");
        assert_eq!(clock.observe(at(60), progress(20.0, 1.0), false), Some(Duration::from_secs(30)));
        assert_eq!(clock.observe(at(90), progress(20.0, 2.0), false), Some(Duration::from_secs(60)));
        assert_eq!(clock.observe(at(120), progress(21.0, 2.0), false), None, "moved again");
    }

    #[test]
    fn nothing_pending_is_no_stall() {
        let mut clock = StallClock::default();
        clock.observe(at(0), progress(5.0, 0.0), false);
        assert_eq!(clock.observe(at(600), progress(5.0, 0.0), false), None, "idle, not stalled");
        assert_eq!(clock.observe(at(630), None, false), None, "no metrics and a probe that answered");
    }

    #[test]
    fn a_probe_taken_and_unanswered_is_pending_work_even_without_metrics() {
        // SIGSTOP: the metrics cannot be read, the probe's connection is taken and nothing comes.
        let mut clock = StallClock::default();
        clock.observe(at(0), progress(5.0, 0.0), false);
        assert_eq!(clock.observe(at(30), None, true), Some(Duration::from_secs(30)));
        assert_eq!(clock.observe(at(60), None, true), Some(Duration::from_secs(60)));
    }

    #[test]
    fn a_counter_that_went_back_is_a_new_start() {
        let mut clock = StallClock::default();
        clock.observe(at(0), progress(500.0, 1.0), false);
        clock.observe(at(30), progress(500.0, 1.0), false);
        assert_eq!(clock.observe(at(60), progress(3.0, 1.0), false), None);
        clock.reset();
        assert_eq!(clock, StallClock::default());
    }
}
