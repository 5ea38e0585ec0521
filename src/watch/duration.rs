//! The watch's durations as the command line gives them: seconds (`90`), or a number with its unit
//! (`90s`, `5m`, `6h`). Anything else is a usage error naming the flag.

use std::time::Duration;

use crate::error::{Error, Result};

/// `text`, given to `flag` (for the message).
pub fn parse_duration(flag: &str, text: &str) -> Result<Duration> {
    let unusable = || {
        Error::Usage(format!(
            "{flag} {text:?}: a duration is whole seconds or a whole number with its unit s, m or h (90, 90s, 5m, 6h)"
        ))
    };
    let (digits, unit_seconds) = match text.strip_suffix(['s', 'm', 'h']) {
        Some(digits) => (
            digits,
            if text.ends_with('s') {
                1
            } else if text.ends_with('m') {
                60
            } else {
                3600
            },
        ),
        None => (text, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(unusable());
    }
    let number: u64 = digits.parse().map_err(|_| unusable())?;
    let seconds = number.checked_mul(unit_seconds).ok_or_else(unusable)?;
    Ok(Duration::from_secs(seconds))
}

/// `5400s` → "90m", `21600s` → "6h": the largest unit that divides it, as the flags take it back.
pub fn format_duration(duration: Duration) -> String {
    let seconds = duration.as_secs();
    match seconds {
        0 => "0s".into(),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_or_a_unit() {
        for (text, seconds) in [("90", 90), ("90s", 90), ("5m", 300), ("6h", 21600), ("0", 0), ("007s", 7)] {
            assert_eq!(parse_duration("--stall", text).unwrap(), Duration::from_secs(seconds), "{text}");
        }
    }

    #[test]
    fn anything_else_is_a_usage_error_naming_the_flag() {
        for text in [
            "",
            "s",
            "1.5m",
            "-5",
            "+5",
            "5 m",
            " 5",
            "5d",
            "5ms",
            "5M",
            "1h30m",
            "٣s",
            "99999999999999999999",
            "18446744073709551615h",
        ] {
            let error = parse_duration("--window", text).unwrap_err();
            assert_eq!(error.kind(), crate::error::ErrorKind::Usage, "{text:?}");
            assert!(error.to_string().starts_with(&format!("--window {text:?}: a duration is")), "{error}");
        }
    }

    #[test]
    fn formats_back_in_the_largest_unit() {
        for (seconds, text) in [(0, "0s"), (90, "90s"), (300, "5m"), (5400, "90m"), (21600, "6h")] {
            assert_eq!(format_duration(Duration::from_secs(seconds)), text);
            assert_eq!(parse_duration("--x", text).unwrap(), Duration::from_secs(seconds));
        }
    }
}
