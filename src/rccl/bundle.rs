//! Clang offload bundles: `__CLANG_OFFLOAD_BUNDLE__`, a u64 entry count, then per entry
//! (u64 offset, u64 size, u64 id length, id). Offsets are relative to the bundle's start.
//! Each entry is one code object: the host stub (`host-x86_64-unknown-linux-gnu-`, empty) and
//! one per GPU (`hipv4-amdgcn-amd-amdhsa--gfx1151`, maybe with `:xnack-` style features).

use serde::Serialize;

use super::bytes::{slice_at, u64_at};

pub const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
/// An entry's fixed part: offset, size, id length.
const ENTRY_FIXED_SIZE: u64 = 24;
/// Magic plus entry count.
const BUNDLE_HEADER_SIZE: u64 = BUNDLE_MAGIC.len() as u64 + 8;

/// Why a bundle (or a compressed bundle) cannot be read. Messages say what is wrong in the data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BundleError(pub String);

/// One entry of a bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BundleEntry {
    pub id: String,
    /// From the bundle's start.
    pub offset: u64,
    pub size: u64,
}

impl BundleEntry {
    /// The GPU this code object is for (`gfx1151`), None for the host entry.
    pub fn gfx_target(&self) -> Option<String> {
        gfx_target(&self.id)
    }
}

/// A parsed uncompressed bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    pub entries: Vec<BundleEntry>,
    /// Bytes from the bundle's start to the end of its header or its last code object,
    /// whichever is further: where a scan for the next bundle resumes.
    pub extent: u64,
}

/// Parse the bundle at the start of `data` (which may continue past the bundle's end).
pub fn parse_bundle(data: &[u8]) -> Result<Bundle, BundleError> {
    if !data.starts_with(BUNDLE_MAGIC) {
        return Err(BundleError("no __CLANG_OFFLOAD_BUNDLE__ magic".into()));
    }
    let available = data.len() as u64;
    let count = u64_at(data, BUNDLE_MAGIC.len() as u64)
        .ok_or_else(|| BundleError("offload bundle truncated before its entry count".into()))?;
    // Every entry needs at least its fixed 24 bytes: a larger count is a lie, and checking
    // it here bounds the allocation below by the data's length.
    let max_count = available.saturating_sub(BUNDLE_HEADER_SIZE) / ENTRY_FIXED_SIZE;
    if count == 0 || count > max_count {
        return Err(BundleError(format!(
            "offload bundle claims {count} entries, but {available} bytes hold at most {max_count}"
        )));
    }
    let mut entries = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let mut cursor = BUNDLE_HEADER_SIZE;
    let mut extent = 0u64;
    for index in 0..count {
        let truncated = || BundleError(format!("offload bundle truncated in the header of entry {index}"));
        let offset = u64_at(data, cursor).ok_or_else(truncated)?;
        let size = u64_at(data, cursor + 8).ok_or_else(truncated)?;
        let id_len = u64_at(data, cursor + 16).ok_or_else(truncated)?;
        let id_bytes = slice_at(data, cursor + ENTRY_FIXED_SIZE, id_len).ok_or_else(|| {
            BundleError(format!("offload bundle entry {index}: id of {id_len} bytes runs past the end"))
        })?;
        let id = String::from_utf8_lossy(id_bytes).into_owned();
        cursor += ENTRY_FIXED_SIZE + id_len;
        let end = offset.checked_add(size).filter(|&end| end <= available).ok_or_else(|| {
            BundleError(format!(
                "offload bundle entry {index} ({id}): code object at offset {offset} size {size} \
                 ends beyond the bundle's {available} bytes"
            ))
        })?;
        extent = extent.max(end);
        entries.push(BundleEntry { id, offset, size });
    }
    Ok(Bundle { entries, extent: extent.max(cursor) })
}

/// `gfx1151` from `hipv4-amdgcn-amd-amdhsa--gfx1151:xnack-`: the processor name that follows
/// the target triple, without target features.
pub fn gfx_target(id: &str) -> Option<String> {
    if !id.contains("amdgcn") {
        return None;
    }
    let start = id.match_indices("-gfx").map(|(at, _)| at + 1).last()?;
    let name: String = id[start..].chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
    (name.len() > 3).then_some(name)
}

