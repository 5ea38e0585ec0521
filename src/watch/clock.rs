//! A moment on the watch's clock. The watch's decisions never read a clock: the caller passes the
//! moment of each observation, so tests drive a virtual clock. The caller's clock should be
//! monotonic and outlive the watch's own process (CLOCK_BOOTTIME on the machine that drives the
//! cluster): the restart budget then survives a restart of the watch.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Milliseconds on the caller's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Moment(pub u64);

impl Moment {
    /// How long after `earlier` this is (zero when it is not after).
    pub fn since(self, earlier: Moment) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// `duration` later.
    pub fn after(self, duration: Duration) -> Moment {
        Moment(self.0.saturating_add(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturates_both_ways() {
        assert_eq!(Moment(5_000).since(Moment(2_000)), Duration::from_secs(3));
        assert_eq!(Moment(2_000).since(Moment(5_000)), Duration::ZERO);
        assert_eq!(Moment(1).after(Duration::from_secs(2)), Moment(2_001));
        assert_eq!(Moment(u64::MAX - 1).after(Duration::MAX), Moment(u64::MAX));
    }
}
