//! Each key's rates: the requests it was let through and the tokens its answers counted over the
//! last minute, in sixty one-second buckets (a sliding window of fixed size, whatever the
//! traffic). A request past its key's requests or tokens a minute is refused with how long until
//! enough of the minute has passed (`Retry-After`), as OpenAI answers `rate_limit_exceeded`.

use std::collections::HashMap;
use std::sync::Mutex;

use super::keys::KeyEntry;

/// The window, in seconds (and buckets).
const WINDOW: u64 = 60;

/// What a key went past.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Requests,
    Tokens,
}

/// A refusal: which limit, its value, what was used of it, and the seconds until the request
/// would pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exceeded {
    pub limit: Limit,
    pub per_minute: u64,
    pub used: u64,
    pub retry_after: u64,
}

#[derive(Clone, Copy, Default)]
struct Bucket {
    second: u64,
    requests: u64,
    tokens: u64,
}

struct Window([Bucket; WINDOW as usize]);

impl Default for Window {
    fn default() -> Window {
        Window([Bucket::default(); WINDOW as usize])
    }
}

impl Window {
    /// The buckets of the minute up to `now`, oldest first.
    fn live(&self, now: u64) -> Vec<Bucket> {
        let mut live: Vec<Bucket> =
            self.0.iter().copied().filter(|b| b.second + WINDOW > now && b.second <= now).collect();
        live.sort_by_key(|b| b.second);
        live
    }

    fn bucket(&mut self, now: u64) -> &mut Bucket {
        let bucket = &mut self.0[(now % WINDOW) as usize];
        if bucket.second != now {
            *bucket = Bucket { second: now, ..Bucket::default() };
        }
        bucket
    }

    /// None when under `per_minute` of what `count` counts; else the refusal.
    fn over(&self, now: u64, limit: Limit, per_minute: u64, count: fn(&Bucket) -> u64) -> Option<Exceeded> {
        let live = self.live(now);
        let used: u64 = live.iter().map(count).sum();
        if used < per_minute {
            return None;
        }
        // The oldest buckets leave first: once enough have, the request passes.
        let mut left = used;
        let mut retry_after = WINDOW;
        for bucket in &live {
            left -= count(bucket);
            if left < per_minute {
                retry_after = (bucket.second + WINDOW).saturating_sub(now).max(1);
                break;
            }
        }
        Some(Exceeded { limit, per_minute, used, retry_after })
    }
}

/// Every key's window, by name.
#[derive(Default)]
pub struct Rates(Mutex<HashMap<String, Window>>);

impl Rates {
    /// Let one request of `key` through at second `now` (counted), or say which rate it is past.
    pub fn admit(&self, key: &KeyEntry, now: u64) -> Result<(), Exceeded> {
        if key.rpm.is_none() && key.tpm.is_none() {
            return Ok(());
        }
        let mut windows = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let window = windows.entry(key.name.clone()).or_default();
        let requests = key.rpm.and_then(|rpm| window.over(now, Limit::Requests, rpm, |b| b.requests));
        let tokens = key.tpm.and_then(|tpm| window.over(now, Limit::Tokens, tpm, |b| b.tokens));
        if let Some(exceeded) = requests.or(tokens) {
            return Err(exceeded);
        }
        window.bucket(now).requests += 1;
        Ok(())
    }

    /// The tokens an answer to `key` counted, at second `now`.
    pub fn spent(&self, key: &str, tokens: u64, now: u64) {
        let mut windows = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(window) = windows.get_mut(key) {
            let bucket = window.bucket(now);
            bucket.tokens = bucket.tokens.saturating_add(tokens);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(rpm: Option<u64>, tpm: Option<u64>) -> KeyEntry {
        KeyEntry { rpm, tpm, ..crate::router::keys::entry("alice") }
    }

    #[test]
    fn requests_past_the_rate_wait_until_the_oldest_leave_the_minute() {
        let rates = Rates::default();
        let alice = key(Some(3), None);
        for second in [100, 110, 110] {
            assert_eq!(rates.admit(&alice, second), Ok(()));
        }
        let refused = rates.admit(&alice, 130).unwrap_err();
        assert_eq!(refused, Exceeded { limit: Limit::Requests, per_minute: 3, used: 3, retry_after: 30 });
        assert!(rates.admit(&alice, 159).is_err(), "the first still counts at 159");
        assert_eq!(rates.admit(&alice, 160), Ok(()), "the first left the minute");
        // Refused requests are not counted: two at 110 and one at 160 remain.
        assert_eq!(rates.admit(&alice, 169).unwrap_err().retry_after, 1);
        assert_eq!(rates.admit(&alice, 170), Ok(()));
    }

    #[test]
    fn tokens_counted_from_the_answers_hold_the_next_request() {
        let rates = Rates::default();
        let alice = key(None, Some(1000));
        assert_eq!(rates.admit(&alice, 5), Ok(()));
        rates.spent("alice", 600, 5);
        assert_eq!(rates.admit(&alice, 20), Ok(()));
        rates.spent("alice", 500, 20);
        let refused = rates.admit(&alice, 30).unwrap_err();
        assert_eq!(refused, Exceeded { limit: Limit::Tokens, per_minute: 1000, used: 1100, retry_after: 35 });
        assert_eq!(rates.admit(&alice, 65), Ok(()), "600 left the minute at 65");
        // A key without rates is never counted; a key never seen spends nothing.
        let free = KeyEntry { name: "bob".into(), ..key(None, None) };
        for second in 0..1000 {
            assert_eq!(rates.admit(&free, second % 3), Ok(()));
        }
        rates.spent("carol", 5, 1);
    }
}
