//! The operation behind `bench` and `cluster bench`: find the service and what decides its
//! figures (from its launch's record on its head: endpoint, engine, model identity, image, TP,
//! nodes, transport; or an endpoint named by hand), run the gate and the load through the
//! cluster's endpoint (the router) from the cluster's head, and keep the result here. The same
//! code serves one node (this machine as the head) and a cluster (the head over ssh).

use std::path::PathBuf;

use chrono::Utc;
use serde::{Deserialize, Serialize};

use crate::bench::gate::{judge, GateReport, GateRun, Reference, ReferenceStore, PROMPT_SET};
use crate::bench::key::{BenchKey, EngineRef, LinkTransport, ModelIdentity};
use crate::bench::node::{BenchLevel, EndpointAccess, GateAsk};
use crate::bench::prompt::{self, PromptForm};
use crate::bench::result::BenchResult;
use crate::bench::store::BenchStore;
use crate::cluster::stop::services_on;
use crate::error::{Error, Result};
use crate::node::{Node, NodeCalls};
use crate::reporter::Reporter;
use crate::secret::Secret;
use crate::serving::record::{Role, ServingRecord};
use crate::serving::service_name::{the_only_one, ServiceName};
use crate::serving::state::ServingState;
use crate::spec::Transport;

/// What to measure.
#[derive(Debug, Clone)]
pub enum Serving {
    /// A service `launch` (or `cluster launch`) serves, as its record on its head says (None: the
    /// only one that serves).
    Launched { service: Option<ServiceName> },
    /// An endpoint strix-toolbox did not launch, described by the caller; keyed as one node.
    Endpoint { url: String, engine: EngineRef, model: ModelIdentity, image: String, served_model: Option<String> },
}

/// What the gate holds the answers against.
#[derive(Debug, Clone, PartialEq)]
pub enum GateReference {
    /// The model's first accepted run, kept beside the results; without one, this run becomes it.
    Stored,
    /// The model's stored reference if there is one; else the answers go unchecked, and none is
    /// kept from them (a canary's first image must not become the yardstick of the next).
    StoredIfAny,
    /// One node serving the same model alone, at this endpoint (the caller launched it).
    SingleNode { url: String },
    /// Answers taken before (a canary's: the image it replaces, just before the swap).
    Taken { run: Box<GateRun>, described: String },
}

#[derive(Debug, Clone)]
pub struct BenchRequest {
    pub serving: Serving,
    pub api_key: Option<Secret>,
    pub concurrency: Vec<u32>,
    pub requests: u32,
    pub input_len: u32,
    pub output_len: u32,
    pub prompt_form: PromptForm,
    /// Run the gate first (and stop there when it fails).
    pub gate: Option<GateReference>,
    pub logprob_tolerance: f64,
    /// Measure the load (false: the gate only).
    pub load: bool,
}

/// What `bench` reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    pub gate: Option<GateReport>,
    pub result: Option<BenchResult>,
    /// Where the result was kept.
    pub saved: Option<PathBuf>,
}

impl BenchReport {
    /// The gate passed, or was not asked.
    pub fn passed(&self) -> bool {
        self.gate.as_ref().is_none_or(GateReport::passed)
    }
}

/// What serves, found.
struct Found {
    key: BenchKey,
    endpoint: String,
    served_model: String,
}

