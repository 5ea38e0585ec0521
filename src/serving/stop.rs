//! Stop what the launch of one service started on this node, whatever the engine and toolbox:
//! its recorded processes (TERM, then KILL, each wait bounded), then Ray where the launch started
//! it (`ray stop`, then `--force`), then its record, marked `stopping` before anything stops (a
//! watch's look in the middle of the stop then finds a service being stopped, not failing). The
//! other services here keep running. Idempotent: nothing running is nothing to do.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::serving::commands::{kill, pid_alive, process_alive};
use crate::serving::compile_cache::erase_after_crash;
use crate::serving::ray::ray_stop;
use crate::serving::record::{ServedProcess, ServingDir, ServingRecord};
use crate::serving::service_name::ServiceName;
use crate::settings::Settings;
use crate::toolbox::running::RunningToolbox;

/// How long a process gets to exit after SIGTERM (vLLM frees the GPU memory and its Ray actors).
const GRACE: Duration = Duration::from_secs(30);
/// How long the kernel gets to end it after SIGKILL (freeing a large model's memory takes a while).
const KILL_GRACE: Duration = Duration::from_secs(10);
/// `ray stop`'s own grace is 16 s; beyond this it is forced.
const RAY_STOP_SECONDS: &str = "30";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StopPart {
    /// The engine's server only (first, on the head: it drives the workers).
    Server,
    /// Every process, then Ray, then the record.
    All,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeStop {
    /// The service whose launch to stop.
    pub service: String,
    pub part: StopPart,
    /// SIGKILL at once, without SIGTERM's grace: the watch's stop of a stalled server, which
    /// would never answer SIGTERM (stopped, or deadlocked).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_once: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeStopped {
    /// The recorded processes that were running and stopped, by name.
    pub processes: Vec<String>,
    /// Ray was running and stopped.
    pub ray: bool,
    /// It took SIGKILL or `ray stop --force`.
    pub forced: bool,
    /// The recorded processes that were dead already, by name: the service had crashed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub found_dead: Vec<String>,
    /// Its engine's compile cache for the image went with it (after a crash).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compile_cache_erased: bool,
}

impl ServeStopped {
    /// What two stops of one service on one node stopped together (its server, then the rest).
    pub fn and(mut self, later: ServeStopped) -> ServeStopped {
        self.processes.extend(later.processes);
        self.ray |= later.ray;
        self.forced |= later.forced;
        self.found_dead.extend(later.found_dead);
        self.compile_cache_erased |= later.compile_cache_erased;
        self
    }
}

pub async fn serve_stop(settings: &Settings, request: &ServeStop) -> Result<ServeStopped> {
    let name = ServiceName::parse(&request.service)?;
    let mut stopped = ServeStopped::default();
    let Some(found) = ServingDir::of(&settings.paths)?.find(&name)? else { return Ok(stopped) };
    let (files, mut record) = (found.files, found.record);
    if !record.stopping {
        record.stopping = true;
        files.write(&record)?;
    }
    // A stopped (or removed) toolbox runs nothing any more.
    if let Some(toolbox) = RunningToolbox::if_running(settings, &record.toolbox).await? {
        let server = record.engine.profile().server;
        let (now, later): (Vec<&ServedProcess>, Vec<&ServedProcess>) =
            record.processes.iter().partition(|p| request.part == StopPart::All || p.name == server);
        let grace = if request.at_once { Duration::ZERO } else { GRACE };
        stop_processes(&toolbox, &now, grace, &mut stopped).await?;
        erase_after_a_crash(settings, &toolbox, &record, request.at_once, &mut stopped)?;
        if request.part == StopPart::Server {
            files.write(&ServingRecord { processes: later.into_iter().cloned().collect(), ..record.clone() })?;
        }
        // Ray where this launch started it.
        if request.part == StopPart::All && record.backend.runs_ray() {
            stop_ray(&toolbox, &mut stopped).await?;
        }
    }
    if request.part == StopPart::All {
        files.remove()?;
    }
    Ok(stopped)
}

/// A recorded process found dead means the service crashed, and a stop at once is the watch's
/// after a fault (a stalled or failing engine): an engine that keeps a compile cache loses its
/// image's (the next launch compiles afresh), when the toolbox still runs that image.
fn erase_after_a_crash(
    settings: &Settings,
    toolbox: &RunningToolbox,
    record: &ServingRecord,
    at_once: bool,
    stopped: &mut ServeStopped,
) -> Result<()> {
    let crashed = at_once || !stopped.found_dead.is_empty();
    if !crashed || !record.engine.profile().keeps_compile_cache || toolbox.image() != record.image {
        return Ok(());
    }
    erase_after_crash(settings.paths.cache_home(), &record.env, &toolbox.container.image_id)?;
    stopped.compile_cache_erased = true;
    Ok(())
}

/// TERM to every one that runs, KILL to those still running after `grace`.
async fn stop_processes(
    toolbox: &RunningToolbox,
    processes: &[&ServedProcess],
    grace: Duration,
    stopped: &mut ServeStopped,
) -> Result<()> {
    let no_env = Default::default();
    let mut running = Vec::new();
    for process in processes {
        if toolbox.run(&pid_alive(process.pid), &no_env).await?.success() {
            toolbox.run(&kill("TERM", process.pid), &no_env).await?;
            stopped.processes.push(process.name.clone());
            running.push(process.pid);
        } else {
            stopped.found_dead.push(process.name.clone());
        }
    }
    let mut deadline = Instant::now() + grace;
    while !running.is_empty() {
        let mut still = Vec::new();
        for pid in running {
            if toolbox.run(&pid_alive(pid), &no_env).await?.success() {
                still.push(pid);
            }
        }
        running = still;
        if running.is_empty() || (stopped.forced && Instant::now() >= deadline) {
            break;
        }
        if Instant::now() >= deadline {
            stopped.forced = true;
            for pid in &running {
                toolbox.run(&kill("KILL", *pid), &no_env).await?;
            }
            deadline = Instant::now() + KILL_GRACE;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

async fn stop_ray(toolbox: &RunningToolbox, stopped: &mut ServeStopped) -> Result<()> {
    let no_env = Default::default();
    if !toolbox.run(&process_alive("raylet"), &no_env).await?.success() {
        return Ok(());
    }
    stopped.ray = true;
    let mut graceful = vec!["timeout".to_string(), RAY_STOP_SECONDS.to_string()];
    graceful.extend(ray_stop(false));
    toolbox.run(&graceful, &no_env).await?;
    if toolbox.run(&process_alive("raylet"), &no_env).await?.success() {
        stopped.forced = true;
        toolbox.run_ok("`ray stop --force`", &ray_stop(true), &no_env).await?;
    }
    Ok(())
}
