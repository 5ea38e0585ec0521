//! What the watch is told: how often it looks, how long a stall and how many failed probes in a
//! row make a fault, how long a model may take to load, how many restarts a window allows, and how
//! long to wait for the nodes' memory to come free before a relaunch. The defaults are those of
//! the best example (a probe every 30 s, 3 failures, 3 restarts in 6 h, 30 min to load).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::duration::format_duration;
use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchPolicy {
    /// `--interval`: between two looks.
    pub interval: Duration,
    /// `--stall`: requests running and the engine's token counter standing still this long.
    pub stall: Duration,
    /// `--failures`: the probe failing this many times in a row.
    pub failures: u32,
    /// `--grace`: after a start, the time a model has to load before its silence counts.
    pub grace: Duration,
    /// `--max-restarts` in `--window`; one more gives up.
    pub max_restarts: u32,
    pub window: Duration,
    /// `--memory-wait`: the longest wait for the nodes' GPUs before a relaunch: their memory to
    /// come free, a reset under way to end.
    pub memory_wait: Duration,
    /// GTT and VRAM a node may still hold and count as free (the desktop, the kernel's own).
    pub memory_allowance_bytes: u64,
}

impl Default for WatchPolicy {
    fn default() -> Self {
        WatchPolicy {
            interval: Duration::from_secs(30),
            stall: Duration::from_secs(60),
            failures: 3,
            grace: Duration::from_secs(30 * 60),
            max_restarts: 3,
            window: Duration::from_secs(6 * 3600),
            memory_wait: Duration::from_secs(5 * 60),
            memory_allowance_bytes: 4 << 30,
        }
    }
}

/// The probe's and the scrape's deadline: the interval, within these bounds (a stopped engine is
/// silent for the whole deadline, which a stall counts; a long interval must not hold a look for
/// minutes).
const SHORTEST_DEADLINE: Duration = Duration::from_secs(1);
const LONGEST_DEADLINE: Duration = Duration::from_secs(30);

impl WatchPolicy {
    /// How long a look waits for the probe's answer and the engine's metrics. A look that ends
    /// with its probe unanswered has seen no token since the look before ended, an interval and
    /// this deadline ago: with `--stall` at most that (the defaults: 60 s), a stall is found at
    /// the end of the first look after it, within two intervals.
    pub fn probe_deadline(&self) -> Duration {
        self.interval.clamp(SHORTEST_DEADLINE, LONGEST_DEADLINE)
    }

    /// Refuse what cannot work: a zero interval (a busy loop), a stall or window of nothing, no
    /// failure to count.
    pub fn check(&self) -> Result<()> {
        let zero = |flag: &str, value: Duration| -> Result<()> {
            if value.is_zero() {
                return Err(Error::Usage(format!("{flag} {}: it must be more than zero", format_duration(value))));
            }
            Ok(())
        };
        zero("--interval", self.interval)?;
        zero("--stall", self.stall)?;
        zero("--window", self.window)?;
        if self.failures == 0 {
            return Err(Error::Usage("--failures 0: a probe has to fail at least once to count".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_hold_and_zeros_are_refused() {
        WatchPolicy::default().check().unwrap();
        let zero_interval = WatchPolicy { interval: Duration::ZERO, ..WatchPolicy::default() };
        assert_eq!(zero_interval.check().unwrap_err().to_string(), "--interval 0s: it must be more than zero");
        assert!(WatchPolicy { failures: 0, ..WatchPolicy::default() }.check().is_err());
        assert!(WatchPolicy { window: Duration::ZERO, ..WatchPolicy::default() }.check().is_err());
        // No restart at all is a choice: the first fault gives up.
        WatchPolicy { max_restarts: 0, ..WatchPolicy::default() }.check().unwrap();
    }
}
