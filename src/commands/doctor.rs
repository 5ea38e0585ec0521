//! `doctor`: check the node; exit 1 when a check fails.

use crate::error::Result;
use crate::ops::doctor::{doctor, DoctorReport};
use crate::output::{Style, Ui};
use crate::settings::Settings;

pub fn run(settings: &Settings) -> Result<i32> {
    let report = doctor(settings)?;
    if settings.ui.json {
        settings.ui.print_json(&report);
    } else {
        print_report(&report, &settings.ui);
    }
    Ok(report.exit_code())
}

fn print_report(report: &DoctorReport, ui: &Ui) {
    for check in &report.checks {
        let label = ui.status_label(check.status);
        println!("{label}  {:<22} {}", check.name, check.message);
        if let Some(fix) = &check.fix {
            println!("      {:<22} {} {fix}", "", ui.paint("fix:", Style::Dim));
        }
    }
    let noun = if report.warn == 1 { "warning" } else { "warnings" };
    println!("\n{} passed, {} {noun}, {} failed, {} info", report.pass, report.warn, report.fail, report.info);
}
