//! `cluster status`: per node its toolbox, pin, image and RCCL; every service and whether it
//! answers, at its engine and through the router; the router.

use crate::check::Status;
use crate::serving::engine::EngineRef;
use clap::Args;

use crate::cluster::status::{cluster_status, ClusterStatusReport, NodeStatus};
use crate::cluster::watch::dir::WatchDir;
use crate::cluster::ClusterSettings;
use crate::commands::measured::render_measured;
use crate::commands::secrets::api_key;
use crate::error::Result;
use crate::image::short_digest;
use crate::output::{Output, Render, Style};
use crate::reporter::Bytes;
use crate::serving::http::HttpAnswer;
use crate::serving::reach::Reached;
use crate::settings::Settings;

/// Whose toolbox `cluster status` shows per node.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// The toolbox [default: the services', else the default engine's].
    #[arg(long, env = "TOOLBOX_NAME")]
    pub name: Option<String>,

    /// The serving engine whose toolbox it is [default: the services'].
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub engine: Option<EngineRef>,
}

impl StatusArgs {
    /// The toolbox asked for, if one was.
    pub fn toolbox(&self) -> Option<String> {
        self.name.clone().or_else(|| self.engine.map(|engine| engine.profile().toolbox.default_toolbox.to_string()))
    }
}

pub(super) async fn run(
    cluster: &ClusterSettings,
    args: &StatusArgs,
    settings: &Settings,
    out: &Output,
) -> Result<i32> {
    // The watch's state is this machine's (none without a state directory).
    let watch = cluster.nodes.first().and_then(|head| WatchDir::of(&settings.paths, head).ok());
    let report = cluster_status(cluster, args.toolbox().as_deref(), api_key(None)?, watch.as_ref()).await?;
    out.report(&report);
    Ok(i32::from(!report.disagreements.is_empty()))
}

