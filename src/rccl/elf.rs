//! Just enough ELF64 to check librccl is an x86-64 shared object and to find its
//! `.hip_fatbin` section, where hipcc puts the GPU code objects.

use serde::Serialize;

use super::bytes::{slice_at, u16_at, u32_at, u64_at};

const ELF_MAGIC: &[u8; 4] = b"\x7fELF";
const ELFCLASS64: u8 = 2;
const ELFDATA2LSB: u8 = 1;
const ET_DYN: u16 = 3;
const EM_X86_64: u16 = 62;
const SHT_NOBITS: u32 = 8;
/// e_shstrndx escape: the real index is in section 0's sh_link.
const SHN_XINDEX: u16 = 0xffff;
const ELF64_HEADER_SIZE: u64 = 64;
const ELF64_SECTION_HEADER_SIZE: u64 = 64;

/// The section HIP's fat binary lives in.
pub const HIP_FATBIN_SECTION: &str = ".hip_fatbin";

/// Why bytes are not an ELF64 little-endian file we can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElfError {
    #[error("no ELF magic (\\x7fELF) at the start")]
    NotElf,
    #[error("ELF class {0}, expected 2 (64-bit)")]
    Not64Bit(u8),
    #[error("ELF data encoding {0}, expected 1 (little-endian)")]
    NotLittleEndian(u8),
    #[error("the file ends inside its {0}")]
    Truncated(&'static str),
}

/// One section header, with its name resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Section {
    pub name: String,
    /// Where its bytes start in the file.
    pub offset: u64,
    pub size: u64,
    /// False for SHT_NOBITS (.bss-like): nothing in the file.
    pub has_file_data: bool,
}

/// What the ELF header says plus the section table (empty when stripped of section headers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ElfFile {
    pub elf_type: u16,
    pub machine: u16,
    pub sections: Vec<Section>,
}

impl ElfFile {
    pub fn is_shared_object(&self) -> bool {
        self.elf_type == ET_DYN
    }

    pub fn is_x86_64(&self) -> bool {
        self.machine == EM_X86_64
    }

    pub fn type_name(&self) -> String {
        match self.elf_type {
            1 => "ET_REL (relocatable object)".into(),
            2 => "ET_EXEC (executable)".into(),
            3 => "ET_DYN (shared object)".into(),
            4 => "ET_CORE (core dump)".into(),
            other => format!("type {other}"),
        }
    }

    pub fn machine_name(&self) -> String {
        match self.machine {
            3 => "x86 (32-bit)".into(),
            40 => "ARM".into(),
            62 => "x86-64".into(),
            183 => "AArch64".into(),
            224 => "AMDGPU".into(),
            243 => "RISC-V".into(),
            other => format!("machine {other}"),
        }
    }

    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|section| section.name == name)
    }
}

/// Parse the ELF header and section headers. A damaged section table is not fatal: the caller
/// then scans the whole file for bundles instead.
pub fn parse(data: &[u8]) -> Result<ElfFile, ElfError> {
    if data.get(..4) != Some(&ELF_MAGIC[..]) {
        return Err(ElfError::NotElf);
    }
    if (data.len() as u64) < ELF64_HEADER_SIZE {
        return Err(ElfError::Truncated("ELF header"));
    }
    let class = data.get(4).copied().unwrap_or(0);
    if class != ELFCLASS64 {
        return Err(ElfError::Not64Bit(class));
    }
    let encoding = data.get(5).copied().unwrap_or(0);
    if encoding != ELFDATA2LSB {
        return Err(ElfError::NotLittleEndian(encoding));
    }
    let truncated = || ElfError::Truncated("ELF header");
    let elf_type = u16_at(data, 16).ok_or_else(truncated)?;
    let machine = u16_at(data, 18).ok_or_else(truncated)?;
    let sections = section_table(data).unwrap_or_default();
    Ok(ElfFile { elf_type, machine, sections })
}