/// Measure on `nodes` (the first, the cluster's head, sends the requests: the router runs there).
pub async fn bench(
    nodes: &[&dyn Node],
    request: &BenchRequest,
    store: &BenchStore,
    reporter: &dyn Reporter,
) -> Result<BenchReport> {
    if request.load && (request.concurrency.is_empty() || request.concurrency.contains(&0) || request.requests == 0) {
        return Err(Error::Usage("--concurrency needs levels of 1 or more and --requests 1 or more. Fix: e.g. --concurrency 1,4,16 --requests 16".into()));
    }
    if request.input_len == 0 || request.output_len == 0 {
        return Err(Error::Usage("--input-len and --output-len must be 1 or more".into()));
    }
    let head = nodes[0];
    let found = find(nodes, request, reporter).await?;
    let access = |url: &str| EndpointAccess { url: url.to_string(), api_key: request.api_key.clone() };
    let mut report = BenchReport { gate: None, result: None, saved: None };
    if let Some(reference) = &request.gate {
        reporter.step_started("gate", &format!("prompt set v{} on {}", PROMPT_SET.version, found.key.layout()));
        let ask = |url: &str, layout: String| GateAsk {
            endpoint: access(url),
            engine: found.key.engine,
            served_model: found.served_model.clone(),
            model: found.key.model.clone(),
            image: found.key.image.clone(),
            layout,
        };
        let against = match reference {
            GateReference::Stored => Reference::Stored { keep_first: true },
            GateReference::StoredIfAny => Reference::Stored { keep_first: false },
            GateReference::SingleNode { url } => {
                let run = head.call(ask(url, "one node alone".into())).await?;
                Reference::Run { described: format!("{} at {}", run.layout, run.endpoint), run: Box::new(run) }
            }
            GateReference::Taken { run, described } => {
                Reference::Run { run: run.clone(), described: described.clone() }
            }
        };
        let candidate = head.call(ask(&found.endpoint, found.key.layout())).await?;
        let references = ReferenceStore::in_bench_dir(store.dir());
        let gate = judge(candidate, against, &references, &PROMPT_SET, request.logprob_tolerance)?;
        reporter.step_finished("gate", &gate_outcome(&gate));
        let passed = gate.passed();
        report.gate = Some(gate);
        if !passed {
            return Ok(report);
        }
    }
    if !request.load {
        return Ok(report);
    }
    let mut levels = Vec::new();
    let run_start = prompt::run_start();
    for (index, &concurrency) in request.concurrency.iter().enumerate() {
        let subject = format!("concurrency {concurrency}");
        reporter.step_started(
            "bench",
            &format!(
                "{subject}: {} requests of {} → {} tokens",
                request.requests, request.input_len, request.output_len
            ),
        );
        let level = head
            .call(BenchLevel {
                endpoint: access(&found.endpoint),
                engine: found.key.engine,
                served_model: found.served_model.clone(),
                input_len: request.input_len,
                output_len: request.output_len,
                concurrency,
                requests: request.requests,
                first_index: run_start + 1 + index * request.requests as usize,
                warm_up: index == 0,
                prompt_form: request.prompt_form,
            })
            .await?;
        let figures = &level.figures;
        reporter.step_finished(
            "bench",
            &format!(
                "{subject}: {:.1} output tok/s, TTFT p50 {:.0} ms, {} failed",
                figures.output_throughput, figures.ttft_ms.p50, figures.failed
            ),
        );
        levels.push(level);
    }
    let result =
        BenchResult::new(found.key, &found.endpoint, &found.served_model, request.requests, levels, Utc::now());
    report.saved = Some(store.save(&result)?);
    report.result = Some(result);
    Ok(report)
}

/// The gate's answers alone, from what `request` names (the gate's prompt set, nothing judged,
/// nothing kept): what a canary holds the next image's answers against.
pub async fn answers(nodes: &[&dyn Node], request: &BenchRequest, reporter: &dyn Reporter) -> Result<GateRun> {
    let head = nodes[0];
    let found = find(nodes, request, reporter).await?;
    reporter.step_started("gate", &format!("prompt set v{} on {}", PROMPT_SET.version, found.key.layout()));
    let run = head
        .call(GateAsk {
            endpoint: EndpointAccess { url: found.endpoint.clone(), api_key: request.api_key.clone() },
            engine: found.key.engine,
            served_model: found.served_model.clone(),
            model: found.key.model.clone(),
            image: found.key.image.clone(),
            layout: found.key.layout(),
        })
        .await?;
    let tokens: usize = run.answers.iter().map(|answer| answer.tokens.len()).sum();
    reporter.step_finished("gate", &format!("{tokens} tokens taken from image {}", found.key.short_image()));
    Ok(run)
}

fn gate_outcome(gate: &GateReport) -> String {
    match &gate.verdict {
        None if gate.unchecked() => "unchecked: no reference to hold the answers against".to_string(),
        None => "recorded as the model's reference".to_string(),
        Some(verdict) if verdict.passed => format!(
            "passed: {} tokens the same as {}{}",
            verdict.compared_tokens,
            gate.reference,
            ties(verdict.ties.len())
        ),
        Some(verdict) => format!("failed: {} prompt(s) answer differently", verdict.mismatches.len()),
    }
}

/// How `record`'s launch split the model: (TP, PP) as recorded, else (a record from before every
/// launch said both) one rank per node, TP × PP = nodes: a llama.cpp layer split over N nodes is
/// TP 1 × PP N.
fn split(record: &ServingRecord) -> (usize, usize) {
    let tp = record.tp.unwrap_or(1).max(1);
    let pp = record.pp.unwrap_or(record.nodes / tp).max(1);
    (tp, pp)
}

/// "; 2 prompts ended at a near-tie" (nothing when none did).
pub fn ties(count: usize) -> String {
    match count {
        0 => String::new(),
        1 => "; 1 prompt ended at a near-tie".to_string(),
        _ => format!("; {count} prompts ended at a near-tie"),
    }
}

