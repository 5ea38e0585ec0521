//! The one `Range` form a registry client sends for a blob: a single `bytes=START-[END]` (docker
//! and containers/image resume a broken download with `bytes=N-`). Anything else (several ranges,
//! suffixes, other units) is answered with the whole blob, which HTTP allows.

/// What to answer a request for a blob of `size` bytes carrying `header`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    /// 200 with every byte.
    Whole,
    /// 206 with bytes `start..end` (end exclusive).
    Part { start: u64, end: u64 },
    /// 416: it starts past the end.
    Unsatisfiable,
}

pub fn wanted(header: Option<&str>, size: u64) -> Wanted {
    let Some(spec) = header.and_then(|header| header.trim().strip_prefix("bytes=")) else { return Wanted::Whole };
    let Some((start, end)) = spec.trim().split_once('-') else { return Wanted::Whole };
    let Ok(start) = start.trim().parse::<u64>() else { return Wanted::Whole };
    let end = match end.trim() {
        "" => size,
        last => match last.parse::<u64>() {
            Ok(last) if last >= start => last.saturating_add(1).min(size),
            _ => return Wanted::Whole,
        },
    };
    if start >= size {
        Wanted::Unsatisfiable
    } else {
        Wanted::Part { start, end }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_range_from_a_byte_to_another_or_to_the_end() {
        assert_eq!(wanted(None, 10), Wanted::Whole);
        assert_eq!(wanted(Some("bytes=4-"), 10), Wanted::Part { start: 4, end: 10 });
        assert_eq!(wanted(Some("bytes=0-0"), 10), Wanted::Part { start: 0, end: 1 });
        assert_eq!(wanted(Some("bytes=2-99"), 10), Wanted::Part { start: 2, end: 10 }, "clamped to the blob");
        assert_eq!(wanted(Some("bytes=10-"), 10), Wanted::Unsatisfiable);
        assert_eq!(wanted(Some("bytes=0-"), 0), Wanted::Unsatisfiable);
    }

    #[test]
    fn other_forms_get_the_whole_blob() {
        for header in ["bytes=-5", "bytes=0-1,4-5", "items=0-1", "bytes=5-2", "bytes=a-", "bytes=1-b", ""] {
            assert_eq!(wanted(Some(header), 10), Wanted::Whole, "{header}");
        }
    }
}
