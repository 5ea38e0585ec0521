//! `verify [NAME]`: checks inside the toolbox; exit 1 when one fails.

use crate::cli::VerifyArgs;
use crate::error::Result;
use crate::ops::verify::verify;
use crate::ops::DEFAULT_TOOLBOX;
use crate::output::{Output, Render, Style};
use crate::settings::Settings;
use crate::verify::VerifyReport;

pub async fn run(args: &VerifyArgs, settings: &Settings, out: &Output) -> Result<i32> {
    let report = verify(settings, args.name.as_deref().unwrap_or(DEFAULT_TOOLBOX)).await?;
    out.report(&report);
    Ok(report.exit_code())
}

impl Render for VerifyReport {
    fn render(&self, out: &Output) {
        out.checks(&self.checks);
        out.line(&format!("\n{} {}", self.container, verdict(out, self.ok)));
    }
}

/// `verified`, or `NOT verified` in the failure colour.
pub fn verdict(out: &Output, ok: bool) -> String {
    if ok {
        out.paint("verified", Style::Ok)
    } else {
        out.paint("NOT verified", Style::Fail)
    }
}
