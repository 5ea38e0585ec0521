//! `cluster refresh --canary MODEL`: the refresh proven by serving MODEL from it
//! ([`crate::cluster::canary`]); exit 1 when the new image was refused.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::bench::store::BenchStore;
use crate::cli::ClusterRefreshArgs;
use crate::cluster::canary::{canary_refresh, CanaryOutcome, CanaryReport, CanaryRequest, DEFAULT_MIN_RATIO};
use crate::cluster::launch::{LaunchRequest, ModelSource};
use crate::cluster::nodes::CanaryEntry;
use crate::cluster::spread::SpreadSettings;
use crate::error::Result;
use crate::model::hub_env::forwarded_hub_env;
use crate::node::Node;
use crate::ops::refresh::RefreshRequest;
use crate::output::{Output, Render, Style};
use crate::paths::Paths;
use crate::serving::engine::ServingEngine;

/// The canary of `entry` (`--canary`, else the cluster file's) over `nodes`; the exit code.
pub async fn run(
    args: &ClusterRefreshArgs,
    entry: &CanaryEntry,
    nodes: &[&dyn Node],
    request: &RefreshRequest,
    spread: &SpreadSettings,
    paths: &Paths,
    out: &Output,
) -> Result<i32> {
    let model = entry.model.clone();
    let engine = ModelSource::implied_engine(&model).unwrap_or(ServingEngine::Vllm);
    let launch = LaunchRequest {
        engine,
        toolbox: request.name.clone(),
        source: ModelSource::of(&model),
        model,
        tp: None,
        host: None,
        port: args.canary_port,
        timeout: Duration::from_secs(args.canary_timeout),
        replace: true,
        dry_run: false,
        extra: Vec::new(),
        env: BTreeMap::new(),
        hf_token: super::launch::hf_token(None)?,
        api_key: super::launch::secret_from("the API key", None, "STRIX_API_KEY")?,
        hub_env: forwarded_hub_env(std::env::vars()),
    };
    let canary = CanaryRequest { launch, min_ratio: args.min_ratio.or(entry.min_ratio).unwrap_or(DEFAULT_MIN_RATIO) };
    let store = BenchStore::open(paths)?;
    let reporter = out.reporter();
    let report = canary_refresh(nodes, request, spread, &canary, &store, reporter.as_ref()).await?;
    reporter.finish();
    out.report(&report);
    Ok(i32::from(matches!(report.outcome, CanaryOutcome::RolledBack | CanaryOutcome::Refused)))
}

impl Render for CanaryReport {
    fn render(&self, out: &Output) {
        let previous = self.previous.as_deref().unwrap_or("none");
        match self.outcome {
            CanaryOutcome::Unchanged => out.line(&format!(
                "{} every node already runs {}; nothing to prove",
                out.paint("✓", Style::Ok),
                self.image
            )),
            CanaryOutcome::Kept => {
                let speed = match (self.ratio, &self.baseline) {
                    (Some(ratio), Some(baseline)) => {
                        format!("{ratio:.2} of the output tokens/s on {} (result {})", baseline.image, baseline.id)
                    }
                    _ => "no result on the previous image: this one is the first".to_string(),
                };
                out.line(&format!(
                    "{} every node keeps {}: {} answers as the reference; {speed}",
                    out.paint("✓", Style::Ok),
                    self.image,
                    self.model
                ));
            }
            CanaryOutcome::RolledBack | CanaryOutcome::Refused => {
                out.line(&format!(
                    "{} the canary refused {}: {}",
                    out.paint("✗", Style::Fail),
                    self.image,
                    self.reason.as_deref().unwrap_or("-")
                ));
                match (&self.rollback, &self.relaunched) {
                    (Some(_), Some(model)) => {
                        out.line(&format!("every node is back on {previous}, serving {model} again"))
                    }
                    (Some(_), None) => out.line(&format!("every node is back on {previous}")),
                    (None, _) => out.line("there was no previous image to go back to: the nodes keep the new one"),
                }
            }
        }
        if let Some(result) = &self.result {
            out.line(&format!(
                "  bench result {} kept ({})",
                result.id,
                if result.accepted() { "accepted" } else { "rejected" }
            ));
        }
    }
}