/// The section headers with names, or None when the table or its string table is out of bounds.
fn section_table(data: &[u8]) -> Option<Vec<Section>> {
    let shoff = u64_at(data, 0x28)?;
    let shentsize = u64::from(u16_at(data, 0x3a)?);
    let mut shnum = u64::from(u16_at(data, 0x3c)?);
    let mut shstrndx = u64::from(u16_at(data, 0x3e)?);
    if shoff == 0 || shentsize < ELF64_SECTION_HEADER_SIZE {
        return None;
    }
    let header = |index: u64| -> Option<&[u8]> {
        slice_at(data, shoff.checked_add(index.checked_mul(shentsize)?)?, ELF64_SECTION_HEADER_SIZE)
    };
    // Extended numbering: counts that do not fit in 16 bits live in section 0.
    if shnum == 0 {
        shnum = u64_at(header(0)?, 32)?;
    }
    if shstrndx == u64::from(SHN_XINDEX) {
        shstrndx = u64::from(u32_at(header(0)?, 40)?);
    }
    // Every header must be inside the file; this also bounds the allocation below.
    shnum.checked_mul(shentsize).and_then(|len| slice_at(data, shoff, len))?;
    let strtab_header = header(shstrndx)?;
    let strtab = slice_at(data, u64_at(strtab_header, 24)?, u64_at(strtab_header, 32)?)?;

    let mut sections = Vec::with_capacity(usize::try_from(shnum).ok()?);
    for index in 0..shnum {
        let raw = header(index)?;
        let name_offset = usize::try_from(u32_at(raw, 0)?).ok()?;
        let name = strtab
            .get(name_offset..)
            .map(|rest| rest.split(|&b| b == 0).next().unwrap_or_default())
            .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
            .unwrap_or_default();
        sections.push(Section {
            name,
            offset: u64_at(raw, 24)?,
            size: u64_at(raw, 32)?,
            has_file_data: u32_at(raw, 4)? != SHT_NOBITS,
        });
    }
    Some(sections)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal ELF64 LE file: header, one payload section, shstrtab, section table.
    pub(crate) fn synthetic_elf(elf_type: u16, machine: u16, section_name: &str, payload: &[u8]) -> Vec<u8> {
        let mut file = vec![0u8; 64];
        file[..4].copy_from_slice(ELF_MAGIC);
        file[4] = ELFCLASS64;
        file[5] = ELFDATA2LSB;
        file[6] = 1;
        file[16..18].copy_from_slice(&elf_type.to_le_bytes());
        file[18..20].copy_from_slice(&machine.to_le_bytes());
        let payload_offset = file.len() as u64;
        file.extend_from_slice(payload);
        let strtab_offset = file.len() as u64;
        let mut strtab = vec![0u8];
        let payload_name = strtab.len() as u32;
        strtab.extend_from_slice(section_name.as_bytes());
        strtab.push(0);
        let strtab_name = strtab.len() as u32;
        strtab.extend_from_slice(b".shstrtab\0");
        file.extend_from_slice(&strtab);
        while !file.len().is_multiple_of(8) {
            file.push(0);
        }
        let shoff = file.len() as u64;
        let section = |name: u32, kind: u32, offset: u64, size: u64| {
            let mut header = vec![0u8; 64];
            header[0..4].copy_from_slice(&name.to_le_bytes());
            header[4..8].copy_from_slice(&kind.to_le_bytes());
            header[24..32].copy_from_slice(&offset.to_le_bytes());
            header[32..40].copy_from_slice(&size.to_le_bytes());
            header
        };
        file.extend(section(0, 0, 0, 0));
        file.extend(section(payload_name, 1, payload_offset, payload.len() as u64));
        file.extend(section(strtab_name, 3, strtab_offset, strtab.len() as u64));
        file[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        file[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        file[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        file[0x3e..0x40].copy_from_slice(&2u16.to_le_bytes());
        add_dynamic(&mut file);
        file
    }

    /// What makes it loadable: a dynamic section (an empty string table, DT_NULL) and program
    /// headers mapping the whole file (vaddr = offset).
    fn add_dynamic(file: &mut Vec<u8>) {
        let dynstr = file.len() as u64;
        file.extend_from_slice(&[0u8; 8]);
        let dynamic = file.len() as u64;
        for (tag, value) in [(5u64, dynstr), (10, 1), (0, 0)] {
            file.extend_from_slice(&tag.to_le_bytes());
            file.extend_from_slice(&value.to_le_bytes());
        }
        let phoff = file.len() as u64;
        let total = phoff + 2 * 56;
        for (kind, offset, size) in [(1u32, 0u64, total), (2, dynamic, 48)] {
            let mut header = vec![0u8; 56];
            header[0..4].copy_from_slice(&kind.to_le_bytes());
            header[8..16].copy_from_slice(&offset.to_le_bytes());
            header[16..24].copy_from_slice(&offset.to_le_bytes());
            header[32..40].copy_from_slice(&size.to_le_bytes());
            file.extend(header);
        }
        file[0x20..0x28].copy_from_slice(&phoff.to_le_bytes());
        file[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        file[0x38..0x3a].copy_from_slice(&2u16.to_le_bytes());
    }

    #[test]
    fn finds_the_fatbin_section_of_a_shared_object() {
        let file = synthetic_elf(ET_DYN, EM_X86_64, HIP_FATBIN_SECTION, b"payload!");
        let elf = parse(&file).expect("parses");
        assert!(elf.is_shared_object());
        assert!(elf.is_x86_64());
        let section = elf.section(HIP_FATBIN_SECTION).expect("has .hip_fatbin");
        assert_eq!(slice_at(&file, section.offset, section.size), Some(&b"payload!"[..]));
        assert_eq!(elf.sections.len(), 3);
    }

    #[test]
    fn reports_type_and_machine() {
        let file = synthetic_elf(2, 183, ".text", b"");
        let elf = parse(&file).expect("parses");
        assert!(!elf.is_shared_object());
        assert!(!elf.is_x86_64());
        assert_eq!(elf.machine_name(), "AArch64");
        assert!(elf.type_name().starts_with("ET_EXEC"));
    }

    #[test]
    fn refuses_non_elf_32_bit_and_big_endian() {
        assert_eq!(parse(b"PK\x03\x04 not an elf"), Err(ElfError::NotElf));
        assert_eq!(parse(b""), Err(ElfError::NotElf));
        assert_eq!(parse(b"\x7fELF"), Err(ElfError::Truncated("ELF header")));
        let mut file = synthetic_elf(ET_DYN, EM_X86_64, ".text", b"");
        file[4] = 1;
        assert_eq!(parse(&file), Err(ElfError::Not64Bit(1)));
        file[4] = 2;
        file[5] = 2;
        assert_eq!(parse(&file), Err(ElfError::NotLittleEndian(2)));
    }

    #[test]
    fn a_section_table_beyond_the_end_yields_no_sections() {
        let mut file = synthetic_elf(ET_DYN, EM_X86_64, HIP_FATBIN_SECTION, b"x");
        file[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(parse(&file).expect("header parses").sections, vec![]);
        let mut file = synthetic_elf(ET_DYN, EM_X86_64, HIP_FATBIN_SECTION, b"x");
        file[0x3c..0x3e].copy_from_slice(&0xfff0u16.to_le_bytes());
        assert_eq!(parse(&file).expect("header parses").sections, vec![]);
    }
}
