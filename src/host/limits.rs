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

/// Parse the "Max locked memory" line; Err says what was wrong.
pub fn parse_memlock(limits: &str) -> Result<Memlock, String> {
    let line = limits.lines().find(|l| l.starts_with("Max locked memory")).ok_or("no \"Max locked memory\" line")?;
    let mut columns = line["Max locked memory".len()..].split_whitespace();
    let mut limit = |which: &str| -> Result<Option<u64>, String> {
        match columns.next() {
            Some("unlimited") => Ok(None),
            Some(value) => {
                value.parse().map(Some).map_err(|_| format!("{which} memlock limit is not a number: {value:?}"))
            }
            None => Err(format!("{which} memlock limit missing")),
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
        assert!(parse_memlock("Max locked memory  lots  unlimited bytes").is_err());
        assert!(parse_memlock("nothing here").is_err());
    }
}
