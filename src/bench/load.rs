//! The load: at each concurrency level, `requests` streamed completions with fixed input and
//! output lengths, at most `concurrency` in flight at once, all queued at once (vLLM's
//! `--request-rate inf` with `--max-concurrency`). One untimed request goes first ([`warm_up`]),
//! as vLLM's "initial test run" does: a server that cannot answer fails the bench there, with its
//! answer, instead of producing a level of failures. Each level is timed from queueing its first
//! request to the end of its last answer.

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::api::{CompletionRequest, Prompt, StreamOptions};
use super::client::ApiClient;
use super::exchange::RequestOutcome;
use super::figures::Figures;
use super::key::EngineRef;
use super::prompt::{PromptForm, PromptTokens};
use crate::error::{Error, Result};

/// How many distinct failure reasons a level keeps.
const KEPT_ERRORS: usize = 5;

/// What each request sends.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadSpec {
    /// The model as the server names it (`/v1/models`).
    pub model: String,
    pub input_len: u32,
    pub output_len: u32,
    /// Generate exactly `output_len` tokens (vLLM's bench sets it for its random prompts).
    pub ignore_eos: bool,
    pub temperature: f64,
    pub seed: Option<u64>,
    /// Ask each token's log-probability (costs the server some time, as in vLLM's `--logprobs`).
    pub logprobs: Option<u32>,
    /// The server, whose `/tokenize` and `/detokenize` make the prompts.
    pub engine: EngineRef,
    pub prompt_form: PromptForm,
}

impl LoadSpec {
    /// Request `index`'s completion request, its prompt made before any clock starts.
    async fn request(&self, client: &ApiClient, prompts: &PromptTokens, index: usize) -> Result<CompletionRequest> {
        let input_len = self.input_len as usize;
        let prompt = match self.prompt_form {
            PromptForm::TokenIds => Prompt::Tokens(prompts.prompt(index, input_len)?),
            PromptForm::Text => Prompt::Text(prompts.text(client, self.engine, &self.model, index, input_len).await?),
        };
        Ok(CompletionRequest {
            model: self.model.clone(),
            prompt,
            max_tokens: self.output_len,
            temperature: self.temperature,
            seed: self.seed,
            stream: true,
            stream_options: Some(StreamOptions { include_usage: true }),
            ignore_eos: self.ignore_eos,
            logprobs: self.logprobs,
            return_token_ids: false,
        })
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

/// The untimed first request (prompt index 0): a server that cannot answer fails here, with its
/// answer.
pub async fn warm_up(client: &ApiClient, prompts: &PromptTokens, spec: &LoadSpec) -> Result<()> {
    let first = client.stream(&spec.request(client, prompts, 0).await?).await;
    match &first.error {
        None => Ok(()),
        Some(error) => Err(super::error::endpoint(
            &format!("POST {}/completions", client.endpoint().base()),
            &format!("a first streamed completion of {} tokens from {} prompt tokens", spec.output_len, spec.input_len),
            error,
            "check that the server serves this model and answers /v1/completions (`strix-toolbox logs`)",
        )),
    }
}

/// One level: `requests` requests (prompt indices from `first_index` on, so no two requests of a
/// run share a prompt), at most `concurrency` in flight.
pub async fn level(
    client: &ApiClient,
    prompts: &PromptTokens,
    spec: &LoadSpec,
    concurrency: u32,
    requests: u32,
    first_index: usize,
) -> Result<LevelResult> {
    if concurrency == 0 || requests == 0 || spec.output_len == 0 || spec.input_len == 0 {
        return Err(Error::Usage("--concurrency, --requests, --input-len and --output-len must be 1 or more".into()));
    }
    let mut sent = Vec::with_capacity(requests as usize);
    for index in first_index..first_index + requests as usize {
        sent.push(spec.request(client, prompts, index).await?);
    }
    Ok(run_level(client, concurrency, sent).await)
}

async fn run_level(client: &ApiClient, concurrency: u32, requests: Vec<CompletionRequest>) -> LevelResult {
    let total = requests.len() as u64;
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
    }
    let duration = origin.elapsed().as_secs_f64();
    let figures = Figures::of(&outcomes, duration);
    let mut errors: Vec<String> = Vec::new();
    for error in outcomes.iter().filter_map(|outcome| outcome.error.as_ref()) {
        if errors.len() < KEPT_ERRORS && !errors.contains(error) {
            errors.push(error.clone());
        }
    }
    LevelResult { concurrency, requests: total as u32, figures, errors }
}
