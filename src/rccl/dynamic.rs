//! The dynamic linking view of a shared object, read the way the loader reads it: program
//! headers → PT_DYNAMIC → its string and symbol tables. SONAME, DT_NEEDED, RUNPATH/RPATH, and the
//! dynamic symbols it exports and imports. Every offset and count is checked against the file: a
//! library whose headers point outside it cannot be loaded, and is refused, never guessed at.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::bytes::{slice_at, u16_at, u32_at, u64_at};

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PHDR_SIZE: u64 = 56;
const DYN_SIZE: u64 = 16;
const SYM_SIZE: u64 = 24;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_HASH: u64 = 4;
const DT_STRTAB: u64 = 5;
const DT_SYMTAB: u64 = 6;
const DT_STRSZ: u64 = 10;
const DT_SONAME: u64 = 14;
const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;
const DT_GNU_HASH: u64 = 0x6fff_fef5;
const DT_VERNEED: u64 = 0x6fff_fffe;
const DT_VERNEEDNUM: u64 = 0x6fff_ffff;
/// Elf64_Verneed and Elf64_Vernaux are 16 bytes each.
const VERNEED_SIZE: u64 = 16;
/// More symbols than any real library has (libtorch_hip has ~10^5): a count past this is a lie.
const MAX_SYMBOLS: u64 = 4_000_000;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynamicInfo {
    pub soname: Option<String>,
    pub needed: Vec<String>,
    pub runpath: Vec<String>,
    pub rpath: Vec<String>,
    /// Defined global/weak dynamic symbols of default or protected visibility.
    pub exports: BTreeSet<String>,
    /// Undefined dynamic symbols: what it needs from other libraries.
    pub imports: BTreeSet<String>,
    /// Symbol versions it needs (`GLIBC_2.34`, …), from its version-needs table: the oldest C
    /// library it runs on.
    #[serde(default)]
    pub version_needs: BTreeSet<String>,
}

/// Why the dynamic view cannot be read: the loader could not load it either.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DynamicError {
    #[error("its program headers lie outside the file or claim an absurd count")]
    ProgramHeaders,
    #[error("it has no dynamic section (PT_DYNAMIC): not a loadable shared object")]
    NoDynamic,
    #[error("its dynamic section lies outside the file")]
    DynamicOutside,
    #[error("its dynamic {0} lies outside the file or outside every loaded segment")]
    TableOutside(&'static str),
    #[error("its symbol hash table is damaged or claims an absurd symbol count")]
    Hash,
}

/// A loaded segment: where its bytes are in the file and in memory.
struct Segment {
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

pub fn parse_dynamic(data: &[u8]) -> Result<DynamicInfo, DynamicError> {
    let phoff = u64_at(data, 0x20).ok_or(DynamicError::ProgramHeaders)?;
    let phentsize = u64::from(u16_at(data, 0x36).ok_or(DynamicError::ProgramHeaders)?);
    let phnum = u64::from(u16_at(data, 0x38).ok_or(DynamicError::ProgramHeaders)?);
    if phnum == 0 {
        return Err(DynamicError::NoDynamic);
    }
    if phentsize < PHDR_SIZE || phnum.checked_mul(phentsize).and_then(|len| slice_at(data, phoff, len)).is_none() {
        return Err(DynamicError::ProgramHeaders);
    }
    let mut segments = Vec::new();
    let mut dynamic = None;
    for index in 0..phnum {
        let header = slice_at(data, phoff + index * phentsize, PHDR_SIZE).ok_or(DynamicError::ProgramHeaders)?;
        let kind = u32_at(header, 0).ok_or(DynamicError::ProgramHeaders)?;
        let field = |at| u64_at(header, at).ok_or(DynamicError::ProgramHeaders);
        let (offset, vaddr, filesz) = (field(8)?, field(16)?, field(32)?);
        match kind {
            PT_LOAD => segments.push(Segment { offset, vaddr, filesz }),
            PT_DYNAMIC => dynamic = Some((offset, filesz)),
            _ => {}
        }
    }
    let (dyn_offset, dyn_size) = dynamic.ok_or(DynamicError::NoDynamic)?;
    let entries = slice_at(data, dyn_offset, dyn_size).ok_or(DynamicError::DynamicOutside)?;

    let mut tags: Vec<(u64, u64)> = Vec::new();
    for index in 0..dyn_size / DYN_SIZE {
        let tag = u64_at(entries, index * DYN_SIZE).ok_or(DynamicError::DynamicOutside)?;
        if tag == DT_NULL {
            break;
        }
        tags.push((tag, u64_at(entries, index * DYN_SIZE + 8).ok_or(DynamicError::DynamicOutside)?));
    }
    let value = |wanted: u64| tags.iter().find(|(tag, _)| *tag == wanted).map(|(_, value)| *value);
    let file_offset = |vaddr: u64| {
        segments.iter().find(|s| vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz).map(|s| s.offset + (vaddr - s.vaddr))
    };

    let strtab_size = value(DT_STRSZ).ok_or(DynamicError::TableOutside("string table"))?;
    let strtab = value(DT_STRTAB)
        .and_then(file_offset)
        .and_then(|offset| slice_at(data, offset, strtab_size))
        .ok_or(DynamicError::TableOutside("string table"))?;
    let string = |offset: u64| -> Option<String> {
        let rest = strtab.get(usize::try_from(offset).ok()?..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&rest[..end]).into_owned())
    };
    let strings = |wanted: u64| -> Result<Vec<String>, DynamicError> {
        tags.iter()
            .filter(|(tag, _)| *tag == wanted)
            .map(|(_, offset)| string(*offset).ok_or(DynamicError::TableOutside("string table")))
            .collect()
    };
    let split_paths = |list: Vec<String>| {
        list.iter().flat_map(|l| l.split(':')).filter(|p| !p.is_empty()).map(str::to_string).collect()
    };

