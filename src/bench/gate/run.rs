//! Running the gate: the prompt set sent to an endpoint (one prompt at a time, so batching can
//! change nothing), its answers held against the reference, the stored one or one node serving
//! alone.

use chrono::{SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use super::answer::{tokens_of, GateAnswer, GateRun, GATE_FORMAT};
use super::diff::{compare, GateVerdict};
use super::prompts::PromptSet;
use super::references::ReferenceStore;
use crate::bench::api::{CompletionRequest, Prompt};
use crate::bench::client::ApiClient;
use crate::bench::key::{ModelIdentity, ServingEngine};
use crate::error::Result;
use crate::reporter::Reporter;

/// What serves, as the gate names it.
#[derive(Debug, Clone)]
pub struct GateTarget {
    pub client: ApiClient,
    /// The model as the server names it.
    pub served_model: String,
    pub model: ModelIdentity,
    pub engine: ServingEngine,
    pub image: String,
    /// "TP2 PP1 on 2 nodes over RoCE", "one node alone".
    pub layout: String,
}

/// What the candidate is held against.
#[derive(Debug, Clone)]
pub enum ReferenceSource {
    /// The model's first accepted run, kept beside the results; without one, this run becomes it.
    Stored,
    /// One node serving the same model alone (the caller launched it), asked now.
    SingleNode(Box<GateTarget>),
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
    /// Absent when there was nothing to compare with (the run became the reference).
    pub verdict: Option<GateVerdict>,
    pub candidate: GateRun,
}

impl GateReport {
    pub fn passed(&self) -> bool {
        self.verdict.as_ref().is_none_or(|verdict| verdict.passed)
    }
}

/// Send every prompt of `set` to `target`, greedy and seeded, and keep its tokens.
pub async fn ask(target: &GateTarget, set: &PromptSet, reporter: &dyn Reporter) -> Result<GateRun> {
    let subject = format!("gate on {}", target.layout);
    let mut answers = Vec::with_capacity(set.prompts.len());
    for (done, prompt) in set.prompts.iter().enumerate() {
        reporter.layer(&subject, "prompts", done as u64, set.prompts.len() as u64);
        let request = CompletionRequest {
            model: target.served_model.clone(),
            prompt: Prompt::Text(prompt.text.to_string()),
            max_tokens: set.max_tokens,
            temperature: 0.0,
            seed: Some(set.seed),
            stream: false,
            stream_options: None,
            ignore_eos: true,
            logprobs: Some(1),
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
    reporter.layer_done(&subject, "answered");
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

/// Ask `candidate`, and hold its answers against `source`. With the stored source and no
/// reference yet, the run becomes the reference (the first accepted run: a plain `bench --gate`
/// accepts what it measures). A single-node reference is never stored here: the caller records
/// the candidate (`ReferenceStore::record_first`) once it accepts it.
pub async fn check(
    candidate: &GateTarget,
    source: &ReferenceSource,
    references: &ReferenceStore,
    set: &PromptSet,
    logprob_tolerance: f64,
    reporter: &dyn Reporter,
) -> Result<GateReport> {
    reporter.step_started("gate", &format!("prompt set v{} on {}", set.version, candidate.layout));
    let (reference, described) = match source {
        ReferenceSource::Stored => match references.get(&candidate.model, set)? {
            Some(stored) => {
                let described = format!("the stored reference from image {} ({})", stored.image, stored.layout);
                (Some(stored), described)
            }
            None => (None, "none yet: this run is the reference".to_string()),
        },
        ReferenceSource::SingleNode(single) => {
            let single = GateTarget { model: candidate.model.clone(), ..(**single).clone() };
            (
                Some(ask(&single, set, reporter).await?),
                format!("{} at {}", single.layout, single.client.endpoint().base()),
            )
        }
    };
    let run = ask(candidate, set, reporter).await?;
    let verdict = match &reference {
        Some(reference) => Some(compare(reference, &run, logprob_tolerance)?),
        None => None,
    };
    let became_reference = reference.is_none() && references.record_first(&run)?;
    let report = GateReport {
        prompt_set: set.version,
        model: candidate.model.clone(),
        reference: described,
        became_reference,
        verdict,
        candidate: run,
    };
    let outcome = match &report.verdict {
        None => "recorded as the reference".to_string(),
        Some(verdict) if verdict.passed => format!("passed ({} tokens the same)", verdict.compared_tokens),
        Some(verdict) => format!("failed ({} prompts differ)", verdict.mismatches.len()),
    };
    reporter.step_finished("gate", &outcome);
    Ok(report)
}
