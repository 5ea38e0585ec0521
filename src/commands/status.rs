//! `status`: this node's strix-toolbox version, engine and toolboxes; every service launched here
//! (whatever its toolbox) and what of it runs; the router, when this node runs one.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::image::short_digest;
use crate::node::router::{router_look, RouterLook, RouterState};
use crate::ops::status::{status, StatusReport};
use crate::output::{Output, Render, Style};
use crate::serving::state::{serving_states, ServingState};
use crate::settings::Settings;

/// What `status` prints: the node's status, what it serves, its router.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct StatusShown {
    #[serde(flatten)]
    pub status: StatusReport,
    /// Every service recorded here, and what of each runs.
    #[serde(default)]
    pub services: Vec<ServingState>,
    /// The router here (None: none was ever started here).
    #[serde(default)]
    pub router: Option<RouterState>,
}

pub async fn run(settings: &Settings, out: &Output) -> Result<i32> {
    let report = status(settings).await?;
    // Without a home nothing was launched here by this user: there is nothing to list.
    let (services, router) = if settings.paths.state_dir("what was launched").is_ok() {
        let router = router_look(settings, &RouterLook { api_key: None, health: true }).await?;
        let router = (router.process.is_some() || !router.routes.is_empty()).then_some(router);
        (serving_states(settings, None).await?, router)
    } else {
        (Vec::new(), None)
    };
    out.report(&StatusShown { status: report, services, router });
    Ok(0)
}

impl Render for StatusReport {
    fn render(&self, out: &Output) {
        out.line(&format!("strix-toolbox {} · {} at {}", self.version, self.engine.program(), self.endpoint));
        let short = |value: &Option<String>| value.as_deref().map_or("-", short_digest).to_string();
        for toolbox in &self.toolboxes {
            out.line(&format!(
                "  {:<20} {:<8} pin {:<16} image {} rccl {}",
                toolbox.name,
                if toolbox.running { "running" } else { "stopped" },
                toolbox.pin.as_deref().unwrap_or("-"),
                short(&toolbox.image_digest),
                short(&toolbox.rccl_sha256)
            ));
        }
        if self.toolboxes.is_empty() {
            out.line("  no toolboxes yet: `strix-toolbox refresh` creates one");
        }
    }
}

impl Render for StatusShown {
    fn render(&self, out: &Output) {
        self.status.render(out);
        for state in &self.services {
            let record = &state.record;
            let running = if state.active() {
                out.paint(&format!("running {}", state.alive.join(", ")), Style::Ok)
            } else {
                out.paint("stopped", Style::Warn)
            };
            out.line(&format!(
                "  {} ({} with {} in {}, {:?}) at {} since {}: {running}",
                out.paint(&record.service, Style::Bold),
                record.model,
                record.engine,
                record.toolbox,
                record.role,
                record.upstream(),
                record.started
            ));
        }
        if let Some(router) = &self.router {
            let routes: Vec<String> = router
                .routes
                .iter()
                .map(|route| format!("{} ({})", route.name, router.health.get(&route.name).map_or("-", String::as_str)))
                .collect();
            match &router.process {
                Some(process) => {
                    out.line(&format!("  router on {} (pid {}): {}", process.listen, process.pid, routes.join(", ")))
                }
                None => out.line(&format!("  no router runs; its routes file names {}", routes.join(", "))),
            }
        }
    }
}
