//! `rccl inspect FILE [--against IMAGE]`: report an artifact's targets, sha256, size and dynamic
//! view, and reject it unless it carries gfx1151 code objects (and, against an image, would load there).

use std::collections::{BTreeMap, BTreeSet};

use crate::cli::RcclInspectArgs;
use crate::error::Result;
use crate::output::{Output, Render};
use crate::rccl::RcclReport;
use crate::settings::Settings;

pub async fn inspect(args: &RcclInspectArgs, settings: &Settings, out: &Output) -> Result<i32> {
    let report = crate::ops::rccl::inspect(settings, &args.file, args.against.as_deref()).await?;
    out.report(&report);
    match report.ensure_gfx1151() {
        Ok(()) => Ok(0),
        Err(rejection) => {
            // The report is already printed; say why on stderr and exit 1.
            out.error(&rejection);
            Ok(crate::error::EXIT_FAILURE)
        }
    }
}

impl Render for RcclReport {
    fn render(&self, out: &Output) {
        let source = match &self.member {
            Some(member) => format!("{} ({}, entry {member})", self.path.display(), self.format.name()),
            None => format!("{} ({})", self.path.display(), self.format.name()),
        };
        out.line(&source);
        out.line(&format!("  sha256        {}", self.sha256));
        out.line(&format!("  size          {} bytes (uncompressed library)", self.size));
        out.line(&format!("  ELF           {}, {}", self.elf_machine, self.elf_type));
        if let Some(dynamic) = &self.dynamic {
            out.line(&format!("  SONAME        {}", dynamic.soname.as_deref().unwrap_or("(none)")));
            out.line(&format!(
                "  needs         {}",
                if dynamic.needed.is_empty() { "-".into() } else { dynamic.needed.join(", ") }
            ));
            let exported = dynamic.exports.iter().filter(|s| s.starts_with("nccl") || s.starts_with("rccl")).count();
            out.line(&format!("  exports       {exported} nccl*/rccl* symbols"));
        }
        let place = match &self.fatbin.section {
            Some(section) => format!("{section} at {:#x}, {} bytes", self.fatbin.offset, self.fatbin.size),
            None => "no .hip_fatbin section; scanned the whole file".to_string(),
        };
        out.line(&format!("  fat binary    {place}, {} bundle(s)", self.bundle_count));
        let targets = if self.gfx_targets.is_empty() { "none".to_string() } else { self.gfx_targets.join(", ") };
        out.line(&format!("  gfx targets   {targets}"));
        out.line(&format!("  code objects  {}", self.code_objects.len()));
        // Grouped by id: a real librccl has one bundle per translation unit, hundreds in all.
        let mut groups: BTreeMap<&str, (usize, u64, BTreeSet<&str>)> = BTreeMap::new();
        for object in &self.code_objects {
            let group = groups.entry(object.id.as_str()).or_default();
            group.0 += 1;
            group.1 += object.size;
            group.2.insert(object.compression.as_str());
        }
        let width = groups.keys().map(|id| id.len()).max().unwrap_or(0);
        for (id, (count, bytes, compressions)) in &groups {
            let compressions: Vec<&str> = compressions.iter().copied().collect();
            out.line(&format!(
                "    {id:<width$}  x{count:<4} {bytes:>12} bytes  compression: {}",
                compressions.join(", ")
            ));
        }
        if let Some(abi) = &self.abi {
            let verdict = if abi.ok { "loads there" } else { "would NOT load there" };
            out.line(&format!(
                "  against       {}: {verdict} (replaces {} cop(ies), checked {} consumer(s))",
                abi.image,
                abi.replaced.len(),
                abi.consumers.len()
            ));
            if let Some(stock) = &abi.stock {
                out.line(&format!("  stock RCCL    {}", stock.summary()));
            }
        }
        if self.ok {
            out.line("  verdict       OK: x86-64 shared object with gfx1151 code objects");
        } else {
            out.line("  verdict       REJECTED");
            for problem in &self.problems {
                out.line(&format!("    - {problem}"));
            }
        }
    }
}
