//! `stop [NAME] [--all]` on this node, `cluster stop [NAME] [--all]` on every node: a service (or
//! every one), stopped, and its route gone from the router.

use crate::cluster::stop::{stop_services, NodeStop, StopReport, StopTarget};
use crate::error::{Error, Result};
use crate::node::Node;
use crate::output::{Output, Render, Style};
use crate::serving::service_name::ServiceName;
use clap::Args;

/// Which services a stop means.
#[derive(Debug, Clone, Args)]
pub struct StopArgs {
    /// The service [default: the one that serves; with several, name one].
    #[arg(value_name = "NAME")]
    pub name: Option<ServiceName>,

    /// Every service, and the router.
    #[arg(long, conflicts_with = "name")]
    pub all: bool,
}

/// Which services `stop NAME`, `stop --all` and `stop` mean.
pub fn target(args: &StopArgs) -> Result<StopTarget> {
    match (&args.name, args.all) {
        (Some(_), true) => Err(Error::Usage("give NAME or --all, not both".into())),
        (Some(name), false) => Ok(StopTarget::Named(name.clone())),
        (None, true) => Ok(StopTarget::All),
        (None, false) => Ok(StopTarget::TheOnlyOne),
    }
}

/// Stop `target` on `nodes`, its routes dropped at `router` (the cluster's head, when it
/// answers); `unreachable` (node, why) are reported as not stopped. Exit 1 when any was not.
pub async fn run(
    target: &StopTarget,
    nodes: &[&dyn Node],
    router: Option<&dyn Node>,
    unreachable: Vec<(String, String)>,
    out: &Output,
) -> Result<i32> {
    let mut report = stop_services(nodes, router, target).await?;
    report.nodes.extend(unreachable.into_iter().map(|(node, error)| NodeStop {
        node,
        stopped: None,
        error: Some(error),
    }));
    out.report(&report);
    Ok(i32::from(!report.failed().is_empty() || report.router_error.is_some()))
}

impl Render for StopReport {
    fn render(&self, out: &Output) {
        for node in &self.nodes {
            match (&node.stopped, &node.error) {
                (_, Some(error)) => out.line(&format!("{} {}: {error}", out.paint("✗", Style::Fail), node.node)),
                (Some(stopped), None) => {
                    let mut what: Vec<&str> = stopped.processes.iter().map(String::as_str).collect();
                    if stopped.ray {
                        what.push("Ray");
                    }
                    let said = if what.is_empty() {
                        "nothing was running".to_string()
                    } else {
                        format!("stopped {}", what.join(" and "))
                    };
                    let forced = if stopped.forced { " (forced)" } else { "" };
                    out.line(&format!("{} {}: {said}{forced}", out.paint("✓", Style::Ok), node.node));
                }
                (None, None) => {}
            }
        }
        if !self.services.is_empty() {
            out.status(&format!("stopped {}", self.services.join(", ")));
        }
        match (&self.router, &self.router_error) {
            (_, Some(error)) => out.line(&format!("{} the router: {error}", out.paint("✗", Style::Fail))),
            (Some(router), None) if router.process.is_none() && !self.services.is_empty() => {
                out.line("the router stopped: no service is left")
            }
            (Some(router), None) if !self.services.is_empty() => {
                let names: Vec<&str> = router.routes.iter().map(|r| r.name.as_str()).collect();
                out.line(&format!("the router still serves {}", names.join(", ")))
            }
            _ => {}
        }
    }
}