/// Test helper shared with the compressed-bundle tests: an uncompressed bundle holding
/// `(id, code object)` entries, code objects aligned to 16 bytes.
#[cfg(test)]
pub(crate) fn make_bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let header_len: usize = BUNDLE_HEADER_SIZE as usize + entries.iter().map(|(id, _)| 24 + id.len()).sum::<usize>();
    let mut offset = header_len.next_multiple_of(16);
    let mut header = BUNDLE_MAGIC.to_vec();
    header.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    let mut body = Vec::new();
    for (id, object) in entries {
        let object_offset = if object.is_empty() { 0 } else { offset };
        header.extend_from_slice(&(object_offset as u64).to_le_bytes());
        header.extend_from_slice(&(object.len() as u64).to_le_bytes());
        header.extend_from_slice(&(id.len() as u64).to_le_bytes());
        header.extend_from_slice(id.as_bytes());
        if !object.is_empty() {
            body.push((offset, object.to_vec()));
            offset = (offset + object.len()).next_multiple_of(16);
        }
    }
    let mut bundle = header;
    for (at, object) in body {
        bundle.resize(at, 0);
        bundle.extend_from_slice(&object);
    }
    bundle
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entries_and_targets() {
        let bundle = make_bundle(&[
            ("host-x86_64-unknown-linux-gnu-", b""),
            ("hipv4-amdgcn-amd-amdhsa--gfx1151", b"\x7fELF gfx1151 code"),
            ("hipv4-amdgcn-amd-amdhsa--gfx1100:xnack-", b"\x7fELF gfx1100"),
        ]);
        let parsed = parse_bundle(&bundle).expect("parses");
        assert_eq!(parsed.entries.len(), 3);
        assert_eq!(parsed.entries[0].size, 0);
        assert_eq!(parsed.entries[0].gfx_target(), None);
        assert_eq!(parsed.entries[1].gfx_target().as_deref(), Some("gfx1151"));
        assert_eq!(parsed.entries[2].gfx_target().as_deref(), Some("gfx1100"));
        let code = &parsed.entries[1];
        assert_eq!(slice_at(&bundle, code.offset, code.size), Some(&b"\x7fELF gfx1151 code"[..]));
        assert_eq!(parsed.extent, bundle.len() as u64);
    }

    #[test]
    fn target_names_from_ids() {
        assert_eq!(gfx_target("hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-").as_deref(), Some("gfx90a"));
        assert_eq!(gfx_target("hip-amdgcn-amd-amdhsa-unknown-gfx1151").as_deref(), Some("gfx1151"));
        assert_eq!(gfx_target("host-x86_64-unknown-linux-gnu-"), None);
        assert_eq!(gfx_target("hipv4-amdgcn-amd-amdhsa--"), None);
    }

    #[test]
    fn refuses_a_count_the_data_cannot_hold() {
        let mut bundle = make_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1151", b"code")]);
        bundle[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        let error = parse_bundle(&bundle).expect_err("bad count");
        assert!(error.0.contains("claims 18446744073709551615 entries"), "{error}");
        bundle[24..32].copy_from_slice(&0u64.to_le_bytes());
        assert!(parse_bundle(&bundle).is_err());
    }

    #[test]
    fn refuses_code_objects_beyond_the_end() {
        let mut bundle = make_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1151", b"code")]);
        // Entry 0's offset field.
        bundle[32..40].copy_from_slice(&(u64::MAX - 1).to_le_bytes());
        let error = parse_bundle(&bundle).expect_err("offset beyond end");
        assert!(error.0.contains("ends beyond"), "{error}");
        let mut bundle = make_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1151", b"code")]);
        bundle[40..48].copy_from_slice(&1_000_000u64.to_le_bytes());
        assert!(parse_bundle(&bundle).expect_err("size beyond end").0.contains("gfx1151"));
    }

    #[test]
    fn refuses_truncated_headers() {
        let bundle = make_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1151", b"code")]);
        for cut in [0, 10, 24, 31, 40, 60] {
            assert!(parse_bundle(&bundle[..cut]).is_err(), "cut at {cut}");
        }
        let mut bundle = bundle;
        bundle[48..56].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse_bundle(&bundle).expect_err("id too long").0.contains("id of"));
    }
}
