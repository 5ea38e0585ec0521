//! `verify [NAME]`: checks inside the toolbox; exit 1 when one fails.

use crate::cli::VerifyArgs;
use crate::error::Result;
use crate::ops::verify::verify;
use crate::ops::DEFAULT_TOOLBOX;
use crate::output::Style;
use crate::settings::Settings;

pub async fn run(args: &VerifyArgs, settings: &Settings) -> Result<i32> {
    let report = verify(settings, args.name.as_deref().unwrap_or(DEFAULT_TOOLBOX)).await?;
    let ui = &settings.ui;
    if ui.json {
        ui.print_json(&report);
        return Ok(report.exit_code());
    }
    for check in &report.checks {
        println!("{}  {:<24} {}", ui.status_label(check.status), check.name, check.message);
        if let Some(fix) = &check.fix {
            println!("      {:<24} {} {fix}", "", ui.paint("fix:", Style::Dim));
        }
    }
    let verdict = if report.ok { ui.paint("verified", Style::Ok) } else { ui.paint("NOT verified", Style::Fail) };
    println!("\n{} {verdict}", report.container);
    Ok(report.exit_code())
}
