//! `cluster watch`'s look at one node, asked on the node (the machine that drives the cluster may
//! not reach the cluster link): its boot id and the GPU memory it holds; on the service's head
//! also a short completion with a deadline at its engine, and the engine's own progress counters
//! read from its `/metrics`. The engine is asked at its own port, where it wants no key (the
//! router in front of it checks the endpoint's).

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::metrics::{scrape, sum_of};
use crate::settings::Settings;
use crate::watch::{ProbeOutcome, Progress};

/// The probe's prompt and length: one token proves the engine generates.
const PROBE_PROMPT: &str = "Hello";
const PROBE_TOKENS: u32 = 1;
/// The most of a probe's answer read.
const PROBE_BODY_LIMIT: usize = 1 << 20;
/// The longest deadline a look takes: a caller's larger one is cut to it.
const LONGEST_DEADLINE: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchLook {
    /// On the service's head: its engine, asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineLook>,
}

/// What to ask the engine, and by when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineLook {
    /// Its own address: the head's link address and the engine's port (`/v1` and `/metrics`).
    pub address: SocketAddr,
    /// The name it serves the model under (the completion's `model`).
    pub served_model: String,
    /// The counter that moves while it generates, and the gauge of the requests it works on
    /// (the engine's names: `ServingEngine::progress`).
    pub generated: String,
    pub running: String,
    /// The probe's and the scrape's deadline, each, in milliseconds.
    pub deadline_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchLookReport {
    /// `/proc/sys/kernel/random/boot_id` under the node's host root: another one is another boot.
    pub boot_id: Option<String>,
    /// GTT and VRAM in use (None: amdgpu does not say).
    pub gpu_used_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineSeen>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineSeen {
    pub probe: ProbeOutcome,
    /// None: its metrics could not be read, or lack the counters (`metrics_error` says which).
    pub progress: Option<Progress>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_error: Option<String>,
}

pub async fn watch_look(settings: &Settings, look: &WatchLook) -> Result<WatchLookReport> {
    let root = settings.open_host_root()?;
    let boot_id = root.attribute("proc/sys/kernel/random/boot_id").filter(|id| !id.is_empty());
    let gpu_used_bytes = crate::host::telemetry::read(&root).gpu_memory.used_bytes();
    let engine = match &look.engine {
        Some(engine) => Some(look_at_engine(engine).await?),
        None => None,
    };
    Ok(WatchLookReport { boot_id, gpu_used_bytes, engine })
}

/// The probe and the scrape at once: a stopped engine costs one deadline, not two.
async fn look_at_engine(look: &EngineLook) -> Result<EngineSeen> {
    let deadline = Duration::from_millis(look.deadline_ms).min(LONGEST_DEADLINE);
    let (probe, scraped) = tokio::join!(probe(look, deadline), scrape(look.address, None, deadline));
    let (progress, metrics_error) = match scraped {
        Ok(families) => {
            let progress = (|| {
                Some(Progress {
                    generated: sum_of(&families, &look.generated)?,
                    running: sum_of(&families, &look.running)?,
                })
            })();
            let missing =
                format!("its metrics lack {} or {} (llama-server needs --metrics)", look.generated, look.running);
            (progress, progress.is_none().then_some(missing))
        }
        Err(error) => (None, Some(error.to_string())),
    };
    Ok(EngineSeen { probe: probe?, progress, metrics_error })
}

/// `POST /v1/completions` for one token, greedy: passed when it answers 200 with a choice; timed
/// out when it took the request and said nothing whole within the deadline.
async fn probe(look: &EngineLook, deadline: Duration) -> Result<ProbeOutcome> {
    let client = reqwest::Client::builder()
        .connect_timeout(deadline)
        .timeout(deadline)
        .tcp_nodelay(true)
        .build()
        .map_err(|e| Error::Internal(format!("cannot build the HTTP client: {e}")))?;
    let body = serde_json::json!({
        "model": look.served_model,
        "prompt": PROBE_PROMPT,
        "max_tokens": PROBE_TOKENS,
        "temperature": 0.0,
    });
    let url = format!("http://{}/v1/completions", look.address);
    let sent = client.post(&url).header("content-type", "application/json").body(body.to_string()).send().await;
    let mut answer = match sent {
        Ok(answer) => answer,
        Err(error) => return Ok(failed_request(&url, &error)),
    };
    let status = answer.status();
    let mut text = Vec::new();
    loop {
        match answer.chunk().await {
            Ok(Some(chunk)) if text.len() + chunk.len() <= PROBE_BODY_LIMIT => text.extend_from_slice(&chunk),
            Ok(Some(_)) => {
                return Ok(ProbeOutcome::Failed(format!("{url} answered more than {PROBE_BODY_LIMIT} bytes")))
            }
            Ok(None) => break,
            Err(error) => return Ok(failed_request(&url, &error)),
        }
    }
    Ok(judge(&url, status.as_u16(), &text))
}

fn failed_request(url: &str, error: &reqwest::Error) -> ProbeOutcome {
    if error.is_timeout() && !error.is_connect() {
        return ProbeOutcome::TimedOut;
    }
    let why = if error.is_connect() { "nothing answers there".to_string() } else { error.to_string() };
    ProbeOutcome::Failed(format!("POST {url}: {why}"))
}

/// A 200 with at least one choice passes; anything else fails, saying what came.
fn judge(url: &str, status: u16, body: &[u8]) -> ProbeOutcome {
    let text = String::from_utf8_lossy(body);
    let excerpt: String = text.chars().take(200).collect();
    if status != 200 {
        return ProbeOutcome::Failed(format!("POST {url} answered {status}: {excerpt}"));
    }
    let value: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    match value["choices"].as_array() {
        Some(choices) if !choices.is_empty() => ProbeOutcome::Passed,
        _ => ProbeOutcome::Failed(format!("POST {url} answered no completion: {excerpt}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_with_a_choice_passes_and_anything_else_says_what_came() {
        let url = "http://192.168.2.1:8001/v1/completions";
        assert_eq!(judge(url, 200, br#"{"choices":[{"text":" world"}]}"#), ProbeOutcome::Passed);
        assert_eq!(
            judge(url, 503, b"{\"error\":\"Loading model\"}"),
            ProbeOutcome::Failed(format!("POST {url} answered 503: {{\"error\":\"Loading model\"}}"))
        );
        let ProbeOutcome::Failed(why) = judge(url, 200, b"{\"choices\":[]}") else { panic!("no choice passed") };
        assert!(why.contains("no completion"), "{why}");
        assert!(matches!(judge(url, 200, b"\xff\xfe"), ProbeOutcome::Failed(_)));
    }
}
