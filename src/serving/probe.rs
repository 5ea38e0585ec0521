//! Is it serving: `GET /health`, then `GET /v1/models`, asked on the head node at the endpoint's
//! address (with the API key, where the endpoint has one), with whether the engine's server still
//! runs and its latest log line (what it is doing meanwhile).

use std::io::{Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::secret::Secret;
use crate::serving::commands::pid_alive;
use crate::serving::http::{get, HttpAnswer};
use crate::serving::openai_models::OpenAiModels;
use crate::serving::record::{ServingDir, ServingRecord};
use crate::serving::service_name::ServiceName;
use crate::settings::Settings;
use crate::toolbox::running::RunningToolbox;

/// The most of a log's end read for its latest line.
const TAIL_BYTES: u64 = 64 << 10;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeProbe {
    /// The service asked about (its record says its toolbox and its server's pid).
    pub service: String,
    /// The process that serves the endpoint (`vllm`, `llama-server`): its log and its pid.
    pub server: String,
    /// The endpoint's address (the head's link address and the port).
    pub address: SocketAddr,
    /// The endpoint's API key, sent as a bearer token.
    pub api_key: Option<Secret>,
    /// When the endpoint is silent, also look inside the toolbox whether the server still runs
    /// (an exec: a launch asks every few seconds, not on every probe).
    pub look_inside: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeProbeReport {
    pub health: HttpAnswer,
    /// The models `/v1/models` lists (asked only once `/health` says 200).
    pub models: Vec<String>,
    /// `/v1/models` refused the probe for want of the right API key (401 or 403).
    #[serde(default)]
    pub key_refused: bool,
    /// The server still runs (when the endpoint answered, or a look inside said so; else
    /// assumed, when not looked).
    pub server_alive: bool,
    /// The last line of its log.
    pub last_line: Option<String>,
}

impl ServeProbeReport {
    /// `/health` said 200 and `/v1/models` lists `model`.
    pub fn serves(&self, model: &str) -> bool {
        matches!(&self.health, HttpAnswer::Status(200, _)) && self.models.iter().any(|m| m == model)
    }
}

pub async fn serve_probe(settings: &Settings, request: &ServeProbe) -> Result<ServeProbeReport> {
    let name = ServiceName::parse(&request.service)?;
    let serving = ServingDir::of(&settings.paths)?;
    let (files, record) = match serving.find(&name)? {
        Some(found) => (found.files, Some(found.record)),
        None => (serving.files(&name), None),
    };
    let limit = Duration::from_secs(5);
    let key = request.api_key.as_ref().map(Secret::expose);
    let health = get(request.address, "/health", key, limit).await;
    let (models, key_refused) = match &health {
        HttpAnswer::Status(200, _) => match get(request.address, "/v1/models", key, limit).await {
            HttpAnswer::Status(200, body) => {
                (OpenAiModels::parse(body.as_bytes()).map(OpenAiModels::ids).unwrap_or_default(), false)
            }
            HttpAnswer::Status(401 | 403, _) => (Vec::new(), true),
            _ => (Vec::new(), false),
        },
        _ => (Vec::new(), false),
    };
    // What answers is alive; only a silent endpoint costs a look inside the toolbox (an exec),
    // and only when the caller asks for one (a launch does every few seconds while weights load).
    let answered = !models.is_empty() || key_refused;
    let server_alive = answered || !request.look_inside || server_runs(settings, request, record.as_ref()).await?;
    Ok(ServeProbeReport {
        health,
        models,
        key_refused,
        server_alive,
        last_line: last_line(&files.log(&request.server)),
    })
}

/// The recorded server still runs in the toolbox.
async fn server_runs(settings: &Settings, request: &ServeProbe, record: Option<&ServingRecord>) -> Result<bool> {
    let Some(record) = record else { return Ok(false) };
    let Some(pid) = record.process(&request.server).map(|p| p.pid) else { return Ok(false) };
    let Some(toolbox) = RunningToolbox::if_running(settings, &record.toolbox).await? else { return Ok(false) };
    Ok(toolbox.run(&pid_alive(pid), &Default::default()).await?.success())
}

/// The last non-empty line of `path` (its end only is read).
pub fn last_line(path: &Path) -> Option<String> {
    let mut file = std::fs::File::open(path).ok()?;
    let size = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(size.saturating_sub(TAIL_BYTES))).ok()?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).ok()?;
    String::from_utf8_lossy(&tail).lines().map(str::trim_end).rfind(|l| !l.trim().is_empty()).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_line_skips_trailing_blank_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("v.log");
        std::fs::write(&log, "one\nLoading weights took 3.2 seconds\n\n").unwrap();
        assert_eq!(last_line(&log).as_deref(), Some("Loading weights took 3.2 seconds"));
        assert_eq!(last_line(&dir.path().join("none")), None);
    }
}
