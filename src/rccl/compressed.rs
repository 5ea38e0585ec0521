//! Compressed offload bundles (`clang-offload-bundler --compress`, the ROCm default):
//! `CCOB`, u16 version, u16 method (0 zlib, 1 zstd), sizes, u64 truncated hash, then the
//! compressed bytes of an ordinary `__CLANG_OFFLOAD_BUNDLE__` bundle.
//!   v1: u32 uncompressed size
//!   v2: u32 total size (header included), u32 uncompressed size
//!   v3: u64 total size, u64 uncompressed size

use std::io::Read;

use serde::Serialize;

use super::bundle::BundleError;
use super::bytes::{slice_at, u16_at, u32_at, u64_at};

pub const CCOB_MAGIC: &[u8] = b"CCOB";
/// Refuse to inflate more than this, whatever a header claims: a real per-bundle image is
/// far below it, and it keeps a lying header from exhausting memory.
pub const MAX_UNCOMPRESSED_SIZE: u64 = 4 << 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    Zlib,
    Zstd,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompressedHeader {
    pub version: u16,
    pub method: Method,
    /// The whole compressed bundle, header included (v2, v3).
    pub total_size: Option<u64>,
    pub uncompressed_size: u64,
    pub hash: u64,
    /// Where the compressed bytes start.
    pub header_len: u64,
}

pub fn parse_header(data: &[u8]) -> Result<CompressedHeader, BundleError> {
    if !data.starts_with(CCOB_MAGIC) {
        return Err(BundleError("no CCOB magic".into()));
    }
    let truncated = || BundleError("compressed bundle (CCOB) truncated inside its header".into());
    let version = u16_at(data, 4).ok_or_else(truncated)?;
    let method = match u16_at(data, 6).ok_or_else(truncated)? {
        0 => Method::Zlib,
        1 => Method::Zstd,
        other => {
            return Err(BundleError(format!(
                "compressed bundle (CCOB) uses compression method {other}; known: 0 (zlib), 1 (zstd)"
            )))
        }
    };
    let (total_size, uncompressed_size, hash_at) = match version {
        1 => (None, u64::from(u32_at(data, 8).ok_or_else(truncated)?), 12),
        2 => (
            Some(u64::from(u32_at(data, 8).ok_or_else(truncated)?)),
            u64::from(u32_at(data, 12).ok_or_else(truncated)?),
            16,
        ),
        3 => (Some(u64_at(data, 8).ok_or_else(truncated)?), u64_at(data, 16).ok_or_else(truncated)?, 24),
        other => {
            return Err(BundleError(format!(
                "compressed bundle (CCOB) version {other} is not one this tool reads (1, 2, 3)"
            )))
        }
    };
    let hash = u64_at(data, hash_at).ok_or_else(truncated)?;
    let header_len = hash_at + 8;
    if let Some(total) = total_size {
        if total < header_len || total > data.len() as u64 {
            return Err(BundleError(format!(
                "compressed bundle (CCOB v{version}) claims {total} bytes but {} are present",
                data.len()
            )));
        }
    }
    if uncompressed_size > MAX_UNCOMPRESSED_SIZE {
        return Err(BundleError(format!(
            "compressed bundle (CCOB) claims {uncompressed_size} uncompressed bytes, over the \
             {MAX_UNCOMPRESSED_SIZE}-byte limit"
        )));
    }
    Ok(CompressedHeader { version, method, total_size, uncompressed_size, hash, header_len })
}

/// A compressed bundle, inflated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inflated {
    pub header: CompressedHeader,
    /// The uncompressed `__CLANG_OFFLOAD_BUNDLE__` bundle.
    pub bundle: Vec<u8>,
    /// Bytes the compressed bundle occupies, header included: where the next one may start.
    /// v1 does not record it, so it is what the decompressor consumed.
    pub stored_len: u64,
}

/// Inflate the compressed bundle at the start of `data` (which may continue past it).
pub fn decompress(data: &[u8]) -> Result<Inflated, BundleError> {
    let header = parse_header(data)?;
    let end = header.total_size.unwrap_or(data.len() as u64);
    let payload = slice_at(data, header.header_len, end.saturating_sub(header.header_len))
        .ok_or_else(|| BundleError("compressed bundle (CCOB) payload out of bounds".into()))?;
    let method = match header.method {
        Method::Zlib => "zlib",
        Method::Zstd => "zstd",
    };
    let failed = |e: std::io::Error| {
        BundleError(format!("compressed bundle (CCOB v{}, {method}) does not inflate: {e}", header.version))
    };
    // Read one byte past the declared size to notice a stream longer than its header says;
    // the Vec grows only with bytes actually produced.
    let limit = header.uncompressed_size + 1;
    let mut bundle = Vec::new();
    let consumed = match header.method {
        Method::Zlib => {
            let mut reader = flate2::read::ZlibDecoder::new(payload).take(limit);
            reader.read_to_end(&mut bundle).map_err(failed)?;
            reader.into_inner().total_in()
        }
        Method::Zstd => {
            let decoder = zstd::stream::read::Decoder::with_buffer(payload).map_err(failed)?;
            decoder.single_frame().take(limit).read_to_end(&mut bundle).map_err(failed)?;
            zstd::zstd_safe::find_frame_compressed_size(payload).map(|n| n as u64).unwrap_or(payload.len() as u64)
        }
    };
    if bundle.len() as u64 != header.uncompressed_size {
        return Err(BundleError(format!(
            "compressed bundle (CCOB v{}, {method}) inflates to {}{} bytes, its header says {}",
            header.version,
            if bundle.len() as u64 == limit { "more than " } else { "" },
            bundle.len().min(header.uncompressed_size as usize),
            header.uncompressed_size
        )));
    }
    let stored_len = header.total_size.unwrap_or(header.header_len + consumed);
    Ok(Inflated { header, bundle, stored_len })
}

