//! One process of a launch, started detached inside the toolbox: its argv with its environment
//! (secrets among it: an HF token, an API key, Ray's token, each only ever in the exec's
//! environment), its output in `SERVICE.NAME.log` beside the record (the toolbox shares the home),
//! its pid recorded, so `stop`, `logs` and `status` find it. Every engine's processes start this
//! way: `vllm serve`, `llama-server`, `rpc-server`.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::compile_cache::{use_image_cache, CompileCache};
use crate::error::{Error, Result};
use crate::secret::Secret;
use crate::serving::commands::detached;
use crate::serving::record::{ServedProcess, ServingFiles, ServingRecord};
use crate::serving::service_name::ServiceName;
use crate::settings::Settings;
use crate::toolbox::running::RunningToolbox;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessStart {
    pub toolbox: String,
    /// What the record and the log call it (`vllm`, `llama-server`, `rpc-server`).
    pub name: String,
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// Variables whose values are secrets: in the exec's environment, nowhere else.
    pub secrets: BTreeMap<String, Secret>,
    /// Where it will listen for the other nodes, recorded with it.
    pub listens: Option<SocketAddr>,
    /// The first vLLM process of the launch on the node: the image's own compile cache, kept or
    /// erased first (None: not vLLM's first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_cache: Option<CompileCache>,
    /// This launch's record on the node: written before the process starts (so a stop finds
    /// what started), then with the process added.
    pub record: ServingRecord,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessStarted {
    pub pid: u32,
    /// Where its output goes, on the node.
    pub log: String,
}

pub async fn process_start(settings: &Settings, request: &ProcessStart) -> Result<ProcessStarted> {
    let toolbox = RunningToolbox::open(settings, &request.toolbox).await?;
    let files = ServingFiles::of(&settings.paths, &ServiceName::parse(&request.record.service)?)?;
    let mut env = request.env.clone();
    if let Some(cache) = request.compile_cache {
        use_image_cache(settings, &toolbox, &mut env, cache).await?;
    }
    // The same launch's record (another of its processes, or Ray, started here first) gains
    // this process; another launch's is replaced.
    let mut record = match files.read()? {
        Some(recorded) if recorded.started == request.record.started => recorded,
        _ => ServingRecord { image: toolbox.image(), image_id: Some(toolbox.image_id()), ..request.record.clone() },
    };
    files.write(&record)?;
    files.rotate_log(&request.name)?;
    let log = files.log(&request.name).display().to_string();
    env.extend(request.secrets.iter().map(|(key, secret)| (key.clone(), secret.expose().to_string())));
    let report = toolbox.run(&detached(&log, &request.argv), &env).await?;
    let pid = report.stdout.trim().parse::<u32>().ok().filter(|_| report.success()).ok_or_else(|| Error::Command {
        program: request.name.clone(),
        message: format!(
            "it did not start in toolbox {} (exit {}): {}",
            toolbox.name,
            report.exit_code,
            report.last_lines(3).join(" | ")
        ),
        fix: Some(format!(
            "check that the toolbox's image has {} (`strix-toolbox enter {} -- {} --help`)",
            request.argv.first().map_or("it", String::as_str),
            toolbox.name,
            request.argv.first().map_or("", String::as_str)
        )),
    })?;
    record.processes.retain(|p| p.name != request.name);
    record.processes.push(ServedProcess {
        name: request.name.clone(),
        pid,
        log: log.clone(),
        listens: request.listens,
    });
    files.write(&record)?;
    Ok(ProcessStarted { pid, log })
}
