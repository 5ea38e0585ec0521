//! RCCL artifacts: open (.so / .gz / .zip), check the ELF, find the offload bundles (plain or
//! compressed) holding the GPU code objects, and judge whether the library carries gfx1151; and
//! RCCL's own log ([`log`]): which network it took between the nodes, or why it failed.
//!
//! Everything in an artifact is untrusted: parsers bounds-check every offset and size
//! ([`bytes`]), and decompression is capped, so a damaged download fails with a message.

pub mod abi;
pub mod artifact;
pub mod bundle;
pub mod bytes;
pub mod compressed;
pub mod dynamic;
pub mod elf;
pub mod fatbin;
pub mod log;
pub mod report;
pub mod stock;
pub mod verdict;

use std::path::Path;

use sha2::{Digest, Sha256};

pub use artifact::ArtifactFormat;
pub use report::{FatbinLocation, RcclReport};
pub use verdict::REQUIRED_TARGET;

use crate::error::{Error, Result};
use fatbin::ScanScope;

/// Open and inspect an artifact. Err for files that cannot be read as a library at all;
/// a readable library that lacks gfx1151 is Ok with `ok == false` (see
/// [`RcclReport::ensure_gfx1151`]).
pub fn inspect_artifact(path: &Path) -> Result<RcclReport> {
    let artifact = artifact::open(path)?;
    inspect_library(path, artifact.format, artifact.member, artifact.library)
}

/// Inspect an already unwrapped library.
pub fn inspect_library(
    path: &Path,
    format: ArtifactFormat,
    member: Option<String>,
    library: Vec<u8>,
) -> Result<RcclReport> {
    let what = match &member {
        Some(member) => format!("{} (zip entry {member})", path.display()),
        None => path.display().to_string(),
    };
    let elf = elf::parse(&library).map_err(|why| {
        Error::artifact(
            path,
            format!("{what}: not an ELF file: {why}"),
            "give librccl.so.1 from the build-rccl workflow (plain, .gz, or the workflow's artifact .zip)",
        )
    })?;

    let fatbin_section = elf
        .section(elf::HIP_FATBIN_SECTION)
        .filter(|section| section.has_file_data)
        .and_then(|section| Some((section, bytes::slice_at(&library, section.offset, section.size)?)));
    let (location, bundles) = match fatbin_section {
        Some((section, region)) => {
            let bundles = fatbin::scan(region, section.offset, ScanScope::FatbinSection);
            let location =
                FatbinLocation { section: Some(section.name.clone()), offset: section.offset, size: section.size };
            (location, bundles)
        }
        None => {
            let bundles = fatbin::scan(&library, 0, ScanScope::WholeFile);
            (FatbinLocation { section: None, offset: 0, size: library.len() as u64 }, bundles)
        }
    };
    let bundles = bundles.map_err(|why| {
        Error::artifact(
            path,
            format!("{what}: a GPU code-object bundle is corrupt or truncated ({why})"),
            "download the build-rccl artifact again, or rebuild it",
        )
    })?;

    let code_objects = report::code_objects(&bundles);
    let mut gfx_targets: Vec<String> = code_objects.iter().filter_map(|object| object.target.clone()).collect();
    gfx_targets.sort();
    gfx_targets.dedup();
    let gfx1151_code_bytes = code_objects
        .iter()
        .filter(|object| object.target.as_deref() == Some(REQUIRED_TARGET))
        .map(|object| object.size)
        .sum();
    let mut verdict = verdict::judge(&elf, bundles.len(), &gfx_targets, gfx1151_code_bytes);
    // What the loader reads first: a library it could not load is refused whatever it carries.
    let dynamic = match dynamic::parse_dynamic(&library) {
        Ok(info) => Some(info),
        Err(why) => {
            verdict.ok = false;
            verdict.problems.push(format!("the dynamic loader cannot load it: {why}"));
            None
        }
    };

    Ok(RcclReport {
        path: path.to_path_buf(),
        format,
        member,
        sha256: sha256_hex(&library),
        size: library.len() as u64,
        elf_type: elf.type_name(),
        elf_machine: elf.machine_name(),
        fatbin: location,
        bundle_count: bundles.len(),
        gfx_targets,
        code_objects,
        has_gfx1151: verdict.has_gfx1151,
        ok: verdict.ok,
        problems: verdict.problems,
        dynamic,
        abi: None,
        library_bytes: library,
    })
}

