//! `doctor`: every check of the node, each with its fix.

use serde::{Deserialize, Serialize};

use crate::doctor::{run_checks, Check, FitMemory, Programs, Status};
use crate::error::Result;
use crate::host::HostFacts;
use crate::ops::home::NodeHome;
use crate::serving::engine::link_ports;
use crate::serving::fit::memory::{NodeMemory, DEFAULT_RESERVE_GIB};
use crate::settings::Settings;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoctorReport {
    /// No check failed.
    pub ok: bool,
    pub pass: usize,
    /// Information: never a failure.
    #[serde(default)]
    pub info: usize,
    pub warn: usize,
    pub fail: usize,
    pub checks: Vec<Check>,
    /// What the node says of its home (`cluster doctor` compares them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<NodeHome>,
}

impl DoctorReport {
    pub fn new(checks: Vec<Check>) -> DoctorReport {
        let count = |status| checks.iter().filter(|c| c.status == status).count();
        let (pass, info, warn, fail) =
            (count(Status::Pass), count(Status::Info), count(Status::Warn), count(Status::Fail));
        DoctorReport { ok: fail == 0, pass, info, warn, fail, checks, home: None }
    }

    /// 1 when any check failed.
    pub fn exit_code(&self) -> i32 {
        i32::from(!self.ok)
    }
}

pub fn doctor(settings: &Settings) -> Result<DoctorReport> {
    let root = settings.open_host_root()?;
    let facts = HostFacts::read(&root)?;
    let programs = if root.is_system() { Programs::TheNodes } else { Programs::ThisMachines };
    // The plan's own figures for this node, as a launch would count them.
    let plan_memory = NodeMemory::of("this node", &facts.gpu, DEFAULT_RESERVE_GIB, 0).ok().map(|memory| FitMemory {
        gtt_used_bytes: memory.gtt_used_bytes,
        reserve_bytes: memory.reserve_bytes,
        usable_bytes: memory.usable_bytes,
    });
    let report = DoctorReport::new(run_checks(&facts, &settings.installed, programs, &link_ports(), plan_memory));
    Ok(DoctorReport { home: Some(NodeHome::here(settings)), ..report })
}
