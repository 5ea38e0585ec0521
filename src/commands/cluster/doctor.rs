//! `cluster doctor`: `doctor` on every node, and what only a cluster can check, as one table.

use crate::check::{Check, Status};
use crate::cluster::checks::ClusterDoctorReport;
use crate::cluster::doctor::cluster_doctor;
use crate::cluster::ClusterSettings;
use crate::commands::cluster::ToolboxArgs;
use crate::error::Result;
use crate::output::{Output, Render};

pub(super) async fn run(cluster: &ClusterSettings, toolbox: &ToolboxArgs, out: &Output) -> Result<i32> {
    let report = cluster_doctor(cluster, &toolbox.toolbox()).await?;
    out.report(&report);
    Ok(report.exit_code())
}

impl Render for ClusterDoctorReport {
    fn render(&self, out: &Output) {
        let rows: Vec<_> = self
            .checks
            .iter()
            .map(|c| (c.name.clone(), c.cells.iter().map(|cell| (cell.status, cell.text.clone())).collect()))
            .collect();
        out.node_table(&self.nodes, &rows);
        // Each node's problem as a check of its own: `node1: mtu`.
        let problems: Vec<Check> = self
            .checks
            .iter()
            .flat_map(|c| {
                c.problems.iter().map(move |p| {
                    Check::new(format!("{}: {}", p.node, c.name), p.status, p.message.clone(), p.fix.clone())
                })
            })
            .collect();
        if !problems.is_empty() {
            out.line("");
        }
        out.checks(&problems);
        let failed = problems.iter().filter(|p| p.status == Status::Fail).count();
        let warned = problems.iter().filter(|p| p.status == Status::Warn).count();
        out.line(&format!("\n{} node(s): {failed} failed, {warned} warning(s)", self.nodes.len()));
    }
}
