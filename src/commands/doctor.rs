//! `doctor`: check the node; exit 1 when a check fails.

use serde::Serialize;

use crate::cli::GlobalOptions;
use crate::doctor::{exit_code, run_checks, Check, Status};
use crate::engine_probe::Installed;
use crate::error::Result;
use crate::host::{HostFacts, HostRoot};
use crate::ui::{Style, Ui};

#[derive(Serialize)]
struct DoctorReport<'a> {
    ok: bool,
    pass: usize,
    warn: usize,
    fail: usize,
    checks: &'a [Check],
}

pub fn run(global: &GlobalOptions, ui: &Ui) -> Result<i32> {
    let root = HostRoot::open(&global.host_root)?;
    let facts = HostFacts::read(&root)?;
    let checks = run_checks(&root, &facts, &Installed::find());
    let count = |status| checks.iter().filter(|c| c.status == status).count();
    let code = exit_code(&checks);
    if global.json {
        ui.print_json(&DoctorReport {
            ok: code == 0,
            pass: count(Status::Pass),
            warn: count(Status::Warn),
            fail: count(Status::Fail),
            checks: &checks,
        });
        return Ok(code);
    }
    for check in &checks {
        let label = match check.status {
            Status::Pass => ui.paint("pass", Style::Ok),
            Status::Warn => ui.paint("warn", Style::Warn),
            Status::Fail => ui.paint("FAIL", Style::Fail),
        };
        println!("{label}  {:<22} {}", check.name, check.message);
        if let Some(fix) = &check.fix {
            println!("      {:<22} {} {fix}", "", ui.paint("fix:", Style::Dim));
        }
    }
    let warnings = count(Status::Warn);
    let noun = if warnings == 1 { "warning" } else { "warnings" };
    println!("\n{} passed, {warnings} {noun}, {} failed", count(Status::Pass), count(Status::Fail));
    Ok(code)
}
