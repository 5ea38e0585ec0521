//! The restart budget: at most `max` restarts within any `window`; the one past it is refused with
//! the reason (a restart loop once ran 35 times, leaked shared memory and took sshd down). Only the
//! restarts inside the window are kept, so it never holds more than `max`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::clock::Moment;
use super::duration::format_duration;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartBudget {
    max: u32,
    window: Duration,
    /// The restarts still inside the window, oldest first.
    restarts: Vec<Moment>,
}

impl RestartBudget {
    pub fn new(max: u32, window: Duration) -> Self {
        RestartBudget { max, window, restarts: Vec::new() }
    }

    /// Spend one restart at `at`, or say why there is none left.
    pub fn spend(&mut self, at: Moment) -> Result<(), String> {
        self.restarts.retain(|&restart| at.since(restart) < self.window);
        if self.restarts.len() >= self.max as usize {
            let first = self.restarts.first().map_or(String::new(), |&first| {
                format!(
                    "; the next is allowed {} from now",
                    format_duration(self.window.saturating_sub(at.since(first)))
                )
            });
            return Err(format!(
                "{} restart(s) in the last {} already, the most --max-restarts {} --window {} allow{first}",
                self.restarts.len(),
                format_duration(self.window),
                self.max,
                format_duration(self.window),
            ));
        }
        self.restarts.push(at);
        Ok(())
    }

    /// The restarts inside the window, oldest first (what a record of the watch keeps).
    pub fn restarts(&self) -> &[Moment] {
        &self.restarts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64) -> Moment {
        Moment(seconds * 1000)
    }

    #[test]
    fn at_most_max_in_any_window() {
        let hour = 3600;
        let mut budget = RestartBudget::new(3, Duration::from_secs(6 * hour));
        for restart in [0, hour, 2 * hour] {
            budget.spend(at(restart)).unwrap();
        }
        let refused = budget.spend(at(5 * hour)).unwrap_err();
        assert_eq!(
            refused,
            "3 restart(s) in the last 6h already, the most --max-restarts 3 --window 6h allow; the next is allowed 1h from now"
        );
        // The first leaves the window at 6h: one more is allowed, then none until 7h.
        budget.spend(at(6 * hour)).unwrap();
        assert!(budget.spend(at(6 * hour + 1)).is_err());
        budget.spend(at(7 * hour)).unwrap();
        assert_eq!(budget.restarts(), [at(2 * hour), at(6 * hour), at(7 * hour)]);
    }

    #[test]
    fn no_budget_refuses_the_first() {
        let mut budget = RestartBudget::new(0, Duration::from_secs(60));
        assert!(budget.spend(at(0)).unwrap_err().starts_with("0 restart(s) in the last 1m already"));
    }
}
