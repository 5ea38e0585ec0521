//! RCCL's own log (`NCCL_DEBUG=INFO`; RCCL keeps NCCL's lines): which network carried the data
//! between the nodes, or why the communicator never formed. The one judge of that log: the
//! launch's proof, the warning that RCCL took TCP on a RoCE link, `cluster verify`'s all-reduce
//! and `strix-toolbox rccl log` all ask it.
//!
//! How RCCL picks its network (`src/plugin/net.cc`, `ncclNetInit`): an external plugin if one
//! loads, then IB (verbs: RoCE or InfiniBand), then Socket (TCP), the first that starts with a
//! device; `NCCL_NET` restricts the choice to one name. When none starts it warns `Failed to
//! initialize any NET plugin` and the communicator is never made: that is a failure, not a
//! fall-back to TCP.

mod bounded;
mod line;

use std::io::BufRead;

use serde::{Deserialize, Serialize};

use bounded::{for_each_line, BoundedLine};
use line::{IbUnusable, Level, NcclLine, Said};

/// What the log says RCCL did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RcclVerdict {
    /// Its communicators took IB (`NET/IB`: RoCE or InfiniBand verbs) and nothing failed.
    Rdma,
    /// A communicator took TCP sockets (`NET/Socket`).
    Tcp,
    /// RCCL failed: a communicator never formed, or failed once formed; `why` says what.
    Failed,
    /// The log does not say (no NCCL lines, or none about the network yet).
    Unknown,
}

impl RcclVerdict {
    pub fn label(self) -> &'static str {
        match self {
            RcclVerdict::Rdma => "RDMA",
            RcclVerdict::Tcp => "TCP",
            RcclVerdict::Failed => "FAILED",
            RcclVerdict::Unknown => "unknown",
        }
    }
}

/// What one process (one rank: NCCL's `HOST:PID`) did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RcclProcess {
    /// `HOST:PID` as NCCL prefixes its lines (empty: lines without NCCL's prefix).
    pub process: String,
    /// The networks its communicators took, as RCCL names them (`IB`, `Socket`).
    pub networks: Vec<String>,
    /// How many of its communicators formed (`Init COMPLETE`).
    pub formed: u64,
    /// Its `NCCL WARN` lines.
    pub warnings: u64,
}

/// The judge's reading of one log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RcclLogReport {
    pub verdict: RcclVerdict,
    /// One sentence: what RCCL did and why.
    pub why: String,
    /// What to do, when something is wrong.
    pub fix: Option<String>,
    /// The log wanted RDMA: IB was not switched off (`NCCL_IB_DISABLE`) nor left out (`NCCL_NET`).
    pub asked_for_ib: bool,
    /// RDMA, or TCP where the log did not ask for IB: what was asked is what ran.
    pub ok: bool,
    /// Every process that wrote NCCL lines, in order of appearance (the first [`MAX_PROCESSES`]).
    pub processes: Vec<RcclProcess>,
    pub lines_read: u64,
    /// Lines NCCL wrote (`NCCL INFO`, `NCCL WARN`).
    pub nccl_lines: u64,
    /// Lines longer than [`bounded::MAX_LINE`] bytes, read only in part.
    pub cut_lines: u64,
    /// The lines that decided it, in the log's order.
    pub evidence: Vec<String>,
}

impl RcclLogReport {
    /// A rank whose log this is joined its peers: a communicator formed and RCCL did not fail.
    pub fn joined(&self) -> bool {
        self.verdict != RcclVerdict::Failed && self.processes.iter().any(|process| process.formed > 0)
    }
}

/// Judge lines already in memory (a rank's log tail, a program's output).
pub fn judge<S: AsRef<str>>(lines: impl IntoIterator<Item = S>) -> RcclLogReport {
    let mut judge = Judge::default();
    for line in lines {
        judge.read(BoundedLine::of(line.as_ref()));
    }
    judge.verdict()
}

/// Judge a log as it streams in, in bounded memory; an error is the input's (a failed read).
pub fn judge_input(input: impl BufRead) -> std::io::Result<RcclLogReport> {
    let mut judge = Judge::default();
    for_each_line(input, |line| judge.read(line))?;
    Ok(judge.verdict())
}

