//! `cluster install`: this strix-toolbox onto every node that lacks it or runs another version.

use crate::cluster::install::{cluster_install, InstallAction, InstallReport};
use crate::cluster::ClusterSettings;
use crate::error::Result;
use crate::output::{Output, Render, Style};

pub(super) async fn run(cluster: &ClusterSettings, out: &Output) -> Result<i32> {
    let report = cluster_install(cluster).await?;
    out.report(&report);
    Ok(report.exit_code())
}

impl Render for InstallReport {
    fn render(&self, out: &Output) {
        for node in &self.nodes {
            out.line(&match node.action {
                InstallAction::Installed => format!(
                    "{} {}: installed {} at {} (was {})",
                    out.paint("✓", Style::Ok),
                    node.node,
                    self.version,
                    node.path.as_deref().unwrap_or("?"),
                    node.previous_version.as_deref().unwrap_or("none")
                ),
                InstallAction::UpToDate => {
                    format!("{} {}: already {}", out.paint("✓", Style::Ok), node.node, self.version)
                }
                InstallAction::Failed => format!(
                    "{} {}: {}",
                    out.paint("✗", Style::Fail),
                    node.node,
                    node.error.as_deref().unwrap_or("failed")
                ),
            });
        }
    }
}
