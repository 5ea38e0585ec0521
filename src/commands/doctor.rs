//! `doctor`: check the node; exit 1 when a check fails.

use crate::error::Result;
use crate::ops::doctor::{doctor, DoctorReport};
use crate::output::{Output, Render};
use crate::settings::Settings;

pub fn run(settings: &Settings, out: &Output) -> Result<i32> {
    let report = doctor(settings)?;
    out.report(&report);
    Ok(report.exit_code())
}

impl Render for DoctorReport {
    fn render(&self, out: &Output) {
        out.checks(&self.checks);
        let noun = if self.warn == 1 { "warning" } else { "warnings" };
        out.line(&format!("\n{} passed, {} {noun}, {} failed, {} info", self.pass, self.warn, self.fail, self.info));
    }
}
