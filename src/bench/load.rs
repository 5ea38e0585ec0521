//! The load: at each concurrency level, `requests` streamed completions with fixed input and
//! output lengths, at most `concurrency` in flight at once, all queued at once (vLLM's
//! `--request-rate inf` with `--max-concurrency`). One untimed request goes first, as vLLM's
//! "initial test run" does: a server that cannot answer fails the bench there, with its answer,
//! instead of producing a level of failures. Each level is timed from queueing its first request
//! to the end of its last answer.

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::api::{CompletionRequest, Prompt, StreamOptions};
use super::client::ApiClient;
use super::exchange::RequestOutcome;
use super::figures::Figures;
use super::prompt::PromptTokens;
use crate::error::{Error, Result};
use crate::reporter::Reporter;

/// How many distinct failure reasons a level keeps.
const KEPT_ERRORS: usize = 5;

/// What to send.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadSpec {
    /// The model as the server names it (`/v1/models`).
    pub model: String,
    pub concurrency: Vec<u32>,
    /// Per level.
    pub requests: u32,
    pub input_len: u32,
    pub output_len: u32,
    /// Generate exactly `output_len` tokens (vLLM's bench sets it for its random prompts).
    pub ignore_eos: bool,
    pub temperature: f64,
    pub seed: Option<u64>,
    /// Ask each token's log-probability (costs the server some time, as in vLLM's `--logprobs`).
    pub logprobs: Option<u32>,
}

impl LoadSpec {
    fn check(&self) -> Result<()> {
        if self.concurrency.is_empty() || self.concurrency.contains(&0) {
            return Err(Error::Usage("--concurrency needs levels of 1 or more. Fix: e.g. --concurrency 1,4,16".into()));
        }
        if self.requests == 0 || self.output_len == 0 || self.input_len == 0 {
            return Err(Error::Usage("--requests, --input-len and --output-len must be 1 or more".into()));
        }
        Ok(())
    }

    fn request(&self, prompt: Vec<u32>) -> CompletionRequest {
        CompletionRequest {
            model: self.model.clone(),
            prompt: Prompt::Tokens(prompt),
            max_tokens: self.output_len,
            temperature: self.temperature,
            seed: self.seed,
            stream: true,
            stream_options: Some(StreamOptions { include_usage: true }),
            ignore_eos: self.ignore_eos,
            logprobs: self.logprobs,
            return_token_ids: false,
        }
    }
}

/// One concurrency level's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelResult {
    pub concurrency: u32,
    /// Sent (completed + failed).
    pub requests: u32,
    pub figures: Figures,
    /// Why requests failed: each distinct reason once, the first few.
    pub errors: Vec<String>,
}

/// Run every level, in the order given.
pub async fn run(
    client: &ApiClient,
    prompts: &PromptTokens,
    spec: &LoadSpec,
    reporter: &dyn Reporter,
) -> Result<Vec<LevelResult>> {
    spec.check()?;
    let input_len = spec.input_len as usize;
    reporter.step_started("bench", "a first request, untimed");
    let first = client.stream(&spec.request(prompts.prompt(0, input_len)?)).await;
    if let Some(error) = &first.error {
        return Err(super::error::endpoint(
            &format!("POST {}/completions", client.endpoint().base()),
            &format!("a first streamed completion of {} tokens from {input_len} prompt tokens", spec.output_len),
            error,
            "check that the server serves this model and answers /v1/completions (`strix-toolbox logs`)",
        ));
    }
    reporter.step_finished("bench", "the endpoint answers");
    let mut next_index = 1;
    let mut levels = Vec::new();
    for &concurrency in &spec.concurrency {
        let mut requests = Vec::with_capacity(spec.requests as usize);
        for _ in 0..spec.requests {
            requests.push(spec.request(prompts.prompt(next_index, input_len)?));
            next_index += 1;
        }
        levels.push(level(client, concurrency, requests, reporter).await);
    }
    Ok(levels)
}

async fn level(
    client: &ApiClient,
    concurrency: u32,
    requests: Vec<CompletionRequest>,
    reporter: &dyn Reporter,
) -> LevelResult {
    let total = requests.len() as u64;
    let subject = format!("concurrency {concurrency}");
    reporter.step_started("bench", &format!("{subject}: {total} requests"));
    let gate = Arc::new(Semaphore::new(concurrency as usize));
    let origin = Instant::now();
    let mut tasks = JoinSet::new();
    for request in requests {
        let (client, gate) = (client.clone(), gate.clone());
        tasks.spawn(async move {
            let prompt_tokens = match &request.prompt {
                Prompt::Tokens(tokens) => tokens.len() as u64,
                Prompt::Text(_) => 0,
            };
            // The semaphore is never closed, so a permit always comes.
            let _permit = gate.acquire_owned().await.ok();
            client.stream(&request).await.outcome(origin, prompt_tokens)
        });
    }
    let mut outcomes: Vec<RequestOutcome> = Vec::with_capacity(total as usize);
    while let Some(joined) = tasks.join_next().await {
        outcomes.push(joined.unwrap_or_else(|error| RequestOutcome {
            success: false,
            start: 0.0,
            ttft: 0.0,
            itl: Vec::new(),
            latency: 0.0,
            output_tokens: 0,
            prompt_tokens: 0,
            error: Some(format!("the request's task ended: {error}")),
        }));
        reporter.layer(&subject, "requests", outcomes.len() as u64, total);
    }
    let duration = origin.elapsed().as_secs_f64();
    reporter.layer_done(&subject, "done");
    let figures = Figures::of(&outcomes, duration);
    let mut errors: Vec<String> = Vec::new();
    for error in outcomes.iter().filter_map(|outcome| outcome.error.as_ref()) {
        if errors.len() < KEPT_ERRORS && !errors.contains(error) {
            errors.push(error.clone());
        }
    }
    reporter.step_finished(
        "bench",
        &format!(
            "{subject}: {:.1} output tok/s, {} completed, {} failed",
            figures.output_throughput, figures.completed, figures.failed
        ),
    );
    LevelResult { concurrency, requests: total as u32, figures, errors }
}
