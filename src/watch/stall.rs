//! A stall: work pending and no token. Work is pending when the engine says requests are running,
//! or when the watch's own probe was taken and got no answer in time (a stopped server answers no
//! metrics either). A token came when the engine's progress counter moved, or when the probe was
//! answered. The stall lasts from the beginning of the last look that saw a token come, or
//! nothing pending, to the end of this one (its probe waited until then). Looks begin every
//! interval and the probe waits an interval: with `--stall` at most two intervals, a service that
//! stopped just after a look is found stalled at the end of the next, within two intervals.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::clock::Moment;
use super::observation::{ProbeOutcome, Progress};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StallClock {
    /// The counter's last reading.
    last_generated: Option<f64>,
    /// The last look at which it moved, or nothing was pending.
    quiet_since: Option<Moment>,
}

impl StallClock {
    /// Take one look: how long work has been pending without progress; None when it is not.
    /// `began` and `at`: when the look began and ended.
    pub fn observe(
        &mut self,
        began: Moment,
        at: Moment,
        progress: Option<Progress>,
        probe: &ProbeOutcome,
    ) -> Option<Duration> {
        let pending = progress.is_some_and(|progress| progress.running > 0.0) || *probe == ProbeOutcome::TimedOut;
        // Any change is motion (down too: the engine started again); the first reading is a baseline.
        let counter_moved = match (progress, self.last_generated) {
            (Some(progress), Some(last)) => progress.generated != last,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let moved = counter_moved || *probe == ProbeOutcome::Passed;
        if let Some(progress) = progress {
            self.last_generated = Some(progress.generated);
        }
        if moved || !pending {
            self.quiet_since = Some(began);
            return None;
        }
        let since = *self.quiet_since.get_or_insert(began);
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

    const ANSWERED: ProbeOutcome = ProbeOutcome::Passed;
    const UNANSWERED: ProbeOutcome = ProbeOutcome::TimedOut;
    const NOT_ASKED: ProbeOutcome = ProbeOutcome::Skipped;

    #[test]
    fn pending_work_and_a_still_counter_make_a_stall_from_the_last_motion() {
        let mut clock = StallClock::default();
        assert_eq!(clock.observe(at(0), at(0), progress(10.0, 1.0), &NOT_ASKED), None, "a first reading is a baseline");
        assert_eq!(clock.observe(at(30), at(30), progress(20.0, 1.0), &NOT_ASKED), None, "moved");
        assert_eq!(clock.observe(at(60), at(60), progress(20.0, 1.0), &NOT_ASKED), Some(Duration::from_secs(30)));
        assert_eq!(clock.observe(at(90), at(90), progress(20.0, 2.0), &UNANSWERED), Some(Duration::from_secs(60)));
        assert_eq!(clock.observe(at(120), at(120), progress(21.0, 2.0), &NOT_ASKED), None, "moved again");
    }

    #[test]
    fn an_answered_probe_is_a_token_whatever_the_counter_read() {
        // The scrape runs beside the probe and may read the counter before the probe's token.
        let mut clock = StallClock::default();
        clock.observe(at(0), at(0), progress(10.0, 1.0), &ANSWERED);
        assert_eq!(clock.observe(at(30), at(30), progress(10.0, 1.0), &ANSWERED), None);
        assert_eq!(clock.observe(at(60), at(60), progress(10.0, 1.0), &NOT_ASKED), Some(Duration::from_secs(30)));
    }

    #[test]
    fn nothing_pending_is_no_stall() {
        let mut clock = StallClock::default();
        clock.observe(at(0), at(0), progress(5.0, 0.0), &NOT_ASKED);
        assert_eq!(clock.observe(at(600), at(600), progress(5.0, 0.0), &NOT_ASKED), None, "idle, not stalled");
        assert_eq!(clock.observe(at(630), at(630), None, &ANSWERED), None, "no metrics and a probe that answered");
    }

    #[test]
    fn a_probe_taken_and_unanswered_is_pending_work_even_without_metrics() {
        // SIGSTOP: the metrics cannot be read, the probe's connection is taken and nothing comes.
        // The look from 30 to 60 waited its probe's deadline: no token since the look at 0 began.
        let mut clock = StallClock::default();
        clock.observe(at(0), at(0), progress(5.0, 0.0), &ANSWERED);
        assert_eq!(clock.observe(at(30), at(60), None, &UNANSWERED), Some(Duration::from_secs(60)));
        assert_eq!(clock.observe(at(90), at(120), None, &UNANSWERED), Some(Duration::from_secs(120)));
    }

    #[test]
    fn a_counter_that_went_back_is_a_new_start() {
        let mut clock = StallClock::default();
        clock.observe(at(0), at(0), progress(500.0, 1.0), &NOT_ASKED);
        clock.observe(at(30), at(30), progress(500.0, 1.0), &NOT_ASKED);
        assert_eq!(clock.observe(at(60), at(60), progress(3.0, 1.0), &NOT_ASKED), None);
        clock.reset();
        assert_eq!(clock, StallClock::default());
    }
}
