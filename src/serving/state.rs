//! What a node can serve with and what it serves now: its toolbox and image, its cluster link's
//! address, and what a launch recorded there with whether it still runs.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::host::HostFacts;
use crate::link::{read_link, ClusterLink};
use crate::ops::toolbox::RunningToolbox;
use crate::serving::commands::launch_alive;
use crate::serving::record::{ServingFiles, ServingRecord};
use crate::settings::Settings;
use crate::spec::Transport;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeCheck {
    pub toolbox: String,
    /// Start the toolbox when it is stopped (a launch); else only look.
    pub start: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeCheckReport {
    pub toolbox: String,
    /// The image it runs (registry digest, else id); None when there is no such toolbox running.
    pub image: Option<String>,
    /// This check started it.
    pub started: bool,
    pub transport: Transport,
    /// The transport's netdev as the kernel has it.
    pub link: Option<ClusterLink>,
    pub serving: Option<ServingState>,
}

/// A launch's record on this node, and what of it still runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServingState {
    pub record: ServingRecord,
    pub vllm_alive: bool,
    pub ray_alive: bool,
}

impl ServingState {
    /// Something of the launch still runs.
    pub fn active(&self) -> bool {
        self.vllm_alive || self.ray_alive
    }
}

pub async fn serve_check(settings: &Settings, check: &ServeCheck) -> Result<ServeCheckReport> {
    let facts = HostFacts::read(&settings.open_host_root()?)?;
    let transport = Transport::of(&facts);
    let link = match transport.netdev() {
        Some(netdev) => read_link(netdev).await?,
        None => None,
    };
    let toolbox = if check.start {
        Some(RunningToolbox::open(settings, &check.toolbox).await?)
    } else {
        RunningToolbox::if_running(settings, &check.toolbox).await?
    };
    let serving = match &toolbox {
        Some(toolbox) => serving_state(toolbox).await?,
        None => ServingFiles::of(&check.toolbox)?.read()?.map(|record| ServingState {
            record,
            vllm_alive: false,
            ray_alive: false,
        }),
    };
    Ok(ServeCheckReport {
        toolbox: check.toolbox.clone(),
        image: toolbox.as_ref().map(RunningToolbox::image),
        started: toolbox.as_ref().is_some_and(|t| t.started),
        transport,
        link,
        serving,
    })
}

/// The record in a running toolbox, with what of it is alive.
pub async fn serving_state(toolbox: &RunningToolbox) -> Result<Option<ServingState>> {
    let Some(record) = ServingFiles::of(&toolbox.name)?.read()? else { return Ok(None) };
    let alive = toolbox.run(&launch_alive(record.vllm_pid), &Default::default()).await?;
    let running: Vec<&str> = alive.stdout.lines().map(str::trim).collect();
    let vllm_alive = running.contains(&"vllm");
    let ray_alive = record.ray && running.contains(&"ray");
    Ok(Some(ServingState { record, vllm_alive, ray_alive }))
}