/// Lower-case hex sha256, as `sha256sum` prints it.
pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::bundle::make_bundle;
    use super::compressed::{make_ccob, Method};
    use super::elf::tests::synthetic_elf;
    use super::*;

    fn library_with(section: &str, payload: &[u8]) -> Vec<u8> {
        synthetic_elf(3, 62, section, payload)
    }

    #[test]
    fn a_gfx1151_library_is_accepted() {
        let bundle =
            make_bundle(&[("host-x86_64-unknown-linux-gnu-", b""), ("hipv4-amdgcn-amd-amdhsa--gfx1151", &[9u8; 64])]);
        let mut fatbin = bundle.clone();
        fatbin.resize(4096, 0);
        fatbin.extend(make_ccob(&make_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1100", &[1u8; 8])]), 3, Method::Zstd));
        let library = library_with(".hip_fatbin", &fatbin);
        let report = inspect_library(Path::new("lib"), ArtifactFormat::So, None, library.clone()).expect("reads");
        assert!(report.ok, "{:?}", report.problems);
        assert_eq!(report.gfx_targets, vec!["gfx1100", "gfx1151"]);
        assert_eq!(report.bundle_count, 2);
        assert_eq!(report.code_objects.len(), 3);
        assert_eq!(report.code_objects[2].compression, "zstd");
        assert_eq!(report.sha256, sha256_hex(&library));
        assert_eq!(report.size, library.len() as u64);
        assert_eq!(report.fatbin.section.as_deref(), Some(".hip_fatbin"));
        assert_eq!(report.library_bytes, library);
        assert!(report.ensure_gfx1151().is_ok());
    }

    #[test]
    fn bundles_outside_a_fatbin_section_are_found_by_scanning() {
        let bundle = make_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1151", &[9u8; 64])]);
        let library = library_with(".rodata", &bundle);
        let report = inspect_library(Path::new("lib"), ArtifactFormat::So, None, library).expect("reads");
        assert_eq!(report.fatbin.section, None);
        assert_eq!(report.gfx_targets, vec!["gfx1151"]);
        assert!(report.ok);
    }

    #[test]
    fn a_library_without_gfx1151_is_readable_but_rejected() {
        let bundle = make_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1100", &[9u8; 64])]);
        let report = inspect_library(Path::new("lib"), ArtifactFormat::So, None, library_with(".hip_fatbin", &bundle))
            .expect("reads");
        assert!(!report.ok && !report.has_gfx1151);
        let error = report.ensure_gfx1151().expect_err("rejected");
        assert!(error.to_string().contains("no gfx1151 code objects"), "{error}");
        assert_eq!(error.kind(), crate::error::ErrorKind::Artifact);
        let empty =
            inspect_library(Path::new("lib"), ArtifactFormat::So, None, library_with(".text", b"code")).expect("reads");
        assert_eq!((empty.ok, empty.bundle_count), (false, 0));
    }

    #[test]
    fn not_elf_and_corrupt_bundles_are_errors() {
        let error = inspect_library(Path::new("x"), ArtifactFormat::So, None, b"hello".to_vec()).expect_err("not elf");
        assert!(error.to_string().contains("not an ELF file"), "{error}");
        let mut bundle = make_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1151", &[9u8; 64])]);
        bundle[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        let error = inspect_library(Path::new("x"), ArtifactFormat::So, None, library_with(".hip_fatbin", &bundle))
            .expect_err("corrupt");
        assert!(error.to_string().contains("corrupt or truncated"), "{error}");
    }

    /// Damaged input of any kind gives Ok or Err, never a panic or a runaway allocation.
    #[test]
    fn mutated_and_truncated_libraries_never_panic() {
        let plain =
            make_bundle(&[("host-x86_64-unknown-linux-gnu-", b""), ("hipv4-amdgcn-amd-amdhsa--gfx1151", &[9u8; 200])]);
        let mut fatbin = plain.clone();
        for (version, method) in [(1, Method::Zstd), (2, Method::Zlib), (3, Method::Zstd), (1, Method::Zlib)] {
            fatbin.extend(make_ccob(&plain, version, method));
        }
        let library = library_with(".hip_fatbin", &fatbin);
        // xorshift: deterministic, no extra dependency.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..3000 {
            let mut damaged = library.clone();
            for _ in 0..(1 + next() % 4) {
                let at = (next() % damaged.len() as u64) as usize;
                damaged[at] = match next() % 3 {
                    0 => 0xff,
                    1 => 0,
                    _ => next() as u8,
                };
            }
            let _ = inspect_library(Path::new("x"), ArtifactFormat::So, None, damaged);
        }
        for cut in 0..library.len() {
            let _ = inspect_library(Path::new("x"), ArtifactFormat::So, None, library[..cut].to_vec());
        }
    }
}
