//! `vllm serve`, detached inside the toolbox: its output in a log file beside the record (the
//! toolbox shares the home), its pid recorded. HF_TOKEN reaches it through the exec's environment.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::ops::toolbox::RunningToolbox;
use crate::secret::Secret;
use crate::serving::commands::detached;
use crate::serving::record::{Role, ServingFiles, ServingRecord};
use crate::settings::Settings;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VllmStart {
    pub toolbox: String,
    /// `vllm serve MODEL …` (`serving::commands::vllm_serve`).
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub hf_token: Option<Secret>,
    pub record: ServingRecord,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VllmStarted {
    pub pid: u32,
    /// Where its output goes, on the node.
    pub log: String,
}

pub async fn vllm_start(settings: &Settings, request: &VllmStart) -> Result<VllmStarted> {
    let toolbox = RunningToolbox::open(settings, &request.toolbox).await?;
    let files = ServingFiles::of(&settings.paths, &toolbox.name)?;
    if request.record.role == Role::Single {
        // Across nodes, Ray's start cleared it; one node has no Ray.
        super::ray::clear_stale_compile_cache(&files, &toolbox.image(), &request.env, settings.paths.cache_home())?;
    }
    files.rotate_log()?;
    let log = files.vllm_log().display().to_string();
    let mut env = request.env.clone();
    if let Some(token) = &request.hf_token {
        env.insert("HF_TOKEN".into(), token.expose().to_string());
    }
    let report = toolbox.run(&detached(&log, &request.argv), &env).await?;
    let pid = report.stdout.trim().parse::<u32>().ok().filter(|_| report.success()).ok_or_else(|| Error::Command {
        program: "vllm serve".into(),
        message: format!(
            "it did not start in toolbox {} (exit {}): {}",
            toolbox.name,
            report.exit_code,
            report.last_lines(3).join(" | ")
        ),
        fix: Some("check that the toolbox's image has vLLM (`strix-toolbox enter -- vllm --version`)".into()),
    })?;
    let record = ServingRecord { vllm_pid: Some(pid), image: toolbox.image(), ..request.record.clone() };
    files.write(&record)?;
    Ok(VllmStarted { pid, log })
}
