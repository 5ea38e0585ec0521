//! Synthetic RCCL artifacts for tests: offload bundles (plain and CCOB-compressed) put into a
//! real x86-64 shared object's `.hip_fatbin` section by gcc, and .gz / .zip wrappings, plus
//! damaged files. No ROCm toolchain for gfx1151 installs here, so these stand in for the
//! workflow's librccl.so.1. Shared by the rccl_inspect, build, build_cli, rccl_abi and verify tests.

use std::fmt::Write as _;
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

pub const HOST_ID: &str = "host-x86_64-unknown-linux-gnu-";
pub const GFX1151_ID: &str = "hipv4-amdgcn-amd-amdhsa--gfx1151";
pub const GFX1100_ID: &str = "hipv4-amdgcn-amd-amdhsa--gfx1100";

/// zlib = 0, zstd = 1, as in the CCOB header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Zlib = 0,
    Zstd = 1,
}

/// A stand-in GPU code object: an ELF magic and a marker, `len` bytes.
pub fn code_object(marker: &str, len: usize) -> Vec<u8> {
    let mut object = b"\x7fELF\x02\x01\x01".to_vec();
    object.extend_from_slice(marker.as_bytes());
    object.resize(len.max(object.len()), 0x5a);
    object
}

/// An uncompressed clang offload bundle; code objects aligned to 4096 like the bundler does.
pub fn bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let header_len: usize = 32 + entries.iter().map(|(id, _)| 24 + id.len()).sum::<usize>();
    let mut next = header_len.next_multiple_of(4096);
    let mut out = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    let mut placed = Vec::new();
    for (id, object) in entries {
        let offset = if object.is_empty() { header_len } else { next };
        out.extend_from_slice(&(offset as u64).to_le_bytes());
        out.extend_from_slice(&(object.len() as u64).to_le_bytes());
        out.extend_from_slice(&(id.len() as u64).to_le_bytes());
        out.extend_from_slice(id.as_bytes());
        if !object.is_empty() {
            placed.push((offset, *object));
            next = (offset + object.len()).next_multiple_of(4096);
        }
    }
    for (offset, object) in placed {
        out.resize(offset, 0);
        out.extend_from_slice(object);
    }
    out
}

/// `bundle` compressed as `clang-offload-bundler --compress` writes it (CCOB v1/v2/v3).
pub fn ccob(bundle: &[u8], version: u16, method: Method) -> Vec<u8> {
    let compressed = match method {
        Method::Zlib => {
            let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(bundle).expect("zlib");
            encoder.finish().expect("zlib")
        }
        Method::Zstd => zstd::encode_all(bundle, 3).expect("zstd"),
    };
    let header_len = match version {
        1 => 20,
        2 => 24,
        _ => 32,
    };
    let total = (header_len + compressed.len()) as u64;
    let mut out = b"CCOB".to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(method as u16).to_le_bytes());
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
    let hash = Sha256::digest(bundle);
    out.extend_from_slice(&hash[..8]);
    out.extend_from_slice(&compressed);
    out
}

/// Several bundles back to back, each padded to 4096 as the linker lays out `.hip_fatbin`.
pub fn concat_aligned(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in parts {
        out.extend_from_slice(part);
        out.resize(out.len().next_multiple_of(4096), 0);
    }
    out
}

/// Compile `dir/name` with gcc: a shared object whose `section` holds `payload`
/// (`.hip_fatbin` is where hipcc puts the fat binary), SONAME librccl.so.1.
pub fn shared_object_with_section(dir: &Path, name: &str, section: &str, payload: &[u8]) -> PathBuf {
    library_with(dir, name, section, payload, &["rcclGetVersion"], &[])
}

