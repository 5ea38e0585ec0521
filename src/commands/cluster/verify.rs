//! `cluster verify`: `verify` on every node, then proof between every pair that RCCL runs over RDMA.

use crate::check::{Check, Status};
use crate::cluster::verify::{cluster_verify, ClusterVerifyReport, LinkProof};
use crate::cluster::ClusterSettings;
use crate::commands::cluster::ToolboxArgs;
use crate::commands::verify::verdict;
use crate::error::Result;
use crate::output::{Output, Render, Style};

pub(super) async fn run(cluster: &ClusterSettings, toolbox: &ToolboxArgs, out: &Output) -> Result<i32> {
    let report = cluster_verify(cluster, &toolbox.toolbox()).await?;
    out.report(&report);
    Ok(report.exit_code())
}

impl Render for ClusterVerifyReport {
    fn render(&self, out: &Output) {
        for node in &self.nodes {
            match (&node.report, &node.error) {
                (Some(verified), _) => {
                    out.line(&format!("{} {}", out.paint(&node.node, Style::Bold), verdict(out, verified)));
                    out.checks(verified.checks.iter().filter(|c| c.status != Status::Pass));
                }
                (None, error) => out.line(&format!(
                    "{} {}: {}",
                    out.paint(&node.node, Style::Bold),
                    out.paint("not verified", Style::Fail),
                    error.as_deref().unwrap_or("unknown")
                )),
            }
        }
        let show = |what: &str, proof: &LinkProof| {
            out.checks(&[Check::new(what, proof.status, proof.message.clone(), None)]);
            for line in &proof.evidence {
                out.line(&format!("      {}", out.paint(line, Style::Dim)));
            }
        };
        for pair in &self.pairs {
            out.line(&format!("{} ↔ {}", out.paint(&pair.from, Style::Bold), out.paint(&pair.to, Style::Bold)));
            show("perftest", &pair.perftest);
            show("rccl", &pair.rccl);
        }
        let proven = self.pairs.iter().all(|p| p.rccl.status == Status::Pass);
        let verdict = match (self.ok, proven && !self.pairs.is_empty()) {
            (false, _) => out.paint("the cluster is NOT verified", Style::Fail),
            (true, true) => out.paint("the cluster is verified: RCCL runs over RoCE", Style::Ok),
            (true, false) => out.paint("no failure, but RDMA is not proven (see skipped)", Style::Warn),
        };
        out.line(&format!("\n{verdict}"));
    }
}