/// The most processes followed one by one; a log with more (it is not one job's) counts the
/// rest together under `…`.
pub const MAX_PROCESSES: usize = 256;
/// The most lines of one kind kept as evidence (each rank logs the same ones).
const EVIDENCE_PER_KIND: usize = 4;

/// Why a line was kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Why IB cannot carry the data, or a network that did not start.
    Reason,
    IbDevice,
    SocketDevice,
    Chose(Net),
    Channel(Net),
    Warning,
}

/// A network as the verdict sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Net {
    Ib,
    Socket,
    /// An external plugin's: neither proven RDMA nor TCP.
    Other,
}

impl Net {
    fn of(name: &str) -> Net {
        match name {
            "Socket" => Net::Socket,
            // RCCL's and NCCL's internal verbs plugin is `IB`; its variants start so (`IB-CAST`).
            ib if ib.starts_with("IB") => Net::Ib,
            _ => Net::Other,
        }
    }
}

#[derive(Debug)]
struct Kept {
    kind: Kind,
    /// `HOST` and message: the same line from another rank of the same host adds nothing.
    host: String,
    message: String,
    line: String,
}

#[derive(Debug, Default)]
struct ProcessState {
    seen: RcclProcess,
    /// The line number of its last `Init COMPLETE` and of its last warning (0: none).
    last_formed: u64,
    last_warning: u64,
    /// Its first warning's message.
    first_warning: Option<String>,
}

#[derive(Debug, Default)]
struct Judge {
    lines: u64,
    nccl_lines: u64,
    cut_lines: u64,
    binary_lines: u64,
    processes: Vec<ProcessState>,
    kept: Vec<Kept>,
    /// The last NCCL lines: the evidence when nothing else decides.
    last: std::collections::VecDeque<String>,
    ib_unusable: Vec<IbUnusable>,
    ib_tried: bool,
    /// Networks that did not start (`Failed to initialize NET plugin X`).
    failed_plugins: Vec<String>,
    no_network: bool,
}

impl Judge {
    fn read(&mut self, line: BoundedLine) {
        self.lines += 1;
        self.cut_lines += u64::from(line.cut);
        self.binary_lines += u64::from(line.binary);
        let text = line.text.trim();
        let Some(nccl) = NcclLine::parse(text) else { return };
        self.nccl_lines += 1;
        if self.last.len() == 3 {
            self.last.pop_front();
        }
        self.last.push_back(text.to_string());
        let at = self.lines;
        let said = nccl.said();
        let process = self.process(nccl.process);
        match said {
            Said::Network(name) | Said::Channel(name)
                if !process.seen.networks.iter().any(|known| known == name) && process.seen.networks.len() < 4 =>
            {
                process.seen.networks.push(name.to_string());
            }
            Said::Formed => {
                process.seen.formed += 1;
                process.last_formed = at;
            }
            _ => {}
        }
        if nccl.level == Level::Warn {
            process.seen.warnings += 1;
            process.last_warning = at;
            process.first_warning.get_or_insert_with(|| nccl.message.to_string());
        }
        let kind = match said {
            Said::Network(name) => Some(Kind::Chose(Net::of(name))),
            Said::Channel(name) => Some(Kind::Channel(Net::of(name))),
            Said::PluginFailed(name) => {
                self.ib_tried |= Net::of(name) == Net::Ib;
                if !self.failed_plugins.iter().any(|known| known == name) && self.failed_plugins.len() < 4 {
                    self.failed_plugins.push(name.to_string());
                }
                Some(Kind::Reason)
            }
            Said::NoNetwork => {
                self.no_network = true;
                Some(Kind::Warning)
            }
            Said::IbUnusable(why) => {
                self.ib_tried = true;
                if !self.ib_unusable.contains(&why) {
                    self.ib_unusable.push(why);
                }
                Some(Kind::Reason)
            }
            Said::IbDevice => {
                self.ib_tried = true;
                Some(Kind::IbDevice)
            }
            Said::IbMentioned => {
                self.ib_tried = true;
                None
            }
            Said::SocketDevice => Some(Kind::SocketDevice),
            Said::Warning => Some(Kind::Warning),
            Said::Formed | Said::Other => None,
        };
        if let Some(kind) = kind {
            self.keep(kind, &nccl, text);
        }
    }

