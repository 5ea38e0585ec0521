//! `cluster disconnect`: close the ssh connections earlier cluster commands left up for reuse.

use crate::cluster::disconnect::{cluster_disconnect, DisconnectReport};
use crate::cluster::ClusterSettings;
use crate::error::Result;
use crate::output::{Output, Render};

pub(super) async fn run(cluster: &ClusterSettings, out: &Output) -> Result<i32> {
    let report = cluster_disconnect(cluster).await?;
    out.report(&report);
    Ok(0)
}

impl Render for DisconnectReport {
    fn render(&self, out: &Output) {
        for node in &self.nodes {
            let state = if node.closed { "closed its ssh connection" } else { "no ssh connection was up" };
            out.line(&format!("{}: {state}", node.node));
        }
        out.status(&format!("closed {} ssh connection(s) to {} node(s)", self.closed(), self.nodes.len()));
    }
}
