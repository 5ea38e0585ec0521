//! `strix-toolbox rccl inspect` against synthetic artifacts built here with gcc, flate2, zip.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use tempfile::TempDir;

use crate::support::rccl_fixtures::*;

fn inspect(path: &Path, json: bool) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_strix-toolbox"));
    command.env("NO_COLOR", "1").args(["rccl", "inspect"]).arg(path);
    if json {
        command.arg("--json");
    }
    command.output().expect("run strix-toolbox")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn report(path: &Path) -> (i32, Value) {
    let output = inspect(path, true);
    let value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", stdout(&output), stderr(&output)));
    (output.status.code().expect("exit code"), value)
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().expect("array").iter().map(|v| v.as_str().expect("string").to_string()).collect()
}

/// (id, size, compression) of each code object.
fn code_objects(value: &Value) -> Vec<(String, u64, String)> {
    value["code_objects"]
        .as_array()
        .expect("code_objects")
        .iter()
        .map(|object| {
            (
                object["id"].as_str().expect("id").to_string(),
                object["size"].as_u64().expect("size"),
                object["compression"].as_str().expect("compression").to_string(),
            )
        })
        .collect()
}

/// Exit 1, nothing on stdout, and stderr carrying every one of `needles`.
fn assert_fails_with(path: &Path, needles: &[&str]) {
    let output = inspect(path, false);
    assert_eq!(output.status.code(), Some(1), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "");
    let message = stderr(&output);
    for needle in needles {
        assert!(message.contains(needle), "expected {needle:?} in: {message}");
    }
    assert!(!message.contains("panicked"), "{message}");
}

#[test]
fn accepts_a_plain_gfx1151_library() {
    let dir = TempDir::new().expect("tempdir");
    let library = gfx1151_library(dir.path(), "librccl.so.1", "build-1");
    let bytes = std::fs::read(&library).expect("read library");
    let (code, json) = report(&library);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["path"], library.display().to_string());
    assert_eq!(json["format"], "so");
    assert_eq!(json["sha256"], sha256_hex(&bytes));
    assert_eq!(json["size"], bytes.len() as u64);
    assert_eq!(strings(&json["gfx_targets"]), ["gfx1151"]);
    assert_eq!(
        code_objects(&json),
        [(HOST_ID.to_string(), 0, "none".to_string()), (GFX1151_ID.to_string(), 3000, "none".to_string())]
    );
    assert_eq!(json["has_gfx1151"], true);
    assert_eq!(json["ok"], true);
    assert_eq!(json["fatbin"]["section"], ".hip_fatbin");
    assert_eq!(json["bundle_count"], 1);
    assert_eq!(json["elf_machine"], "x86-64");
}

#[test]
fn human_report_names_targets_sha_and_verdict() {
    let dir = TempDir::new().expect("tempdir");
    let library = gfx1151_library(dir.path(), "librccl.so.1", "text");
    let output = inspect(&library, false);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains(&format!("sha256        {}", sha256_of_file(&library))), "{text}");
    assert!(text.contains("gfx targets   gfx1151"), "{text}");
    assert!(text.contains(GFX1151_ID), "{text}");
    assert!(text.contains("verdict       OK"), "{text}");
}