    /// The state of the process `id`, new ones added up to [`MAX_PROCESSES`], then all as `…`.
    fn process(&mut self, id: &str) -> &mut ProcessState {
        let id = if self.processes.len() >= MAX_PROCESSES && !self.processes.iter().any(|p| p.seen.process == id) {
            "…"
        } else {
            id
        };
        let index = match self.processes.iter().position(|p| p.seen.process == id) {
            Some(index) => index,
            None => {
                let seen = RcclProcess { process: id.to_string(), ..RcclProcess::default() };
                self.processes.push(ProcessState { seen, ..ProcessState::default() });
                self.processes.len() - 1
            }
        };
        &mut self.processes[index]
    }

    fn keep(&mut self, kind: Kind, nccl: &NcclLine<'_>, text: &str) {
        let host = nccl.process.split(':').next().unwrap_or_default();
        // One channel of each host shows where the data went; its others add nothing.
        let same =
            |kept: &&Kept| kept.host == host && (kept.message == nccl.message || matches!(kind, Kind::Channel(_)));
        let of_kind = self.kept.iter().filter(|kept| kept.kind == kind);
        if of_kind.clone().count() >= EVIDENCE_PER_KIND || of_kind.clone().any(|kept| same(&kept)) {
            return;
        }
        self.kept.push(Kept {
            kind,
            host: host.to_string(),
            message: nccl.message.to_string(),
            line: text.to_string(),
        });
    }

    /// The lines kept of these kinds, in the log's order.
    fn evidence(&self, kinds: &[Kind]) -> Vec<String> {
        self.kept.iter().filter(|kept| kinds.contains(&kept.kind)).map(|kept| kept.line.clone()).collect()
    }

    fn took(&self, net: Net) -> bool {
        self.processes.iter().any(|p| p.seen.networks.iter().any(|name| Net::of(name) == net))
    }

    /// Why IB did not carry the data, as the log says it (empty when it says nothing).
    fn ib_reasons(&self) -> String {
        let mut reasons: Vec<&str> = self.ib_unusable.iter().map(|why| why.describe()).collect();
        if reasons.is_empty() && self.failed_plugins.iter().any(|name| Net::of(name) == Net::Ib) {
            reasons.push("the IB network did not start");
        }
        reasons.join("; ")
    }

