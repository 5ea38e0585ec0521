//! `rccl inspect FILE [--against IMAGE]`: report an artifact's targets, sha256, size and dynamic
//! view, and reject it unless it carries gfx1151 code objects (and, against an image, would load there).
//! `rccl log [FILE]`: what RCCL's own log says of the network it took, and why.

use clap::{Args, Subcommand};
use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::path::Path;
use std::path::PathBuf;

use crate::error::{Error, Result, EXIT_FAILURE};
use crate::output::{Output, Render, Style};
use crate::rccl::log::{RcclLogReport, RcclVerdict};
use crate::rccl::RcclReport;
use crate::settings::Settings;

#[derive(Debug, Subcommand)]
pub enum RcclCommand {
    /// Verify an RCCL artifact carries gfx1151 code objects; report targets, sha256 and size.
    Inspect(RcclInspectArgs),
    /// Judge an RCCL (or NCCL) log: did the data go over RDMA or TCP, or did RCCL fail, and why.
    ///
    /// Reads FILE, or standard input when FILE is `-` or missing: a rank's log (`strix-toolbox
    /// logs`), or the output of any program run with NCCL_DEBUG=INFO (best with
    /// NCCL_DEBUG_SUBSYS=INIT,NET,ENV, as strix-toolbox sets). Several ranks' logs may be judged
    /// together: each line names its host and process. Lines longer than 4096 bytes are read in
    /// part; a binary file is judged unknown.
    ///
    /// Verdicts, each with the lines that decided it:
    ///   rdma     the communicators took IB verbs (NET/IB: RoCE or InfiniBand), and nothing failed
    ///   tcp      a communicator took TCP sockets (NET/Socket), with why IB did not start
    ///   failed   a communicator never formed (e.g. "Failed to initialize any NET plugin": no
    ///            network could start), or RCCL failed once it had formed
    ///   unknown  the log does not say (no NCCL lines, or none about the network yet)
    ///
    /// Exit status: 0 on rdma, and on tcp where the log did not ask for IB (NCCL_IB_DISABLE=1, or
    /// NCCL_NET left IB out); 1 on tcp where IB was asked (a fall-back), on failed and on unknown,
    /// and when the file cannot be read; 2 on a usage error.
    #[command(verbatim_doc_comment)]
    Log(RcclLogArgs),
}

#[derive(Debug, Clone, Args)]
pub struct RcclLogArgs {
    /// The log; `-` or nothing reads standard input.
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct RcclInspectArgs {
    /// librccl.so.1, librccl.so.1.gz, or the GitHub artifact .zip holding either.
    pub file: PathBuf,

    /// Also check it would load in IMAGE: SONAME, every nccl*/rccl* symbol the image's RCCL and its
    /// consumers (libtorch_hip.so…) use, and its DT_NEEDED libraries (pulled when not present).
    #[arg(long, value_name = "IMAGE")]
    pub against: Option<String>,
}

/// The processes `rccl log` names one by one in text (all of them in `--json`).
const PROCESSES_SHOWN: usize = 8;

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

/// Exit 0 when what ran is what the log asked (RDMA; TCP with IB switched off), else 1.
pub fn log(args: &RcclLogArgs, out: &Output) -> Result<i32> {
    let file = args.file.as_deref().filter(|path| *path != Path::new("-"));
    if file.is_none() && std::io::stdin().is_terminal() {
        return Err(Error::Usage(
            "no log to judge: give a FILE, or pipe one in (`strix-toolbox logs NAME | strix-toolbox rccl log`)".into(),
        ));
    }
    let report = crate::ops::rccl::judge_log(file)?;
    out.report(&report);
    Ok(if report.ok { 0 } else { EXIT_FAILURE })
}

impl Render for RcclLogReport {
    fn render(&self, out: &Output) {
        let style = match self.verdict {
            RcclVerdict::Rdma => Style::Ok,
            RcclVerdict::Tcp if self.ok => Style::Ok,
            RcclVerdict::Unknown => Style::Warn,
            RcclVerdict::Tcp | RcclVerdict::Failed => Style::Fail,
        };
        out.line(&format!("{}  {}", out.paint(self.verdict.label(), style), self.why));
        out.line(&format!("  asked for IB  {}", if self.asked_for_ib { "yes" } else { "no" }));
        if !self.processes.is_empty() {
            let mut named: Vec<String> = self
                .processes
                .iter()
                .take(PROCESSES_SHOWN)
                .map(|process| {
                    let name = if process.process.is_empty() { "(no NCCL prefix)" } else { &process.process };
                    let networks = if process.networks.is_empty() {
                        "no network yet".to_string()
                    } else {
                        format!("over {}", process.networks.join(", "))
                    };
                    let formed = if process.formed > 0 { "formed" } else { "not formed" };
                    let warnings = match process.warnings {
                        0 => String::new(),
                        count => format!(", {count} warning(s)"),
                    };
                    format!("{name} {networks}, {formed}{warnings}")
                })
                .collect();
            if self.processes.len() > PROCESSES_SHOWN {
                named.push(format!("and {} more", self.processes.len() - PROCESSES_SHOWN));
            }
            out.line(&format!("  processes     {}", named.join("; ")));
        }
        let cut =
            if self.cut_lines > 0 { format!(", {} read in part (too long)", self.cut_lines) } else { String::new() };
        out.line(&format!("  lines         {} read, {} from NCCL{cut}", self.lines_read, self.nccl_lines));
        if let Some(fix) = &self.fix {
            out.line(&format!("  fix           {fix}"));
        }
        if !self.evidence.is_empty() {
            out.line("  decided by");
            for line in &self.evidence {
                out.line(&format!("    {line}"));
            }
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