#[test]
fn rejects_a_gfx1100_only_library_naming_gfx1151() {
    let dir = TempDir::new().expect("tempdir");
    let library = gfx1100_library(dir.path(), "librccl.so.1");
    let output = inspect(&library, true);
    assert_eq!(output.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON report even when rejected");
    assert_eq!(strings(&json["gfx_targets"]), ["gfx1100"]);
    assert_eq!(json["has_gfx1151"], false);
    assert_eq!(json["ok"], false);
    assert_eq!(json["sha256"], sha256_of_file(&library));
    let message = stderr(&output);
    assert!(message.contains("no gfx1151 code objects (GPU targets found: gfx1100)"), "{message}");
    assert!(message.contains("GPU_TARGETS=gfx1151"), "{message}");
    // Text mode: the report on stdout says REJECTED, exit 1.
    let text = inspect(&library, false);
    assert_eq!(text.status.code(), Some(1));
    assert!(stdout(&text).contains("REJECTED"));
}

#[test]
fn reads_a_zlib_compressed_v2_bundle() {
    let dir = TempDir::new().expect("tempdir");
    let library = compressed_library(dir.path(), "librccl.so.1", 2, Method::Zlib);
    let (code, json) = report(&library);
    assert_eq!(code, 0, "{json}");
    assert_eq!(strings(&json["gfx_targets"]), ["gfx1100", "gfx1151"]);
    assert_eq!(
        code_objects(&json),
        [
            (HOST_ID.to_string(), 0, "zlib".to_string()),
            (GFX1100_ID.to_string(), 5000, "zlib".to_string()),
            (GFX1151_ID.to_string(), 7000, "zlib".to_string()),
        ]
    );
    assert_eq!(json["sha256"], sha256_of_file(&library));
}

#[test]
fn reads_a_zstd_compressed_v3_bundle() {
    let dir = TempDir::new().expect("tempdir");
    let library = compressed_library(dir.path(), "librccl.so.1", 3, Method::Zstd);
    let (code, json) = report(&library);
    assert_eq!(code, 0, "{json}");
    assert_eq!(strings(&json["gfx_targets"]), ["gfx1100", "gfx1151"]);
    let objects = code_objects(&json);
    assert_eq!(objects.len(), 3);
    assert!(objects.iter().all(|(_, _, compression)| compression == "zstd"));
    assert_eq!(objects[2], (GFX1151_ID.to_string(), 7000, "zstd".to_string()));
}

#[test]
fn reads_several_bundles_back_to_back_in_one_section() {
    let dir = TempDir::new().expect("tempdir");
    let gfx1151 = bundle(&[(HOST_ID, b""), (GFX1151_ID, &code_object("a", 1000))]);
    let gfx1100 = bundle(&[(HOST_ID, b""), ("hipv4-amdgcn-amd-amdhsa--gfx1100:xnack-", &code_object("b", 900))]);
    let gfx90a = bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-", &code_object("c", 800))]);
    let section = concat_aligned(&[
        ccob(&gfx1100, 2, Method::Zlib),
        gfx1151.clone(),
        ccob(&gfx90a, 1, Method::Zstd),
        ccob(&gfx1151, 3, Method::Zstd),
    ]);
    let library = fatbin_library(dir.path(), "librccl.so.1", &section);
    let (code, json) = report(&library);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["bundle_count"], 4);
    assert_eq!(strings(&json["gfx_targets"]), ["gfx1100", "gfx1151", "gfx90a"]);
    assert_eq!(code_objects(&json).len(), 7);
}

#[test]
fn finds_bundles_outside_a_hip_fatbin_section() {
    let dir = TempDir::new().expect("tempdir");
    let payload = bundle(&[(HOST_ID, b""), (GFX1151_ID, &code_object("rodata", 1500))]);
    let library = shared_object_with_section(dir.path(), "librccl.so.1", ".rodata.gpu", &payload);
    let (code, json) = report(&library);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["fatbin"]["section"], Value::Null);
    assert_eq!(strings(&json["gfx_targets"]), ["gfx1151"]);
}

#[test]
fn rejects_a_shared_object_with_no_gpu_code() {
    let dir = TempDir::new().expect("tempdir");
    let library = shared_object_with_section(dir.path(), "librccl.so.1", ".rodata.other", b"nothing here");
    let output = inspect(&library, false);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("no GPU code objects"), "{}", stderr(&output));
    assert!(stderr(&output).contains("gfx1151"));
}

#[test]
fn gz_artifact_reports_the_uncompressed_library() {
    let dir = TempDir::new().expect("tempdir");
    let library = gfx1151_library(dir.path(), "librccl.so.1", "gz");
    // Named without .gz: the format comes from the magic bytes.
    let gz = gzip_file(&library, dir.path(), "download.bin");
    let (code, json) = report(&gz);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["format"], "gz");
    assert_eq!(json["sha256"], sha256_of_file(&library));
    assert_eq!(json["size"], std::fs::metadata(&library).expect("stat").len());
    assert_ne!(json["sha256"], sha256_of_file(&gz));
    assert_eq!(strings(&json["gfx_targets"]), ["gfx1151"]);
}

#[test]
fn zip_artifact_holding_the_library_or_its_gz() {
    let dir = TempDir::new().expect("tempdir");
    let library = gfx1151_library(dir.path(), "librccl.so.1", "zip");
    let bytes = std::fs::read(&library).expect("read");
    let expected_sha = sha256_hex(&bytes);

    let plain_zip = zip_file(dir.path(), "rccl-gfx1151", &[("build.log", b"ok"), ("librccl.so.1", &bytes)]);
    let (code, json) = report(&plain_zip);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["format"], "zip");
    assert_eq!(json["member"], "librccl.so.1");
    assert_eq!(json["sha256"], expected_sha);
    assert_eq!(json["size"], bytes.len() as u64);

    let gz_zip = zip_file(dir.path(), "rccl-gz.zip", &[("out/librccl.so.1.gz", &gzip_bytes(&bytes))]);
    let (code, json) = report(&gz_zip);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["format"], "zip");
    assert_eq!(json["member"], "out/librccl.so.1.gz");
    assert_eq!(json["sha256"], expected_sha);
}

