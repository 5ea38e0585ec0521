//! Running the gate: the prompt set sent to an endpoint (one prompt at a time, so batching can
//! change nothing: [`ask`], on the node that reaches it), its answers held against the reference
//! ([`judge`], where the command runs): the stored one, or answers taken elsewhere (one node
//! serving alone, the image a canary replaces).

use chrono::{SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use super::answer::{tokens_of, GateAnswer, GateRun, GATE_FORMAT, TOP_LOGPROBS};
use super::diff::{compare, GateVerdict};
use super::prompts::PromptSet;
use super::references::ReferenceStore;
use crate::bench::api::{CompletionRequest, Prompt};
use crate::bench::client::ApiClient;
use crate::bench::key::{EngineRef, ModelIdentity};
use crate::error::Result;

/// What serves, as the gate names it.
#[derive(Debug, Clone)]
pub struct GateTarget {
    pub client: ApiClient,
    /// The model as the server names it.
    pub served_model: String,
    pub model: ModelIdentity,
    pub engine: EngineRef,
    pub image: String,
    /// "TP2 PP1 on 2 nodes over RoCE", "one node alone".
    pub layout: String,
}

/// What `bench --gate` reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateReport {
    pub prompt_set: u32,
    pub model: ModelIdentity,
    /// "stored reference from image X", "one node serving alone", "none: this run is the reference".
    pub reference: String,
    /// This run became the model's stored reference.
    pub became_reference: bool,
    /// Absent when there was nothing to compare with (the run became the reference, or went
    /// unchecked).
    pub verdict: Option<GateVerdict>,
    pub candidate: GateRun,
}

impl GateReport {
    pub fn passed(&self) -> bool {
        self.verdict.as_ref().is_none_or(|verdict| verdict.passed)
    }

    /// Nothing checked the answers, and they were not kept as a reference either.
    pub fn unchecked(&self) -> bool {
        self.verdict.is_none() && !self.became_reference
    }
}

/// What a candidate's answers are held against.
#[derive(Debug, Clone, PartialEq)]
pub enum Reference {
    /// Answers taken elsewhere ("one node alone at URL", "image X just before the swap"), never
    /// stored here.
    Run { run: Box<GateRun>, described: String },
    /// The model's stored reference. Without one, the candidate becomes it when `keep_first`
    /// (a plain `bench --gate` accepts what it measures), else its answers go unchecked.
    Stored { keep_first: bool },
}

/// Send every prompt of `set` to `target`, greedy and seeded, and keep its tokens.
pub async fn ask(target: &GateTarget, set: &PromptSet) -> Result<GateRun> {
    let mut answers = Vec::with_capacity(set.prompts.len());
    for prompt in set.prompts {
        let request = CompletionRequest {
            model: target.served_model.clone(),
            prompt: Prompt::Text(prompt.text.to_string()),
            max_tokens: set.max_tokens,
            temperature: 0.0,
            seed: Some(set.seed),
            stream: false,
            stream_options: None,
            ignore_eos: true,
            logprobs: Some(TOP_LOGPROBS),
            return_token_ids: true,
        };
        let completion = target.client.complete(&request).await?;
        let url = format!("POST {}/completions", target.client.endpoint().base());
        let what = format!("the gate's prompt {:?}", prompt.id);
        let choice = completion.choices.first().ok_or_else(|| {
            crate::bench::error::endpoint(&url, &what, "an answer without a choice", "see the server's log")
        })?;
        let tokens = tokens_of(choice).map_err(|why| {
            crate::bench::error::endpoint(&url, &what, &why, "serve the model with vLLM or llama.cpp's server")
        })?;
        answers.push(GateAnswer {
            prompt: prompt.id.to_string(),
            text: choice.text.clone().unwrap_or_default(),
            tokens,
        });
    }
    Ok(GateRun {
        format: GATE_FORMAT,
        prompt_set: set.version,
        fingerprint: set.fingerprint(),
        model: target.model.clone(),
        engine: target.engine,
        image: target.image.clone(),
        layout: target.layout.clone(),
        endpoint: target.client.endpoint().base().to_string(),
        taken_at: Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true),
        answers,
    })
}

/// Hold `candidate`'s answers against `reference`; see [`Reference`].
pub fn judge(
    candidate: GateRun,
    reference: Reference,
    references: &ReferenceStore,
    set: &PromptSet,
    logprob_tolerance: f64,
) -> Result<GateReport> {
    let (reference, described, keep_first) = match reference {
        Reference::Run { run, described } => (Some(*run), described, false),
        Reference::Stored { keep_first } => match references.get(&candidate.model, set)? {
            Some(stored) => {
                let described = format!("the stored reference from image {} ({})", stored.image, stored.layout);
                (Some(stored), described, false)
            }
            None if keep_first => (None, "none yet: this run is the reference".to_string(), true),
            None => (
                None,
                "none: the answers went unchecked (no reference for this model, and none is kept from unchecked \
                 answers)"
                    .to_string(),
                false,
            ),
        },
    };
    let verdict = match &reference {
        Some(reference) => Some(compare(reference, &candidate, logprob_tolerance)?),
        None => None,
    };
    let became_reference = keep_first && references.record_first(&candidate)?;
    Ok(GateReport {
        prompt_set: set.version,
        model: candidate.model.clone(),
        reference: described,
        became_reference,
        verdict,
        candidate,
    })
}