    fn verdict(self) -> RcclLogReport {
        let ib_off = self.ib_unusable.contains(&IbUnusable::Disabled) || (self.took(Net::Socket) && !self.ib_tried);
        let asked_for_ib = !ib_off;
        let never_formed = self.processes.iter().find(|p| p.seen.warnings > 0 && p.seen.formed == 0);
        let failed_later = self.processes.iter().find(|p| p.last_warning > p.last_formed);
        let (verdict, why, fix, evidence) = if let Some(process) = never_formed {
            let why = if self.no_network {
                let tried = if self.failed_plugins.is_empty() { "none".into() } else { self.failed_plugins.join(", ") };
                let reasons = self.ib_reasons();
                let reasons = if reasons.is_empty() { String::new() } else { format!("; {reasons}") };
                format!(
                    "no network could start, so the communicator never formed (`Failed to initialize any NET \
                     plugin`): tried {tried}{reasons}"
                )
            } else {
                format!(
                    "RCCL failed before its communicator formed: {}",
                    process.first_warning.as_deref().unwrap_or_default()
                )
            };
            let fix = if self.no_network { NO_NETWORK_FIX } else { FAILED_FIX };
            (RcclVerdict::Failed, why, Some(fix), self.evidence(&[Kind::Reason, Kind::Warning]))
        } else if self.took(Net::Socket) {
            let reasons = self.ib_reasons();
            let evidence = self.evidence(&[
                Kind::Reason,
                Kind::SocketDevice,
                Kind::Chose(Net::Socket),
                Kind::Channel(Net::Socket),
            ]);
            if asked_for_ib {
                let why = if reasons.is_empty() { "IB did not start".to_string() } else { reasons };
                (
                    RcclVerdict::Tcp,
                    format!("RCCL fell back to TCP sockets (NET/Socket): {why}"),
                    Some(TCP_FIX),
                    evidence,
                )
            } else {
                let why = if reasons.is_empty() {
                    "no line says IB was tried (NCCL_NET left it out)".to_string()
                } else {
                    reasons
                };
                (
                    RcclVerdict::Tcp,
                    format!("RCCL uses TCP sockets (NET/Socket), as the log asked: {why}"),
                    None,
                    evidence,
                )
            }
        } else if let Some(process) = failed_later {
            let why = format!(
                "RCCL failed after its communicator formed: {}",
                process.first_warning.as_deref().unwrap_or_default()
            );
            let evidence = self.evidence(&[Kind::Chose(Net::Ib), Kind::Chose(Net::Other), Kind::Warning]);
            (RcclVerdict::Failed, why, Some(FAILED_FIX), evidence)
        } else if self.took(Net::Ib) {
            let device = self.kept.iter().find(|kept| kept.kind == Kind::IbDevice).map(|kept| kept.message.as_str());
            let roce = if device.is_some_and(|device| device.contains("/RoCE")) { " over RoCE" } else { "" };
            let why = format!("RCCL carries the data with RDMA{roce} (NET/IB)");
            (
                RcclVerdict::Rdma,
                why,
                None,
                self.evidence(&[Kind::IbDevice, Kind::Chose(Net::Ib), Kind::Channel(Net::Ib)]),
            )
        } else {
            let why = if self.nccl_lines == 0 && self.binary_lines > 0 {
                "no NCCL line: this looks binary, not a log".to_string()
            } else if self.nccl_lines == 0 {
                format!("no NCCL line in {} line(s): RCCL logs only with NCCL_DEBUG=INFO", self.lines)
            } else if self.took(Net::Other) {
                "RCCL uses an external network plugin: its name does not say RDMA or TCP".to_string()
            } else if !self.ib_reasons().is_empty() {
                format!("{}, but the log ends before RCCL chose a network", self.ib_reasons())
            } else {
                "RCCL's lines do not say which network it took (they must include NCCL_DEBUG_SUBSYS INIT or NET)".into()
            };
            let mut evidence = self.evidence(&[Kind::Reason, Kind::Chose(Net::Other), Kind::Warning]);
            if evidence.is_empty() {
                evidence = self.last.iter().cloned().collect();
            }
            (RcclVerdict::Unknown, why, Some(UNKNOWN_FIX), evidence)
        };
        let ok = verdict == RcclVerdict::Rdma || (verdict == RcclVerdict::Tcp && !asked_for_ib);
        RcclLogReport {
            verdict,
            why,
            fix: fix.map(str::to_string),
            asked_for_ib,
            ok,
            processes: self.processes.into_iter().map(|process| process.seen).collect(),
            lines_read: self.lines,
            nccl_lines: self.nccl_lines,
            cut_lines: self.cut_lines,
            evidence,
        }
    }
}

const TCP_FIX: &str = "check the RDMA devices, memlock and NCCL_IB_HCA/NCCL_IB_GID_INDEX inside the toolbox \
                       (`strix-toolbox verify`; between nodes `strix-toolbox cluster verify`)";
const NO_NETWORK_FIX: &str = "on RoCE, the toolbox must see its RDMA device (`strix-toolbox verify`) and NCCL_IB_HCA \
                              name it; a forced NCCL_NET=IB has no TCP to fall back on; on TCP, NCCL_SOCKET_IFNAME \
                              must name an interface that is up inside the toolbox";
const FAILED_FIX: &str = "the warnings say what failed; `strix-toolbox verify` checks the toolbox's devices and \
                          memlock (a failed ibv_reg_mr is memlock)";
const UNKNOWN_FIX: &str = "run the ranks with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET,ENV (what strix-toolbox \
                           sets), until they formed their communicator";

#[cfg(test)]
mod tests;