#[test]
fn zip_of_a_gfx1100_library_is_rejected() {
    let dir = TempDir::new().expect("tempdir");
    let library = gfx1100_library(dir.path(), "librccl.so.1");
    let zip = zip_file(dir.path(), "a.zip", &[("librccl.so.1", &std::fs::read(&library).expect("read"))]);
    let output = inspect(&zip, false);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("gfx1151"));
}

#[test]
fn not_elf_fails_saying_what_was_expected() {
    let dir = TempDir::new().expect("tempdir");
    let path = dir.path().join("librccl.so.1");
    std::fs::write(&path, b"<html>404 Not Found</html>").expect("write");
    assert_fails_with(&path, &["not an ELF file", "librccl.so.1", "build-rccl workflow"]);
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").expect("write");
    assert_fails_with(&empty, &["not an ELF file"]);
}

#[test]
fn missing_file_fails_with_the_path() {
    let missing = Path::new("/nonexistent/librccl.so.1");
    assert_fails_with(missing, &["cannot read /nonexistent/librccl.so.1"]);
}

#[test]
fn truncated_gzip_fails() {
    let dir = TempDir::new().expect("tempdir");
    let library = gfx1151_library(dir.path(), "librccl.so.1", "trunc");
    let gz = gzip_bytes(&std::fs::read(&library).expect("read"));
    let truncated = truncated_copy(&gz, gz.len() / 2, dir.path(), "librccl.so.1.gz");
    assert_fails_with(
        &truncated,
        &["gzip data is truncated or corrupt", "Fix: download the build-rccl artifact again"],
    );
}

#[test]
fn truncated_zip_fails() {
    let dir = TempDir::new().expect("tempdir");
    let library = gfx1151_library(dir.path(), "librccl.so.1", "trunc");
    let zip = zip_bytes(&[("librccl.so.1", &std::fs::read(&library).expect("read"))]);
    let truncated = truncated_copy(&zip, zip.len() * 2 / 3, dir.path(), "artifact.zip");
    assert_fails_with(&truncated, &["not a readable zip archive", "truncated"]);
}

#[test]
fn zip_without_librccl_fails_listing_its_entries() {
    let dir = TempDir::new().expect("tempdir");
    let zip = zip_file(dir.path(), "artifact.zip", &[("README.md", b"hi"), ("logs/build.txt", b"x")]);
    assert_fails_with(&zip, &["no librccl.so.1", "README.md", "logs/build.txt"]);
}

#[test]
fn bundle_with_an_impossible_entry_count_fails() {
    let dir = TempDir::new().expect("tempdir");
    let mut payload = bundle(&[(HOST_ID, b""), (GFX1151_ID, &code_object("x", 100))]);
    payload[24..32].copy_from_slice(&0x10_0000_0000u64.to_le_bytes());
    let library = fatbin_library(dir.path(), "librccl.so.1", &payload);
    assert_fails_with(&library, &["corrupt or truncated", "claims 68719476736 entries"]);
}

#[test]
fn bundle_with_a_code_object_beyond_its_end_fails() {
    let dir = TempDir::new().expect("tempdir");
    let mut payload = bundle(&[(HOST_ID, b""), (GFX1151_ID, &code_object("x", 100))]);
    // Second entry's offset: after magic+count (32), entry 0 (24 + id), then the u64 offset.
    let second = 32 + 24 + HOST_ID.len();
    payload[second..second + 8].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
    let library = fatbin_library(dir.path(), "librccl.so.1", &payload);
    assert_fails_with(&library, &["corrupt or truncated", "ends beyond", "gfx1151"]);
}

#[test]
fn truncated_compressed_bundle_fails() {
    let dir = TempDir::new().expect("tempdir");
    let plain = bundle(&[(HOST_ID, b""), (GFX1151_ID, &code_object("x", 20_000))]);
    let compressed = ccob(&plain, 3, Method::Zstd);
    // Keep the header (claims the full length) but drop the tail of the payload.
    let cut = &compressed[..compressed.len() - 10];
    let library = fatbin_library(dir.path(), "librccl.so.1", cut);
    assert_fails_with(&library, &["corrupt or truncated", "CCOB"]);
}
