//! `cluster refresh --canary MODEL`: the refresh proven by serving MODEL from it
//! ([`crate::cluster::canary`]); exit 1 when the new image was refused, 130 (143) when Ctrl-C
//! (SIGTERM) refused it.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::bench::store::BenchStore;
use crate::cluster::bench::ties;
use crate::cluster::canary::{canary_refresh, CanaryOutcome, CanaryReport, CanaryRequest, DEFAULT_MIN_RATIO};
use crate::cluster::launch::LaunchRequest;
use crate::cluster::nodes::{CanaryEntry, ClusterFile};
use crate::cluster::spread::SpreadSettings;
use crate::commands::cluster::refresh::ClusterRefreshArgs;
use crate::error::{Error, Result};
use crate::model::hub_env::forwarded_hub_env;
use crate::node::Node;
use crate::ops::refresh::RefreshRequest;
use crate::output::{Output, Render, Style};
use crate::paths::Paths;
use crate::serving::engine::EngineRef;
use crate::serving::engine_args::EngineArgs;
use crate::serving::service_name::ServiceName;

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
    let engine = EngineRef::claiming(&model, None).unwrap_or(request.serving);
    let launch = LaunchRequest {
        engine,
        toolbox: request.name.clone(),
        service: ServiceName::parse(&engine.served_name(&model, &EngineArgs::default()))?,
        on: Vec::new(),
        source: engine.source(&model, None)?,
        model,
        backend: None,
        tp: None,
        pp: None,
        host: None,
        port: args.canary_port,
        timeout: Duration::from_secs(args.canary_timeout),
        replace: true,
        dry_run: false,
        extra: EngineArgs::default(),
        recipes: None,
        pinned: None,
        on_demand: None,
        env: BTreeMap::new(),
        hf_token: super::secrets::hf_token(None)?,
        api_key: super::secrets::api_key(None)?,
        hub_env: forwarded_hub_env(std::env::vars()),
        cuda_graphs: false,
        fresh_compile_cache: false,
        keep_free_gib: 0,
    };
    let canary = CanaryRequest { launch, min_ratio: entry.min_ratio.unwrap_or(DEFAULT_MIN_RATIO) };
    let store = BenchStore::open(paths)?;
    let reporter = out.reporter();
    let report = canary_refresh(nodes, request, spread, &canary, &store, reporter.as_ref()).await?;
    reporter.finish();
    out.report(&report);
    Ok(match report.interrupted {
        Some(signal) => signal.exit_code(),
        None => i32::from(matches!(report.outcome, CanaryOutcome::RolledBack | CanaryOutcome::Refused)),
    })
}

/// The canary: `--canary MODEL`, else the cluster file's `[canary]`; `--min-ratio` wins over the
/// file's.
pub(super) fn entry(args: &ClusterRefreshArgs, file: Option<ClusterFile>) -> Result<Option<CanaryEntry>> {
    let entry = match &args.canary {
        Some(model) => Some(CanaryEntry { model: model.clone(), min_ratio: None }),
        None => file.and_then(|file| file.canary),
    };
    match (entry, args.min_ratio) {
        (None, Some(_)) => Err(Error::Usage(
            "--min-ratio is the canary's: give --canary MODEL, or `[canary]` with `model = \"…\"` in the cluster file"
                .into(),
        )),
        (Some(entry), Some(ratio)) => Ok(Some(CanaryEntry { min_ratio: Some(ratio), ..entry })),
        (entry, None) => Ok(entry),
    }
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
                    (Some(ratio), Some(baseline)) => format!(
                        "{ratio:.2} of the output tokens/s on {} (result {}{})",
                        baseline.image,
                        baseline.id,
                        if baseline.before_swap { ", measured just before the swap" } else { "" }
                    ),
                    _ => "no result on the previous image: this one is the first".to_string(),
                };
                let answers = match &self.gate {
                    Some(gate) if gate.unchecked() => "its answers unchecked".to_string(),
                    Some(gate) => format!(
                        "{} answers as {}{}",
                        self.model,
                        gate.reference,
                        gate.verdict.as_ref().map_or(String::new(), |verdict| ties(verdict.ties.len()))
                    ),
                    None => "no gate".to_string(),
                };
                out.line(&format!("{} every node keeps {}: {answers}; {speed}", out.paint("✓", Style::Ok), self.image));
            }
            CanaryOutcome::RolledBack | CanaryOutcome::Refused => {
                out.line(&format!(
                    "{} the canary refused {}: {}",
                    out.paint("✗", Style::Fail),
                    self.image,
                    self.reason.as_deref().unwrap_or("-")
                ));
                match (&self.rollback, self.relaunched.as_slice()) {
                    (Some(_), []) => out.line(&format!("every node is back on {previous}")),
                    (Some(_), services) => {
                        out.line(&format!("every node is back on {previous}, serving {} again", services.join(", ")))
                    }
                    (None, _) => out.line("there was no previous image to go back to: the nodes keep the new one"),
                }
            }
        }
        if let Some(failed) = &self.before_swap_failed {
            out.warn(&format!("the previous image was not measured before the swap: {failed}"));
        }
        if let Some(unchecked) = &self.unchecked {
            out.warn(unchecked);
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};
    use crate::commands::cluster::ClusterCommand;

    fn refresh_args(args: &[&str]) -> ClusterRefreshArgs {
        let cli = Cli::try_parse_from(["strix-toolbox", "cluster", "refresh"].iter().chain(args)).unwrap();
        match cli.command {
            Command::Cluster(cluster) => match cluster.command {
                ClusterCommand::Refresh(refresh) => refresh,
                _ => unreachable!(),
            },
            _ => unreachable!(),
        }
    }

    fn file(text: &str) -> ClusterFile {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.toml");
        std::fs::write(&path, text).unwrap();
        ClusterFile::read(&path).unwrap()
    }

    #[test]
    fn the_canary_comes_from_the_command_line_else_the_cluster_file() {
        let with = file("nodes = [\"a\", \"b\"]\n[canary]\nmodel = \"/m/tiny.gguf\"\nmin_ratio = 0.8\n");
        let without = file("nodes = [\"a\"]\n");
        let from_file = CanaryEntry { model: "/m/tiny.gguf".into(), min_ratio: Some(0.8) };
        assert_eq!(entry(&refresh_args(&[]), Some(with.clone())).unwrap(), Some(from_file.clone()));
        assert_eq!(entry(&refresh_args(&[]), Some(without.clone())).unwrap(), None, "a plain refresh");
        let ratio = entry(&refresh_args(&["--min-ratio", "0.5"]), Some(with.clone())).unwrap();
        assert_eq!(ratio, Some(CanaryEntry { min_ratio: Some(0.5), ..from_file }), "--min-ratio wins");
        let given = entry(&refresh_args(&["--canary", "org/model"]), Some(with)).unwrap();
        assert_eq!(
            given,
            Some(CanaryEntry { model: "org/model".into(), min_ratio: None }),
            "the file's ratio is its model's"
        );
        let error = entry(&refresh_args(&["--min-ratio", "0.5"]), Some(without)).unwrap_err();
        assert!(error.to_string().contains("--min-ratio is the canary's"), "{error}");
    }
}
