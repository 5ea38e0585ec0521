//! `verify [NAME]`: checks inside the toolbox; exit 1 when one fails.

use crate::error::Result;
use crate::ops::verify::verify;
use crate::output::{Output, Render, Style};
use crate::serving::engine::EngineRef;
use crate::settings::Settings;
use crate::verify::VerifyReport;
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// Toolbox name (default: vllm).
    #[arg(env = "TOOLBOX_NAME")]
    pub name: Option<String>,
}

pub async fn run(args: &VerifyArgs, settings: &Settings, out: &Output) -> Result<i32> {
    let report =
        verify(settings, args.name.as_deref().unwrap_or(EngineRef::default().profile().toolbox.default_toolbox))
            .await?;
    out.report(&report);
    Ok(report.exit_code())
}

impl Render for VerifyReport {
    fn render(&self, out: &Output) {
        out.checks(&self.checks);
        out.line(&format!("\n{} {}", self.container, verdict(out, self)));
    }
}

/// `verified` (with what it did not prove: devices not opened), or `NOT verified` in the failure
/// colour.
pub fn verdict(out: &Output, report: &VerifyReport) -> String {
    match (report.ok, report.unproven()) {
        (true, None) => out.paint("verified", Style::Ok),
        (true, Some(unproven)) => format!("{}, {}", out.paint("verified", Style::Warn), unproven),
        (false, _) => out.paint("NOT verified", Style::Fail),
    }
}
