//! `doctor`: every check of the node, each with its fix.

use serde::{Deserialize, Serialize};

use crate::doctor::{run_checks, Check, Programs, Status};
use crate::error::Result;
use crate::host::HostFacts;
use crate::serving::engine::link_ports;
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
}

impl DoctorReport {
    pub fn new(checks: Vec<Check>) -> DoctorReport {
        let count = |status| checks.iter().filter(|c| c.status == status).count();
        let (pass, info, warn, fail) =
            (count(Status::Pass), count(Status::Info), count(Status::Warn), count(Status::Fail));
        DoctorReport { ok: fail == 0, pass, info, warn, fail, checks }
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
    Ok(DoctorReport::new(run_checks(&facts, &settings.installed, programs, &link_ports())))
}
