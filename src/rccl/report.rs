//! What `rccl inspect` found, as data (JSON with --json; `commands/rccl.rs` renders its text).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::artifact::ArtifactFormat;
use super::compressed::Method;
use super::fatbin::FoundBundle;
use crate::error::{Error, Result};

/// One code object (bundle entry) in the library.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeObject {
    /// The bundle entry id, e.g. `hipv4-amdgcn-amd-amdhsa--gfx1151`.
    pub id: String,
    /// `gfx1151`; None for the host entry.
    pub target: Option<String>,
    pub size: u64,
    /// How its bundle was stored: "none", "zlib" or "zstd".
    pub compression: String,
    /// Offset of its bundle in the library file.
    pub bundle_offset: u64,
}

/// Where the fat binary was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FatbinLocation {
    /// `.hip_fatbin`, or None when bundles were found by scanning the whole file.
    pub section: Option<String>,
    pub offset: u64,
    pub size: u64,
}

/// Everything `rccl inspect` reports, plus the library bytes `build` puts in the image.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RcclReport {
    pub path: PathBuf,
    pub format: ArtifactFormat,
    /// The zip entry the library came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// sha256 of the uncompressed librccl.so.1: what ends up in the image.
    pub sha256: String,
    /// Size of the uncompressed library in bytes.
    pub size: u64,
    pub elf_type: String,
    pub elf_machine: String,
    pub fatbin: FatbinLocation,
    pub bundle_count: usize,
    /// Sorted, deduplicated.
    pub gfx_targets: Vec<String>,
    pub code_objects: Vec<CodeObject>,
    pub has_gfx1151: bool,
    pub ok: bool,
    pub problems: Vec<String>,
    /// SONAME, DT_NEEDED, RUNPATH and the dynamic symbols (None: it cannot be loaded).
    pub dynamic: Option<super::dynamic::DynamicInfo>,
    /// Whether it would load in the image it goes into (`--against IMAGE`, `build`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abi: Option<super::abi::AbiReport>,
    /// The uncompressed library, for `build`.
    #[serde(skip)]
    pub library_bytes: Vec<u8>,
}

pub(crate) fn code_objects(bundles: &[FoundBundle]) -> Vec<CodeObject> {
    bundles
        .iter()
        .flat_map(|bundle| {
            let compression = match bundle.compression.as_ref().map(|c| c.method) {
                None => "none",
                Some(Method::Zlib) => "zlib",
                Some(Method::Zstd) => "zstd",
            };
            bundle.entries.iter().map(move |entry| CodeObject {
                id: entry.id.clone(),
                target: entry.gfx_target(),
                size: entry.size,
                compression: compression.to_string(),
                bundle_offset: bundle.file_offset,
            })
        })
        .collect()
}

impl RcclReport {
    /// The verdict as a Result: Err names what is missing (gfx1151) and how to fix it.
    pub fn ensure_gfx1151(&self) -> Result<()> {
        if self.ok {
            return Ok(());
        }
        // Each problem carries its own fix.
        Err(Error::Artifact {
            path: self.path.clone(),
            message: format!(
                "{}: rejected as an RCCL for Strix Halo: {}",
                self.path.display(),
                self.problems.join("; ")
            ),
            fix: None,
        })
    }

    /// Record the ABI check against an image: its problems become the report's.
    pub fn add_abi(&mut self, abi: super::abi::AbiReport) {
        if !abi.ok {
            self.ok = false;
            self.problems.extend(abi.problems.iter().map(|p| format!("against {}: {p}", abi.image)));
        }
        self.abi = Some(abi);
    }

    /// The comma-separated targets for the image label.
    pub fn gfx_targets_label(&self) -> String {
        self.gfx_targets.join(",")
    }
}
