//! Whether an artifact can go into the image: an x86-64 shared object carrying gfx1151 code.

use serde::Serialize;

use super::elf::ElfFile;

/// The GPU of AMD Strix Halo.
pub const REQUIRED_TARGET: &str = "gfx1151";

/// What is wrong with an artifact; empty problems means accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub ok: bool,
    pub has_gfx1151: bool,
    /// Each phrased "what is wrong. Fix: what to do".
    pub problems: Vec<String>,
}

/// Judge the library from its ELF header, whether any bundle was found, and its targets.
/// `gfx1151_code_bytes` is the total size of the gfx1151 code objects (an empty entry runs nothing).
pub fn judge(elf: &ElfFile, bundle_count: usize, gfx_targets: &[String], gfx1151_code_bytes: u64) -> Verdict {
    let mut problems = Vec::new();
    if !elf.is_shared_object() {
        problems.push(format!(
            "ELF type is {}, expected ET_DYN (shared object). Fix: pass librccl.so.1 itself",
            elf.type_name()
        ));
    }
    if !elf.is_x86_64() {
        problems.push(format!(
            "ELF machine is {}, expected x86-64. Fix: pass the x86-64 librccl.so.1 the build-rccl workflow produces",
            elf.machine_name()
        ));
    }
    let has_gfx1151 = gfx1151_code_bytes > 0;
    if bundle_count == 0 {
        problems.push(format!(
            "no GPU code objects: no offload bundle in .hip_fatbin or anywhere in the file, so no \
             {REQUIRED_TARGET} kernels. Fix: rebuild RCCL with GPU_TARGETS={REQUIRED_TARGET} (the build-rccl workflow)"
        ));
    } else if !has_gfx1151 {
        let found = if gfx_targets.is_empty() { "none".to_string() } else { gfx_targets.join(", ") };
        problems.push(format!(
            "no {REQUIRED_TARGET} code objects (GPU targets found: {found}), so RCCL cannot run on \
             Strix Halo. Fix: rebuild RCCL with GPU_TARGETS={REQUIRED_TARGET} (the build-rccl workflow)"
        ));
    }
    Verdict { ok: problems.is_empty(), has_gfx1151, problems }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf(elf_type: u16, machine: u16) -> ElfFile {
        ElfFile { elf_type, machine, sections: vec![] }
    }

    #[test]
    fn accepts_an_x86_64_shared_object_with_gfx1151() {
        let verdict = judge(&elf(3, 62), 1, &["gfx1100".into(), "gfx1151".into()], 4096);
        assert_eq!(verdict, Verdict { ok: true, has_gfx1151: true, problems: vec![] });
    }

    #[test]
    fn rejects_other_targets_naming_gfx1151_and_what_was_found() {
        let verdict = judge(&elf(3, 62), 1, &["gfx1100".into()], 0);
        assert!(!verdict.ok && !verdict.has_gfx1151);
        assert_eq!(verdict.problems.len(), 1);
        assert!(verdict.problems[0].starts_with("no gfx1151 code objects (GPU targets found: gfx1100)"));
    }

    #[test]
    fn rejects_no_bundles_executables_and_other_machines() {
        let verdict = judge(&elf(2, 183), 0, &[], 0);
        assert_eq!(verdict.problems.len(), 3);
        assert!(verdict.problems[0].contains("ET_EXEC"));
        assert!(verdict.problems[1].contains("AArch64"));
        assert!(verdict.problems[2].contains("no GPU code objects") && verdict.problems[2].contains("gfx1151"));
    }
}