    let mut info = DynamicInfo {
        soname: strings(DT_SONAME)?.into_iter().next(),
        needed: strings(DT_NEEDED)?,
        runpath: split_paths(strings(DT_RUNPATH)?),
        rpath: split_paths(strings(DT_RPATH)?),
        ..Default::default()
    };

    if let (Some(offset), Some(count)) = (value(DT_VERNEED).and_then(file_offset), value(DT_VERNEEDNUM)) {
        info.version_needs = version_needs(data, offset, count, &string)?;
    }

    let Some(symtab_vaddr) = value(DT_SYMTAB) else { return Ok(info) };
    let count = symbol_count(data, &value, &file_offset)?;
    let symtab = file_offset(symtab_vaddr)
        .and_then(|offset| slice_at(data, offset, count.checked_mul(SYM_SIZE)?))
        .ok_or(DynamicError::TableOutside("symbol table"))?;
    for index in 1..count {
        let sym = slice_at(symtab, index * SYM_SIZE, SYM_SIZE).ok_or(DynamicError::TableOutside("symbol table"))?;
        let name = string(u64::from(u32_at(sym, 0).unwrap_or(0))).unwrap_or_default();
        if name.is_empty() {
            continue;
        }
        let (info_byte, other, section) = (sym[4], sym[5], u16_at(sym, 6).unwrap_or(0));
        let binding = info_byte >> 4;
        let visible = matches!(other & 3, 0 | 3);
        if section == 0 {
            info.imports.insert(name);
        } else if matches!(binding, 1 | 2) && visible {
            info.exports.insert(name);
        }
    }
    Ok(info)
}

/// The version names of every Elf64_Vernaux entry: a chain of Verneed records (one per library),
/// each with a chain of Vernaux records (one per version), linked by byte offsets.
fn version_needs(
    data: &[u8],
    first: u64,
    count: u64,
    string: &dyn Fn(u64) -> Option<String>,
) -> Result<BTreeSet<String>, DynamicError> {
    let outside = || DynamicError::TableOutside("version needs");
    if count > MAX_SYMBOLS {
        return Err(outside());
    }
    let mut names = BTreeSet::new();
    let mut need = first;
    for _ in 0..count {
        let record = slice_at(data, need, VERNEED_SIZE).ok_or_else(outside)?;
        let aux_count = u16_at(record, 2).ok_or_else(outside)?;
        let mut aux = need.checked_add(u64::from(u32_at(record, 8).ok_or_else(outside)?)).ok_or_else(outside)?;
        for _ in 0..aux_count {
            let entry = slice_at(data, aux, VERNEED_SIZE).ok_or_else(outside)?;
            names.insert(string(u64::from(u32_at(entry, 8).ok_or_else(outside)?)).ok_or_else(outside)?);
            aux = aux.checked_add(u64::from(u32_at(entry, 12).ok_or_else(outside)?)).ok_or_else(outside)?;
        }
        let next = u64::from(u32_at(record, 12).ok_or_else(outside)?);
        if next == 0 {
            break;
        }
        need = need.checked_add(next).ok_or_else(outside)?;
    }
    Ok(names)
}

/// How many entries the dynamic symbol table has: from DT_HASH's chain count, else the highest
/// index DT_GNU_HASH reaches (the table itself has no length).
fn symbol_count(
    data: &[u8],
    value: &dyn Fn(u64) -> Option<u64>,
    file_offset: &dyn Fn(u64) -> Option<u64>,
) -> Result<u64, DynamicError> {
    let at = |tag| value(tag).and_then(file_offset);
    let count = if let Some(hash) = at(DT_HASH) {
        u64::from(u32_at(data, hash + 4).ok_or(DynamicError::Hash)?)
    } else if let Some(gnu) = at(DT_GNU_HASH) {
        gnu_hash_count(data, gnu).ok_or(DynamicError::Hash)?
    } else {
        return Err(DynamicError::Hash);
    };
    if count > MAX_SYMBOLS {
        return Err(DynamicError::Hash);
    }
    Ok(count)
}

