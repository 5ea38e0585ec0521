//! The memlock limit from /proc/self/limits: RDMA pins memory, so it must be unlimited.

use serde::{Deserialize, Serialize};

/// Soft and hard limits in bytes; `None` means unlimited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memlock {
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

impl Memlock {
    pub fn hard_is_unlimited(&self) -> bool {
        self.hard.is_none()
    }
}

/// Why /proc/self/limits gave no memlock limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    #[error("no \"Max locked memory\" line")]
    NoMemlockLine,
    #[error("{which} memlock limit missing")]
    Missing { which: &'static str },
    #[error("{which} memlock limit is not a number: {value:?}")]
    NotANumber { which: &'static str, value: String },
}

/// Parse the "Max locked memory" line.
pub fn parse_memlock(limits: &str) -> Result<Memlock, LimitsError> {
    let line = limits.lines().find(|l| l.starts_with("Max locked memory")).ok_or(LimitsError::NoMemlockLine)?;
    let mut columns = line["Max locked memory".len()..].split_whitespace();
    let mut limit = |which: &'static str| -> Result<Option<u64>, LimitsError> {
        match columns.next() {
            Some("unlimited") => Ok(None),
            Some(value) => {
                value.parse().map(Some).map_err(|_| LimitsError::NotANumber { which, value: value.to_string() })
            }
            None => Err(LimitsError::Missing { which }),
        }
    };
    Ok(Memlock { soft: limit("soft")?, hard: limit("hard")? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_limits() {
        let text = "Limit                     Soft Limit           Hard Limit           Units\n\
                    Max locked memory         8388608              unlimited            bytes\n";
        assert_eq!(parse_memlock(text).unwrap(), Memlock { soft: Some(8388608), hard: None });
        let error = parse_memlock("Max locked memory  lots  unlimited bytes").unwrap_err();
        assert_eq!(error.to_string(), "soft memlock limit is not a number: \"lots\"");
        assert_eq!(parse_memlock("Max locked memory  1024").unwrap_err(), LimitsError::Missing { which: "hard" });
        assert_eq!(parse_memlock("nothing here").unwrap_err(), LimitsError::NoMemlockLine);
    }
}
