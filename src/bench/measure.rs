//! One bench run against an endpoint, start to end: which model it serves, prompts of the
//! requested length from its own tokenizer, every concurrency level, and the result to keep.

use chrono::Utc;

use super::client::ApiClient;
use super::key::BenchKey;
use super::load::{self, LoadSpec};
use super::prompt::PromptTokens;
use super::result::BenchResult;
use crate::error::Result;
use crate::reporter::Reporter;

/// What to measure, besides the endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasureSpec {
    /// The model as the server names it; the first `/v1/models` lists when none (as vLLM's bench).
    pub served_model: Option<String>,
    pub concurrency: Vec<u32>,
    pub requests: u32,
    pub ignore_eos: bool,
    pub seed: Option<u64>,
    pub logprobs: Option<u32>,
}

/// The name to send: the one asked for, if the server lists it, else the first it lists.
pub async fn served_model(client: &ApiClient, wanted: Option<&str>) -> Result<String> {
    let listed = client.served_models().await?;
    let url = format!("GET {}/models", client.endpoint().base());
    match wanted {
        Some(wanted) if listed.iter().any(|name| name == wanted) => Ok(wanted.to_string()),
        Some(wanted) => Err(super::error::endpoint(
            &url,
            "the model list",
            &format!("it lists {listed:?}, not {wanted:?}"),
            "name a model the server lists, or leave it out to use the first",
        )),
        None => listed.into_iter().next().ok_or_else(|| {
            super::error::endpoint(
                &url,
                "the model list",
                "no model is listed",
                "wait until the server has loaded its model",
            )
        }),
    }
}

/// Measure every level of `spec` for `key` (its lengths are the request lengths). The result is
/// accepted and not yet kept: the caller saves it ([`super::store::BenchStore::save`]).
pub async fn measure(
    client: &ApiClient,
    key: BenchKey,
    spec: &MeasureSpec,
    reporter: &dyn Reporter,
) -> Result<BenchResult> {
    let model = served_model(client, spec.served_model.as_deref()).await?;
    reporter.step_started("bench", &format!("prompts of {} tokens from {}'s tokenizer", key.input_len, key.engine));
    let prompts = PromptTokens::from_server(client, key.engine, &model).await?;
    reporter.step_finished("bench", "prompts ready");
    let load = LoadSpec {
        model: model.clone(),
        concurrency: spec.concurrency.clone(),
        requests: spec.requests,
        input_len: key.input_len,
        output_len: key.output_len,
        ignore_eos: spec.ignore_eos,
        temperature: 0.0,
        seed: spec.seed,
        logprobs: spec.logprobs,
    };
    let levels = load::run(client, &prompts, &load, reporter).await?;
    Ok(BenchResult::new(key, client.endpoint().base(), &model, spec.requests, levels, Utc::now()))
}
