//! Stop what a launch started on this node: `vllm serve` (TERM, then KILL, bounded), then Ray
//! (`ray stop`, then `--force`), then its record. Idempotent: nothing running is nothing to do.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::ops::toolbox::RunningToolbox;
use crate::serving::commands::{kill, pid_alive, process_alive, ray_stop};
use crate::serving::record::{ServingFiles, ServingRecord};
use crate::settings::Settings;

/// How long vLLM gets to exit after SIGTERM (it frees the GPU memory and the Ray actors).
const VLLM_GRACE: Duration = Duration::from_secs(30);
/// `ray stop`'s own grace is 16 s; beyond this it is forced.
const RAY_STOP_SECONDS: &str = "30";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StopPart {
    /// `vllm serve` only (first, on the head: it drives the workers).
    Vllm,
    /// vLLM, then Ray, then the record.
    All,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeStop {
    pub toolbox: String,
    pub part: StopPart,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeStopped {
    /// `vllm serve` was running and stopped.
    pub vllm: bool,
    /// Ray was running and stopped.
    pub ray: bool,
    /// It took SIGKILL or `ray stop --force`.
    pub forced: bool,
}

pub async fn serve_stop(settings: &Settings, request: &ServeStop) -> Result<ServeStopped> {
    let files = ServingFiles::of(&request.toolbox)?;
    let record = files.read()?;
    let mut stopped = ServeStopped::default();
    // A stopped (or removed) toolbox runs nothing any more.
    if let Some(toolbox) = RunningToolbox::if_running(settings, &request.toolbox).await? {
        if let Some(pid) = record.as_ref().and_then(|r| r.vllm_pid) {
            stop_vllm(&toolbox, pid, &mut stopped).await?;
            if let Some(record) = &record {
                files.write(&ServingRecord { vllm_pid: None, ..record.clone() })?;
            }
        }
        if request.part == StopPart::All {
            stop_ray(&toolbox, &mut stopped).await?;
        }
    }
    if request.part == StopPart::All {
        files.remove()?;
    }
    Ok(stopped)
}

async fn stop_vllm(toolbox: &RunningToolbox, pid: u32, stopped: &mut ServeStopped) -> Result<()> {
    let no_env = Default::default();
    if !toolbox.run(&pid_alive(pid), &no_env).await?.success() {
        return Ok(());
    }
    stopped.vllm = true;
    toolbox.run(&kill("TERM", pid), &no_env).await?;
    let deadline = Instant::now() + VLLM_GRACE;
    while Instant::now() < deadline {
        if !toolbox.run(&pid_alive(pid), &no_env).await?.success() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    stopped.forced = true;
    toolbox.run(&kill("KILL", pid), &no_env).await?;
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