impl Render for ClusterStatusReport {
    fn render(&self, out: &Output) {
        let nodes: Vec<String> = self.nodes.iter().map(|n| n.node.clone()).collect();
        let cell = |f: &dyn Fn(&NodeStatus) -> String| -> Vec<(Option<Status>, String)> {
            self.nodes.iter().map(|n| (None, f(n))).collect()
        };
        let toolbox = |n: &NodeStatus| n.toolbox(&self.toolbox).cloned();
        let rows = vec![
            ("reachable".to_string(), cell(&|n| if n.reachable { "yes".into() } else { "no".into() })),
            ("version".to_string(), cell(&|n| n.version.clone().unwrap_or("-".into()))),
            (self.toolbox.clone(), cell(&|n| if toolbox(n).is_some() { "present".into() } else { "missing".into() })),
            (
                "running".to_string(),
                cell(&|n| toolbox(n).map_or("-".into(), |t| if t.running { "yes" } else { "no" }.into())),
            ),
            ("pin".to_string(), cell(&|n| toolbox(n).and_then(|t| t.pin).unwrap_or("-".into()))),
            (
                "image".to_string(),
                cell(&|n| toolbox(n).map_or("-".into(), |t| short_digest(t.image_identity()).to_string())),
            ),
            (
                "rccl".to_string(),
                cell(&|n| toolbox(n).and_then(|t| t.rccl_sha256).map_or("-".into(), |s| short_digest(&s).to_string())),
            ),
        ];
        out.node_table(&nodes, &rows);
        for service in &self.services {
            let health = match &service.health {
                _ if service.serves => out.paint("serving", Style::Ok),
                HttpAnswer::Status(code, _) => out.paint(&format!("/health answers {code}"), Style::Fail),
                HttpAnswer::Refused => out.paint("not listening (still loading, or stopped)", Style::Warn),
                HttpAnswer::TimedOut => out.paint("/health does not answer", Style::Fail),
                HttpAnswer::Failed(failure) => out.paint(&failure.to_string(), Style::Fail),
                HttpAnswer::NotHttp(head) => out.paint(&format!("not an HTTP answer: {head:?}"), Style::Fail),
                HttpAnswer::Unasked(why) => out.paint(why, Style::Fail),
            };
            let ray = service
                .ray_nodes_alive
                .map_or(String::new(), |alive| format!(", Ray {alive} of {} node(s) alive", service.nodes.len()));
            let routed = match service.routed.as_deref() {
                Some("ok") => out.paint("routed", Style::Ok),
                Some(why) => out.paint(&format!("the router: {why}"), Style::Fail),
                None => out.paint("not routed", Style::Warn),
            };
            out.line(&format!(
                "{} {} ({} {}, {}) on {} since {}: {health}{ray}, {routed}",
                out.paint(&service.name, Style::Bold),
                service.model,
                service.engine,
                service.layout,
                service.upstream,
                service.nodes.join(", "),
                service.since
            ));
            for worker in &service.workers {
                let answer = match worker.reached {
                    Reached::Answers => out.paint("answers", Style::Ok),
                    ref other => out.paint(other.why().0, Style::Fail),
                };
                out.line(&format!("  {} {} at {}: {answer}", worker.node, worker.process, worker.address));
            }
            if !service.measured.is_empty() {
                out.line(&format!("  planned beside what {} said it allocated:", service.engine));
                render_measured(service.engine.name(), &service.measured, out);
            }
            for warning in &service.warnings {
                out.warn(warning);
            }
        }
        match self.router.as_ref().and_then(|router| Some((router, router.process.as_ref()?))) {
            Some((router, process)) => {
                let routes: Vec<&str> = router.routes.iter().map(|r| r.name.as_str()).collect();
                let key = if router.api_key { ", wants the API key" } else { "" };
                out.line(&format!(
                    "router on {} (pid {}, since {}{key}): {}",
                    process.listen,
                    process.pid,
                    process.started,
                    routes.join(", ")
                ));
            }
            None if self.services.is_empty() => out.line("nothing serves"),
            None => out.line("no router runs"),
        }
        for service in self.router.iter().flat_map(|router| &router.on_demand) {
            let state = match service.state.as_str() {
                "serving" => out.paint("serving", Style::Ok),
                other => out.paint(other, Style::Warn),
            };
            let idle = service.idle_seconds.map_or(String::new(), |idle| {
                format!(", stops after {} idle", crate::watch::format_duration(std::time::Duration::from_secs(idle)))
            });
            out.line(&format!(
                "on demand: {} ({} {}) on {}: {state}{idle}",
                out.paint(&service.name, Style::Bold),
                service.model,
                service.engine,
                service.nodes.join(", ")
            ));
        }
        if let Some(registry) = &self.registry {
            let running = match registry.status.running {
                Some(true) => "running",
                Some(false) => "stopped",
                None => "its engine did not answer",
            };
            out.line(&format!(
                "head registry on {}: {} on disk, {} image(s), {running}",
                registry.node,
                Bytes(registry.status.disk_bytes),
                registry.status.images.len()
            ));
        }
        for watched in &self.watch {
            let style = match watched.state {
                crate::watch::State::Serving => Style::Ok,
                crate::watch::State::GivenUp | crate::watch::State::Stalled | crate::watch::State::Failing => {
                    Style::Fail
                }
                _ => Style::Warn,
            };
            let reason = watched.reason.as_deref().map_or(String::new(), |reason| format!(": {reason}"));
            let state = out.paint(watched.state.name(), style);
            if watched.watching {
                out.line(&format!(
                    "watch: {} {state} ({} restart(s), as of {}){reason}",
                    watched.service, watched.restarts, watched.updated
                ));
            } else {
                out.line(&format!(
                    "watch: {} was {state} when its watch (pid {}) last looked, at {}; that watch no longer runs \
                     ({} restart(s)){reason}",
                    watched.service, watched.watch_pid, watched.updated, watched.restarts
                ));
            }
        }
        for node in self.nodes.iter().filter(|n| n.error.is_some()) {
            out.line(&format!(
                "{} {}: {}",
                out.paint("error", Style::Fail),
                node.node,
                node.error.as_deref().unwrap_or_default()
            ));
        }
        for disagreement in &self.disagreements {
            out.warn(disagreement);
        }
        if self.disagreements.is_empty() {
            out.line(&out.paint("every node agrees", Style::Ok));
        }
    }
}