/// The same with these exported functions (`int NAME(void)`) and more gcc arguments last (a later
/// `-Wl,-soname,…` wins; `-L… -l…` adds a DT_NEEDED).
pub fn library_with(dir: &Path, name: &str, section: &str, payload: &[u8], exports: &[&str], gcc: &[&str]) -> PathBuf {
    let mut source = String::from("/* synthetic librccl for strix-toolbox tests */\n");
    let _ = writeln!(
        source,
        "__attribute__((section(\"{section}\"), used, aligned(4096)))\nconst unsigned char fatbin[{}] = {{",
        payload.len().max(1)
    );
    for chunk in payload.chunks(24) {
        let line: Vec<String> = chunk.iter().map(|byte| format!("0x{byte:02x}")).collect();
        let _ = writeln!(source, "  {},", line.join(","));
    }
    source.push_str("};\n");
    for export in exports {
        let _ = writeln!(source, "int {export}(void) {{ return 0; }}");
    }
    let c_path = dir.join(format!("{name}.c"));
    std::fs::write(&c_path, source).expect("write C source");
    let so_path = dir.join(name);
    let output = Command::new("gcc")
        .args(["-shared", "-fPIC", "-Wl,-soname,librccl.so.1", "-o"])
        .arg(&so_path)
        .arg(&c_path)
        .args(["-Wl,--no-as-needed"])
        .args(gcc)
        .output()
        .expect("run gcc");
    assert!(output.status.success(), "gcc failed: {}", String::from_utf8_lossy(&output.stderr));
    so_path
}

/// A gfx1151 RCCL exporting `exports`, with more gcc arguments.
pub fn gfx1151_library_with(dir: &Path, name: &str, exports: &[&str], gcc: &[&str]) -> PathBuf {
    let gpu = code_object(name, 3000);
    library_with(dir, name, ".hip_fatbin", &bundle(&[(HOST_ID, b""), (GFX1151_ID, &gpu)]), exports, gcc)
}

/// A shared object with `payload` in `.hip_fatbin`.
pub fn fatbin_library(dir: &Path, name: &str, payload: &[u8]) -> PathBuf {
    shared_object_with_section(dir, name, ".hip_fatbin", payload)
}

/// The usual good artifact: host entry (size 0) + a gfx1151 code object whose content
/// depends on `marker`, so two markers give two libraries with different sha256.
pub fn gfx1151_library(dir: &Path, name: &str, marker: &str) -> PathBuf {
    let gpu = code_object(marker, 3000);
    fatbin_library(dir, name, &bundle(&[(HOST_ID, b""), (GFX1151_ID, &gpu)]))
}

/// Only gfx1100 code: readable but rejected.
pub fn gfx1100_library(dir: &Path, name: &str) -> PathBuf {
    let gpu = code_object("gfx1100", 2000);
    fatbin_library(dir, name, &bundle(&[(HOST_ID, b""), (GFX1100_ID, &gpu)]))
}

/// gfx1100 + gfx1151 in one bundle, compressed as `version` with `method`.
pub fn compressed_library(dir: &Path, name: &str, version: u16, method: Method) -> PathBuf {
    let gfx1100 = code_object("gfx1100", 5000);
    let gfx1151 = code_object("gfx1151", 7000);
    let plain = bundle(&[(HOST_ID, b""), (GFX1100_ID, &gfx1100), (GFX1151_ID, &gfx1151)]);
    fatbin_library(dir, name, &ccob(&plain, version, method))
}

pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|byte| format!("{byte:02x}")).collect()
}

pub fn sha256_of_file(path: &Path) -> String {
    sha256_hex(&std::fs::read(path).expect("read file to hash"))
}

pub fn gzip_bytes(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).expect("gzip");
    encoder.finish().expect("gzip")
}

/// `source` gzipped into `dir/name`.
pub fn gzip_file(source: &Path, dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, gzip_bytes(&std::fs::read(source).expect("read"))).expect("write .gz");
    path
}

pub fn zip_bytes(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in entries {
        writer.start_file(*name, options).expect("zip entry");
        writer.write_all(data).expect("zip write");
    }
    writer.finish().expect("zip finish").into_inner()
}

/// A GitHub-artifact-like zip at `dir/name` holding `entries`.
pub fn zip_file(dir: &Path, name: &str, entries: &[(&str, &[u8])]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, zip_bytes(entries)).expect("write .zip");
    path
}

/// The first `keep` bytes of `source` written to `dir/name`.
pub fn truncated_copy(source_bytes: &[u8], keep: usize, dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, &source_bytes[..keep.min(source_bytes.len())]).expect("write truncated");
    path
}