async fn find(nodes: &[&dyn Node], request: &BenchRequest, reporter: &dyn Reporter) -> Result<Found> {
    let head = nodes[0];
    let key = |image: String, engine, model, (tp, pp): (usize, usize), nodes: usize, transport| BenchKey {
        image,
        engine,
        model,
        tensor_parallel: tp as u32,
        pipeline_parallel: pp as u32,
        nodes: nodes as u32,
        transport,
        input_len: request.input_len,
        output_len: request.output_len,
        prompts: request.prompt_form,
    };
    match &request.serving {
        Serving::Endpoint { url, engine, model, image, served_model } => {
            let client = crate::bench::client::ApiClient::new(
                crate::bench::client::Endpoint::new(url, request.api_key.clone())?,
                crate::bench::client::Timeouts::default(),
            )?;
            let served_model = crate::bench::served_model::served_model(&client, served_model.as_deref()).await?;
            let endpoint = client.endpoint().base().to_string();
            Ok(Found {
                key: key(image.clone(), *engine, model.clone(), (1, 1), 1, LinkTransport::Local),
                endpoint,
                served_model,
            })
        }
        Serving::Launched { service } => {
            reporter.step_started(head.name(), "what the cluster serves");
            let mut serving = Vec::new();
            for (_, services) in services_on(nodes).await {
                // The service's head: what serves its endpoint runs there.
                let serves = |state: &ServingState| {
                    state.record.role != Role::Worker
                        && state.alive.iter().any(|p| p == state.record.engine.profile().server)
                };
                serving.extend(services?.into_iter().filter(serves));
            }
            let mut names: Vec<&str> = serving.iter().map(|state| state.record.service.as_str()).collect();
            names.sort();
            names.dedup();
            let name = match service {
                Some(name) => Some(name.as_str()),
                None => the_only_one(&names, "strix-toolbox cluster bench --model NAME")?,
            };
            let state =
                name.and_then(|name| serving.iter().find(|state| state.record.service == name)).ok_or_else(|| {
                    let what = name.map_or_else(|| "nothing".to_string(), |name| format!("nothing as {name}"));
                    Error::toolbox(
                        name.unwrap_or("-"),
                        format!("the cluster serves {what} now"),
                        "launch a model first (`strix-toolbox launch MODEL`, or `cluster launch MODEL`)",
                    )
                })?;
            let record = state.record.clone();
            let model = record.identity.clone().ok_or_else(|| {
                Error::toolbox(
                    record.service.clone(),
                    format!(
                        "the launch of {} does not say which weights serve (a model given as a path, or a launch by an older strix-toolbox), so its figures and answers could be held against another model's",
                        record.model
                    ),
                    "launch a Hub model (its commit names its weights) or a GGUF file, with this strix-toolbox",
                )
            })?;
            let image = record.image.clone();
            let transport = match (record.nodes, &record.transport) {
                (1, _) | (_, None) => LinkTransport::Local,
                (_, Some(Transport::Roce { .. })) => LinkTransport::Roce,
                (_, Some(Transport::ThunderboltTcp { .. })) => LinkTransport::ThunderboltTcp,
                (_, Some(Transport::EthernetTcp)) => LinkTransport::EthernetTcp,
            };
            let key = key(image, record.engine, model, split(&record), record.nodes, transport);
            reporter.step_finished(head.name(), &format!("{} with {} on {}", key.model, key.engine, key.layout()));
            // Through the endpoint: the router sends it to the service its clients name.
            Ok(Found { key, endpoint: record.endpoint.clone(), served_model: record.service.clone() })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::serving::engine::Backend;
    use crate::serving::record::Role;

    fn record(engine: EngineRef, nodes: usize, tp: Option<usize>, pp: Option<usize>) -> ServingRecord {
        let head = Ipv4Addr::new(192, 168, 2, 1);
        let mut record = ServingRecord::new(
            "m",
            "t",
            "m",
            "m",
            engine,
            Backend::Rpc,
            Role::Head,
            nodes,
            8001,
            head,
            head,
            "http://x/v1",
        );
        (record.tp, record.pp) = (tp, pp);
        record
    }

    #[test]
    fn the_split_is_keyed_as_launched_and_older_records_as_one_rank_per_node() {
        use crate::serving::{llama::LLAMA_CPP, vllm::VLLM};
        assert_eq!(split(&record(VLLM, 3, Some(1), Some(3))), (1, 3), "vLLM split by layers over 3 nodes");
        assert_eq!(split(&record(LLAMA_CPP, 2, Some(1), Some(2))), (1, 2), "llama.cpp's layers over 2 nodes");
        assert_eq!(split(&record(LLAMA_CPP, 2, None, None)), (1, 2), "an older llama.cpp record");
        assert_eq!(split(&record(VLLM, 2, Some(2), None)), (2, 1), "an older vLLM record");
        assert_eq!(split(&record(VLLM, 1, None, None)), (1, 1));
    }
}
