//! Bounds-checked little-endian reads: every offset and size in an artifact is untrusted, so no
//! parser in this module indexes a slice directly.

/// `len` bytes at `offset`, or None when any part of them lies outside `data`.
pub fn slice_at(data: &[u8], offset: u64, len: u64) -> Option<&[u8]> {
    let start = usize::try_from(offset).ok()?;
    let len = usize::try_from(len).ok()?;
    let end = start.checked_add(len)?;
    data.get(start..end)
}

pub fn u16_at(data: &[u8], offset: u64) -> Option<u16> {
    let bytes: [u8; 2] = slice_at(data, offset, 2)?.try_into().ok()?;
    Some(u16::from_le_bytes(bytes))
}

pub fn u32_at(data: &[u8], offset: u64) -> Option<u32> {
    let bytes: [u8; 4] = slice_at(data, offset, 4)?.try_into().ok()?;
    Some(u32::from_le_bytes(bytes))
}

pub fn u64_at(data: &[u8], offset: u64) -> Option<u64> {
    let bytes: [u8; 8] = slice_at(data, offset, 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// Position of the first `needle` in `haystack` at or after `from`.
pub fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    let rest = haystack.get(from..)?;
    rest.windows(needle.len()).position(|window| window == needle).map(|at| at + from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inside_and_refuses_outside() {
        let data = [1u8, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(u16_at(&data, 0), Some(1));
        assert_eq!(u32_at(&data, 2), Some(2));
        assert_eq!(u64_at(&data, 6), Some(3));
        assert_eq!(u64_at(&data, 7), None);
        assert_eq!(slice_at(&data, u64::MAX, 1), None);
        assert_eq!(slice_at(&data, 1, u64::MAX), None);
        assert_eq!(slice_at(&data, 14, 0), Some(&[][..]));
    }

    #[test]
    fn finds_needles_from_an_offset() {
        let data = b"xxCCOByyCCOB";
        assert_eq!(find(data, b"CCOB", 0), Some(2));
        assert_eq!(find(data, b"CCOB", 3), Some(8));
        assert_eq!(find(data, b"CCOB", 9), None);
        assert_eq!(find(data, b"CCOB", 100), None);
    }
}
