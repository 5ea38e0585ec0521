//! Finding the offload bundles in a library: the linker concatenates every translation unit's
//! `.hip_fatbin` contribution (each aligned, typically to 4096), so one section may hold many
//! bundles, plain or compressed, separated by padding.

use serde::Serialize;

use super::bundle::{parse_bundle, BundleEntry, BundleError, BUNDLE_MAGIC};
use super::bytes::find;
use super::compressed::{self, CompressedHeader, Method, CCOB_MAGIC};

/// How a bundle was stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Compression {
    pub method: Method,
    pub version: u16,
    pub uncompressed_size: u64,
}

impl From<&CompressedHeader> for Compression {
    fn from(header: &CompressedHeader) -> Self {
        Compression { method: header.method, version: header.version, uncompressed_size: header.uncompressed_size }
    }
}

/// One bundle found in the library.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FoundBundle {
    /// Offset of its magic in the (uncompressed) library file.
    pub file_offset: u64,
    /// None for a plain `__CLANG_OFFLOAD_BUNDLE__`.
    pub compression: Option<Compression>,
    pub entries: Vec<BundleEntry>,
}

/// How strictly to treat a magic that does not lead to a readable bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanScope {
    /// Inside `.hip_fatbin`: everything there is a bundle, so a damaged one is an error.
    FatbinSection,
    /// The whole file (no such section): `CCOB` may occur by chance in other data, so a CCOB
    /// whose header is not a known version/method is skipped rather than fatal.
    WholeFile,
}

/// Every bundle in `region`, which starts at `base` in the library file.
pub fn scan(region: &[u8], base: u64, scope: ScanScope) -> Result<Vec<FoundBundle>, BundleError> {
    let mut found = Vec::new();
    let mut position = 0usize;
    loop {
        let plain = find(region, BUNDLE_MAGIC, position);
        let packed = find(region, CCOB_MAGIC, position);
        let (at, is_compressed) = match (plain, packed) {
            (None, None) => break,
            (Some(p), Some(c)) if c < p => (c, true),
            (Some(p), _) => (p, false),
            (None, Some(c)) => (c, true),
        };
        let file_offset = base + at as u64;
        let here = region.get(at..).unwrap_or_default();
        let located = |error: BundleError| BundleError(format!("at file offset {file_offset:#x}: {error}"));
        if is_compressed {
            if scope == ScanScope::WholeFile && compressed::parse_header(here).is_err() {
                position = at + CCOB_MAGIC.len();
                continue;
            }
            let inflated = compressed::decompress(here).map_err(located)?;
            let bundle = parse_bundle(&inflated.bundle)
                .map_err(|e| located(BundleError(format!("inside a compressed bundle: {e}"))))?;
            found.push(FoundBundle {
                file_offset,
                compression: Some(Compression::from(&inflated.header)),
                entries: bundle.entries,
            });
            // Compressed data holds the inner magic as a literal: resume after the whole
            // compressed bundle, never inside it.
            let skip = inflated.stored_len.max(1);
            position = at.saturating_add(usize::try_from(skip).unwrap_or(usize::MAX)).min(region.len());
        } else {
            let bundle = parse_bundle(here).map_err(located)?;
            found.push(FoundBundle { file_offset, compression: None, entries: bundle.entries });
            position = at.saturating_add(usize::try_from(bundle.extent).unwrap_or(usize::MAX)).min(region.len());
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::super::bundle::make_bundle;
    use super::super::compressed::make_ccob;
    use super::*;

    fn pad_to(data: &mut Vec<u8>, align: usize) {
        data.resize(data.len().next_multiple_of(align), 0);
    }

    #[test]
    fn finds_plain_and_compressed_bundles_back_to_back() {
        let gfx1151 =
            make_bundle(&[("host-x86_64-unknown-linux-gnu-", b""), ("hipv4-amdgcn-amd-amdhsa--gfx1151", &[1u8; 100])]);
        let gfx1100 = make_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1100", &[2u8; 50])]);
        let mut section = gfx1151.clone();
        pad_to(&mut section, 4096);
        let second = section.len();
        section.extend(make_ccob(&gfx1100, 2, Method::Zlib));
        pad_to(&mut section, 4096);
        section.extend(make_ccob(&gfx1151, 1, Method::Zstd));
        pad_to(&mut section, 4096);
        let found = scan(&section, 1000, ScanScope::FatbinSection).expect("scans");
        assert_eq!(found.len(), 3);
        assert_eq!(found[0].file_offset, 1000);
        assert_eq!(found[0].compression, None);
        assert_eq!(found[0].entries.len(), 2);
        assert_eq!(found[1].file_offset, 1000 + second as u64);
        assert_eq!(found[1].compression.as_ref().map(|c| (c.method, c.version)), Some((Method::Zlib, 2)));
        assert_eq!(found[1].entries[0].gfx_target().as_deref(), Some("gfx1100"));
        assert_eq!(found[2].compression.as_ref().map(|c| c.method), Some(Method::Zstd));
    }

    #[test]
    fn a_v1_bundle_is_skipped_whole_although_its_data_holds_the_magic_literally() {
        let inner = make_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1151", b"0123456789abcdef")]);
        let ccob = make_ccob(&inner, 1, Method::Zstd);
        assert!(find(&ccob, BUNDLE_MAGIC, 4).is_some(), "zstd keeps the magic as a literal");
        let mut section = ccob;
        section.extend(make_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1100", b"x")]));
        let found = scan(&section, 0, ScanScope::FatbinSection).expect("scans");
        let targets: Vec<_> = found.iter().map(|b| b.entries[0].gfx_target()).collect();
        assert_eq!(targets, [Some("gfx1151".to_string()), Some("gfx1100".to_string())]);
    }

    #[test]
    fn a_damaged_bundle_in_the_section_is_an_error_with_its_offset() {
        let mut bundle = make_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1151", &[1u8; 10])]);
        bundle[24..32].copy_from_slice(&1000u64.to_le_bytes());
        let mut section = vec![0u8; 16];
        section.extend(bundle);
        let error = scan(&section, 0x100, ScanScope::FatbinSection).expect_err("bad count");
        assert!(error.0.starts_with("at file offset 0x110:"), "{error}");
    }

    #[test]
    fn stray_ccob_bytes_are_skipped_only_outside_the_section() {
        let mut data = b"....CCOB\x63\x00\x00\x00........".to_vec();
        data.extend(make_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1151", &[1u8; 10])]));
        let found = scan(&data, 0, ScanScope::WholeFile).expect("skips the stray magic");
        assert_eq!(found.len(), 1);
        assert!(scan(&data, 0, ScanScope::FatbinSection).is_err());
        assert_eq!(scan(&[0u8; 64], 0, ScanScope::FatbinSection).expect("empty"), vec![]);
    }
}