/// Test helper: wrap `bundle` as a CCOB of `version` with `method`.
#[cfg(test)]
pub(crate) fn make_ccob(bundle: &[u8], version: u16, method: Method) -> Vec<u8> {
    use std::io::Write;
    let compressed = match method {
        Method::Zlib => {
            let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(bundle).expect("zlib");
            encoder.finish().expect("zlib")
        }
        Method::Zstd => zstd::encode_all(bundle, 3).expect("zstd"),
    };
    let mut out = CCOB_MAGIC.to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(method as u16).to_le_bytes());
    let header_len = match version {
        1 => 20,
        2 => 24,
        _ => 32,
    };
    let total = (header_len + compressed.len()) as u64;
    match version {
        1 => out.extend_from_slice(&(bundle.len() as u32).to_le_bytes()),
        2 => {
            out.extend_from_slice(&(total as u32).to_le_bytes());
            out.extend_from_slice(&(bundle.len() as u32).to_le_bytes());
        }
        _ => {
            out.extend_from_slice(&total.to_le_bytes());
            out.extend_from_slice(&(bundle.len() as u64).to_le_bytes());
        }
    }
    out.extend_from_slice(&0x1234_5678_9abc_def0u64.to_le_bytes());
    out.extend_from_slice(&compressed);
    out
}

#[cfg(test)]
mod tests {
    use super::super::bundle::make_bundle;
    use super::*;

    fn sample() -> Vec<u8> {
        make_bundle(&[("host-x86_64-unknown-linux-gnu-", b""), ("hipv4-amdgcn-amd-amdhsa--gfx1151", &[7u8; 300])])
    }

    #[test]
    fn inflates_every_version_and_method() {
        let bundle = sample();
        for version in [1, 2, 3] {
            for method in [Method::Zlib, Method::Zstd] {
                let mut ccob = make_ccob(&bundle, version, method);
                let stored = ccob.len() as u64;
                ccob.extend_from_slice(&[0u8; 64]); // section padding after the bundle
                let Inflated { header, bundle: inflated, stored_len } = decompress(&ccob).expect("inflates");
                assert_eq!(inflated, bundle, "v{version} {method:?}");
                assert_eq!(stored_len, stored, "v{version} {method:?}");
                assert_eq!(header.version, version);
                assert_eq!(header.method, method);
                assert_eq!(header.uncompressed_size, bundle.len() as u64);
                assert_eq!(header.hash, 0x1234_5678_9abc_def0);
                assert_eq!(header.total_size.is_some(), version != 1);
            }
        }
    }

    #[test]
    fn refuses_bad_headers() {
        let bundle = sample();
        let mut ccob = make_ccob(&bundle, 2, Method::Zlib);
        ccob[6] = 9;
        assert!(decompress(&ccob).expect_err("method").0.contains("method 9"));
        let mut ccob = make_ccob(&bundle, 2, Method::Zlib);
        ccob[4] = 7;
        assert!(decompress(&ccob).expect_err("version").0.contains("version 7"));
        let ccob = make_ccob(&bundle, 3, Method::Zstd);
        assert!(decompress(&ccob[..20]).is_err());
        assert!(decompress(&ccob[..ccob.len() - 1]).expect_err("total").0.contains("claims"));
    }

    #[test]
    fn refuses_a_lying_uncompressed_size() {
        let bundle = sample();
        let mut ccob = make_ccob(&bundle, 3, Method::Zstd);
        ccob[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decompress(&ccob).expect_err("huge").0.contains("limit"));
        let mut ccob = make_ccob(&bundle, 2, Method::Zlib);
        ccob[12..16].copy_from_slice(&10u32.to_le_bytes());
        assert!(decompress(&ccob).expect_err("short").0.contains("more than 10 bytes"));
        let mut ccob = make_ccob(&bundle, 2, Method::Zlib);
        ccob[12..16].copy_from_slice(&100_000u32.to_le_bytes());
        assert!(decompress(&ccob).expect_err("long").0.contains("header says 100000"));
    }

    #[test]
    fn refuses_garbage_payload() {
        let mut ccob = make_ccob(&sample(), 2, Method::Zlib);
        for byte in ccob.iter_mut().skip(24) {
            *byte = 0xff;
        }
        assert!(decompress(&ccob).expect_err("garbage").0.contains("does not inflate"));
    }
}
