//! The bench's and the gate's calls to the node that reaches the endpoint: the head (the machine
//! that runs `cluster bench` may not be on the cluster link), or this machine. Each is one typed
//! call (`BenchLevel`, `GateAsk`); the API key travels in the call, as HF_TOKEN does, never in an
//! argv, and is never part of a reply.

use serde::{Deserialize, Serialize};

use super::client::{ApiClient, Endpoint, Timeouts};
use super::gate::{self, GateRun, GateTarget, PROMPT_SET};
use super::key::{EngineRef, ModelIdentity};
use super::load::{self, LevelResult, LoadSpec};
use super::prompt::{PromptForm, PromptTokens};
use crate::error::Result;
use crate::secret::Secret;

/// Where the API is, as the node reaches it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointAccess {
    /// `http://HOST:PORT/v1`.
    pub url: String,
    pub api_key: Option<Secret>,
}

impl EndpointAccess {
    fn client(&self) -> Result<ApiClient> {
        ApiClient::new(Endpoint::new(&self.url, self.api_key.clone())?, Timeouts::default())
    }
}

/// One concurrency level of a bench.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BenchLevel {
    pub endpoint: EndpointAccess,
    pub engine: EngineRef,
    /// The model as the server names it.
    pub served_model: String,
    pub input_len: u32,
    pub output_len: u32,
    pub concurrency: u32,
    pub requests: u32,
    /// The first request's prompt index (each level of a run continues where the last ended).
    pub first_index: usize,
    /// Send the untimed first request before the level (the run's first level does).
    pub warm_up: bool,
    /// Absent from a head of an earlier release: token ids, as it sent them.
    #[serde(default)]
    pub prompt_form: PromptForm,
}

/// The gate's prompt set, asked of one endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateAsk {
    pub endpoint: EndpointAccess,
    pub engine: EngineRef,
    pub served_model: String,
    pub model: ModelIdentity,
    pub image: String,
    /// How it is served ("TP2 PP1 on 2 nodes over RoCE", "one node alone").
    pub layout: String,
}

pub async fn bench_level(call: &BenchLevel) -> Result<LevelResult> {
    let client = call.endpoint.client()?;
    let prompts = PromptTokens::from_server(&client, call.engine, &call.served_model).await?;
    let spec = LoadSpec {
        model: call.served_model.clone(),
        input_len: call.input_len,
        output_len: call.output_len,
        ignore_eos: true,
        temperature: 0.0,
        seed: None,
        logprobs: None,
        engine: call.engine,
        prompt_form: call.prompt_form,
    };
    if call.warm_up {
        load::warm_up(&client, &prompts, &spec).await?;
    }
    load::level(&client, &prompts, &spec, call.concurrency, call.requests, call.first_index).await
}

pub async fn gate_ask(call: &GateAsk) -> Result<GateRun> {
    let target = GateTarget {
        client: call.endpoint.client()?,
        served_model: call.served_model.clone(),
        model: call.model.clone(),
        engine: call.engine,
        image: call.image.clone(),
        layout: call.layout.clone(),
    };
    gate::ask(&target, &PROMPT_SET).await
}