fn gnu_hash_count(data: &[u8], table: u64) -> Option<u64> {
    let nbuckets = u64::from(u32_at(data, table)?);
    let symoffset = u64::from(u32_at(data, table + 4)?);
    let bloom_size = u64::from(u32_at(data, table + 8)?);
    if nbuckets > MAX_SYMBOLS || bloom_size > MAX_SYMBOLS {
        return None;
    }
    let buckets = table + 16 + bloom_size * 8;
    let chains = buckets + nbuckets * 4;
    let mut last = 0;
    for bucket in 0..nbuckets {
        last = last.max(u64::from(u32_at(data, buckets + bucket * 4)?));
    }
    if last < symoffset {
        return Some(symoffset);
    }
    // Walk the last chain to its end (the entry with bit 0 set).
    while last - symoffset < MAX_SYMBOLS {
        if u32_at(data, chains + (last - symoffset) * 4)? & 1 == 1 {
            return Some(last + 1);
        }
        last += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;

    use super::*;

    /// A real shared object from gcc.
    fn library(dir: &Path, source: &str, flags: &[&str]) -> Vec<u8> {
        let c = dir.join("lib.c");
        let so = dir.join("lib.so");
        std::fs::write(&c, source).unwrap();
        let status =
            Command::new("gcc").args(["-shared", "-fPIC", "-o"]).arg(&so).arg(&c).args(flags).status().unwrap();
        assert!(status.success(), "gcc failed");
        std::fs::read(so).unwrap()
    }

    const SOURCE: &str = "extern int ncclImported(void);\n\
        int ncclCommInitRankScalable(void) { return ncclImported(); }\n\
        __attribute__((visibility(\"hidden\"))) int ncclHidden(void) { return 1; }\n\
        static int ncclStatic(void) { return 2; } int ncclUse(void) { return ncclStatic(); }\n";

    #[test]
    fn reads_the_glibc_versions_a_program_needs() {
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("main.c");
        std::fs::write(&c, "#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n").unwrap();
        let dynamic = dir.path().join("dynamic");
        assert!(Command::new("gcc").arg("-o").arg(&dynamic).arg(&c).status().unwrap().success());
        let info = parse_dynamic(&std::fs::read(&dynamic).unwrap()).unwrap();
        assert!(info.version_needs.iter().any(|v| v.starts_with("GLIBC_2.")), "{:?}", info.version_needs);
        let fixed = dir.path().join("static");
        assert!(Command::new("gcc").args(["-static", "-o"]).arg(&fixed).arg(&c).status().unwrap().success());
        assert_eq!(parse_dynamic(&std::fs::read(&fixed).unwrap()).unwrap_err(), DynamicError::NoDynamic);
    }

    #[test]
    fn reads_soname_needed_paths_exports_and_imports_with_either_hash_style() {
        let dir = tempfile::tempdir().unwrap();
        for style in ["--hash-style=gnu", "--hash-style=sysv"] {
            let hash = format!("-Wl,{style}");
            let bytes = library(
                dir.path(),
                SOURCE,
                &[
                    "-Wl,-soname,librccl.so.1",
                    "-Wl,-rpath,$ORIGIN:/opt/rocm/lib",
                    "-Wl,--enable-new-dtags",
                    &hash,
                    "-Wl,--no-as-needed",
                    "-lm",
                ],
            );
            let info = parse_dynamic(&bytes).unwrap();
            assert_eq!(info.soname.as_deref(), Some("librccl.so.1"), "{style}");
            assert!(info.needed.iter().any(|n| n.starts_with("libm.so")), "{style}: {info:?}");
            assert_eq!(info.runpath, ["$ORIGIN", "/opt/rocm/lib"], "{style}");
            assert!(info.exports.contains("ncclCommInitRankScalable") && info.exports.contains("ncclUse"), "{style}");
            assert!(!info.exports.contains("ncclHidden") && !info.exports.contains("ncclStatic"), "{style}");
            assert!(info.imports.contains("ncclImported"), "{style}: {info:?}");
        }
    }

    #[test]
    fn lying_headers_are_refused_and_nothing_panics() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = library(dir.path(), SOURCE, &[]);
        let mut far = bytes.clone();
        far[0x20..0x28].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
        assert_eq!(parse_dynamic(&far), Err(DynamicError::ProgramHeaders));
        let mut many = bytes.clone();
        many[0x38..0x3a].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(parse_dynamic(&many), Err(DynamicError::ProgramHeaders));
        let mut none = bytes.clone();
        none[0x38..0x3a].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(parse_dynamic(&none), Err(DynamicError::NoDynamic));
        // Any truncation and any single corrupted byte: an answer, never a panic.
        for keep in (0..bytes.len()).step_by(61) {
            let _ = parse_dynamic(&bytes[..keep]);
        }
        for at in (0..bytes.len().min(16384)).step_by(7) {
            let mut mutated = bytes.clone();
            mutated[at] ^= 0xff;
            let _ = parse_dynamic(&mutated);
        }
    }
}
