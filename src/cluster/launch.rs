//! `cluster launch MODEL` (and `launch MODEL` on one node): the cluster serves one model at one
//! OpenAI-compatible endpoint, with any engine. The discipline is the same for every engine and
//! lives here: every node is checked before anything starts (reachable, the toolbox and what its
//! role needs in it, the same image everywhere, an address on the cluster link, the model's files
//! where they will be read, nothing serving already); the model comes from the Hub once when a
//! node lacks it; then the engine's plan (`serving::plan`) is carried out step by step, each
//! step's commands at once and its proofs before the next (`launch_proof`); and any failure, or
//! Ctrl-C, stops everything the launch started on every node. What differs per engine (the
//! commands, what proves the workers joined, what the record holds) is the engine's plan.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use super::hub_gguf::{gguf_on_head, HeadGguf};
use super::interrupt::Interrupt;
use super::launch_proof::{prove, Proving};
use super::model::{cached_everywhere, ensure_everywhere, CachedEverywhere, ModelPullReport, ModelPullRequest};
pub use super::model_source::ModelSource;
use super::stop::stop_serving;
use crate::error::{Error, MultiError, Result};
use crate::model::gguf_pick::GgufPick;
use crate::model::identity::ModelIdentity;
use crate::model::repo_id::RepoId;
use crate::model::revision::{Commit, Revision};
use crate::node::{Node, NodeCalls};
use crate::reporter::Reporter;
use crate::secret::{shown_env, Secret};
use crate::serving::engine::{Backend, ServingEngine};
use crate::serving::llama::{gguf_parts, RPC_PROGRAMS};
use crate::serving::parallelism::Parallelism;
use crate::serving::plan::{flag_value, LaunchPlan, NodeFacts, NodePlan, PlanRequest, PlannedCommand, Start, Step};
use crate::serving::process::ProcessStart;
use crate::serving::ray::{RayStart, AUTH_TOKEN};
use crate::serving::record::{recorded_env, Role, ServingRecord};
use crate::serving::state::{FlagQuestion, ServeCheck, ServeCheckReport};
use crate::serving::{llama, vllm};
use crate::spec::Transport;

/// What to serve, and how.
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    pub engine: ServingEngine,
    pub toolbox: String,
    /// The model as the operator gave it.
    pub model: String,
    pub source: ModelSource,
    /// How vLLM spans the nodes; None: its multiprocessing executor when the image's vLLM has
    /// one across nodes, else Ray.
    pub backend: Option<Backend>,
    /// vLLM's tensor- and pipeline-parallel sizes; neither: chosen by the link.
    pub tp: Option<usize>,
    pub pp: Option<usize>,
    /// The address the endpoint listens on; None: every interface (as vLLM does by default).
    pub host: Option<Ipv4Addr>,
    pub port: u16,
    /// How long the engine may take to serve (loading weights takes minutes on a real node).
    pub timeout: Duration,
    /// Stop what already serves first, instead of refusing.
    pub replace: bool,
    pub dry_run: bool,
    /// Extra arguments for the engine's server (after `--`).
    pub extra: Vec<String>,
    /// The user's `-e KEY=VALUE`: they override the serving environment.
    pub env: BTreeMap<String, String>,
    pub hf_token: Option<Secret>,
    /// The endpoint's API key (`--api-key-file`, `STRIX_API_KEY`).
    pub api_key: Option<Secret>,
    /// The operator's `HF_*` settings, for a pull of the model (`model::hub_env`).
    pub hub_env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchReport {
    pub engine: ServingEngine,
    pub backend: Backend,
    pub model: String,
    /// The name the endpoint serves it under: as `/v1/models` says, once it serves.
    pub served: String,
    /// `http://HEAD:PORT/v1`.
    pub endpoint: String,
    /// vLLM's tensor-parallel size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<usize>,
    /// vLLM's pipeline-parallel size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pp: Option<usize>,
    /// What the launch chose that the operator did not say, and why (the backend, the parallelism).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub why: Vec<String>,
    /// What the launch found wrong without failing (RCCL over sockets on a RoCE link).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub nodes: Vec<NodePlan>,
    /// The order the commands start in, and what proves each step.
    pub steps: Vec<Step>,
    pub dry_run: bool,
    /// The endpoint wants an API key.
    pub api_key: bool,
    /// What served before was stopped first (`--replace`).
    pub replaced: bool,
    /// From the first start to serving.
    pub seconds_to_serve: Option<f64>,
    /// The model from the Hub, in the cache of every node that loads it; None for a path.
    pub hub_model: Option<HubModel>,
    /// A GGUF model by its content (llama.cpp; a Hub model's weights are `hub_model`'s commit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gguf: Option<ModelIdentity>,
}

/// A Hub model as the launch found or pulled it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HubModel {
    pub repo: RepoId,
    /// The commit that is served, offline, on every node that loads it; None in a dry run when a
    /// node lacks it (the launch would pull it first).
    pub commit: Option<Commit>,
    /// The pull this launch ran because a node lacked it.
    pub pulled: Option<ModelPullReport>,
}

impl LaunchReport {
    /// The report as it may be shown: the value of every `-e` naming a secret redacted (the nodes
    /// got it; the terminal, `--json` and logs do not).
    fn shown(mut self) -> LaunchReport {
        for command in self.nodes.iter_mut().flat_map(|node| node.commands.iter_mut()) {
            command.env = shown_env(&command.env);
        }
        self
    }

    /// A first request to try, naming the model as the server does; the key as a variable.
    pub fn curl_example(&self) -> String {
        let key = if self.api_key { " -H \"Authorization: Bearer $STRIX_API_KEY\"" } else { "" };
        format!(
            "curl {}/chat/completions -H 'Content-Type: application/json'{key} -d '{{\"model\": \"{}\", \"messages\": \
             [{{\"role\": \"user\", \"content\": \"Hello\"}}]}}'",
            self.endpoint, self.served
        )
    }
}

/// The flag of vLLM's that says its multiprocessing executor spans nodes.
const NNODES: &str = "--nnodes";

/// Launch on `nodes` (the first is the head). A failure or a signal stops what was started.
pub async fn launch(nodes: &[&dyn Node], request: &LaunchRequest, reporter: &dyn Reporter) -> Result<LaunchReport> {
    let backend = first_backend(request, nodes.len())?;
    let asked = parallelism_asked(request, nodes.len())?;
    // Both only look: asked together, they cost one round trip.
    let (checks, model) = tokio::join!(check_every_node(nodes, request, backend), look_up_model(nodes, request));
    let ((checks, backend, mut why), model) = (checks?, model?);
    refuse_when_serving(nodes, request, &checks)?;
    let split = (request.engine == ServingEngine::Vllm).then(|| {
        asked.unwrap_or_else(|| {
            let chosen = Parallelism::by_link(nodes.len(), &checks[0].cluster_link.transport);
            if nodes.len() > 1 {
                why.push(chosen.why.clone());
            }
            chosen
        })
    });
    let hub = model_in_every_cache(nodes, request, model, reporter).await?;
    // A Hub GGUF: its file(s) alone, on the head alone (a dry run downloads nothing).
    let gguf = match &request.source {
        ModelSource::HubGguf { repo, pick } if !request.dry_run => {
            let pull = ModelPullRequest {
                toolbox: request.toolbox.clone(),
                repo: repo.clone(),
                revision: None,
                hub_env: request.hub_env.clone(),
                hf_token: request.hf_token.clone(),
                gguf: Some(pick.clone()),
            };
            Some(gguf_on_head(nodes[0], &pull, reporter).await?)
        }
        _ => None,
    };
    let mut report = plan(nodes, &checks, request, backend, split.as_ref(), hub.as_ref(), gguf.as_ref())?;
    report.why = why;
    if request.dry_run {
        return Ok(report.shown());
    }
    for reason in &report.why {
        reporter.step_finished(nodes[0].name(), reason);
    }
    if checks.iter().any(|c| c.serving.as_ref().is_some_and(|s| s.active())) {
        reporter.step_started(nodes[0].name(), "stopping what serves now (--replace)");
        stop_serving(nodes, &request.toolbox).await.into_result()?;
        report.replaced = true;
    }

    let interrupt = Interrupt::watch();
    let started = Instant::now();
    let link = &checks[0].cluster_link.transport;
    let outcome = carry_out(nodes, request, &report, link, &interrupt, reporter).await;
    reporter.finish();
    match outcome {
        Ok((served, warnings)) => {
            report.served = served;
            report.warnings = warnings;
            report.seconds_to_serve = Some(started.elapsed().as_secs_f64());
            Ok(report.shown())
        }
        Err(error) => {
            reporter.warning("the launch failed: stopping what it started on every node");
            let cleanup = stop_serving(nodes, &request.toolbox).await;
            let stopped = cleanup.failed().is_empty();
            let outcome = cleanup.summary("Everything this launch started was stopped");
            Err(match error {
                Error::Interrupted { .. } if stopped => error,
                Error::Nodes(failed) => failed.with_outcome(outcome).into(),
                other => other.context(outcome),
            })
        }
    }
}

/// The backend a launch starts from: one node needs none; `--backend` is vLLM's; vLLM's default
/// across nodes is confirmed by the image (`settle_backend`).
fn first_backend(request: &LaunchRequest, nodes: usize) -> Result<Backend> {
    match (request.engine, request.backend) {
        (ServingEngine::LlamaCpp, Some(_)) => {
            Err(Error::Usage("--backend is vLLM's: llama.cpp spans the nodes with its RPC backend".into()))
        }
        _ if nodes == 1 => Ok(Backend::Single),
        (_, Some(backend)) => Ok(backend),
        (engine, None) => Ok(engine.cluster_backend()),
    }
}

/// `--tp`/`--pp` as asked (None: the link decides); llama.cpp splits layers its own way.
fn parallelism_asked(request: &LaunchRequest, nodes: usize) -> Result<Option<Parallelism>> {
    match request.engine {
        ServingEngine::LlamaCpp if request.tp.is_some() || request.pp.is_some() => Err(Error::Usage(
            "--tp and --pp are vLLM's: llama.cpp splits the model's layers over every node's GPU".into(),
        )),
        ServingEngine::LlamaCpp => Ok(None),
        ServingEngine::Vllm => Parallelism::asked(request.tp, request.pp, nodes),
    }
}

/// vLLM's multiprocessing executor spans nodes from the version that has `--nnodes`: the
/// default backend is kept when the image's vLLM names it (or could not be asked: a dry run of a
/// stopped toolbox), else Ray's executor takes over, and the report says so.
fn settle_backend(request: &LaunchRequest, backend: Backend, checks: &[ServeCheckReport]) -> (Backend, Vec<String>) {
    if backend != Backend::Mp || request.backend.is_some() {
        return (backend, Vec::new());
    }
    match checks.first().and_then(|head| head.flags.as_ref()) {
        Some(found) if !found.iter().any(|flag| flag == NNODES) => (
            Backend::Ray,
            vec![format!(
                "backend ray: the image's vLLM has no {NNODES} (its own executor spans one node only), so Ray's \
                 executor spans the nodes; a newer image runs without Ray"
            )],
        ),
        Some(_) => (Backend::Mp, vec!["backend mp: vLLM's own executor across the nodes, no Ray".into()]),
        None => (
            Backend::Mp,
            vec!["backend mp: vLLM's own executor across the nodes, no Ray (the stopped toolbox's vLLM was not \
                  asked whether it has --nnodes)"
                .into()],
        ),
    }
}

/// The node's role in a launch over `backend`.
fn role_of(backend: Backend, index: usize) -> Role {
    match (backend, index) {
        (Backend::Single, _) => Role::Single,
        (_, 0) => Role::Head,
        _ => Role::Worker,
    }
}

/// The programs a node's toolbox needs for its role, each a list of names any one of which will
/// do (llama.cpp's RPC server was renamed).
fn programs_needed(engine: ServingEngine, backend: Backend, role: Role) -> Vec<&'static [&'static str]> {
    match (engine, role) {
        (ServingEngine::Vllm, Role::Worker) if backend.runs_ray() => vec![&["ray"]],
        (ServingEngine::Vllm, _) if backend.runs_ray() => vec![&["vllm"], &["ray"]],
        (ServingEngine::Vllm, _) => vec![&["vllm"]],
        (ServingEngine::LlamaCpp, Role::Worker) => vec![&RPC_PROGRAMS],
        (ServingEngine::LlamaCpp, _) => vec![&["llama-server"]],
    }
}

/// The files of a model given by its path that node `index` reads: vLLM's ranks load it on every
/// node; llama.cpp's head alone (the workers get tensors over RPC).
fn model_paths(request: &LaunchRequest, index: usize) -> Result<Vec<String>> {
    match (&request.source, request.engine) {
        (ModelSource::Path(path), ServingEngine::Vllm) => Ok(vec![path.clone()]),
        (ModelSource::Path(path), ServingEngine::LlamaCpp) if index == 0 => gguf_parts(path),
        _ => Ok(Vec::new()),
    }
}

/// The GGUF file whose content names the weights a llama.cpp launch serves: the head's (the first
/// part of a split model), hashed where it is read; none in a dry run (nothing is started to read
/// it with).
fn gguf_to_identify(request: &LaunchRequest, index: usize) -> Option<String> {
    match (&request.source, request.engine) {
        (ModelSource::Path(path), ServingEngine::LlamaCpp) if index == 0 && !request.dry_run => Some(path.clone()),
        _ => None,
    }
}

/// Every node's check, refusing the launch on the first problem anywhere (nothing started yet);
/// the backend as the image settles it, and why.
async fn check_every_node(
    nodes: &[&dyn Node],
    request: &LaunchRequest,
    backend: Backend,
) -> Result<(Vec<ServeCheckReport>, Backend, Vec<String>)> {
    // vLLM's default backend may turn out to be Ray: what both need is asked at once.
    let unsettled = backend == Backend::Mp && request.backend.is_none();
    let mut asks = Vec::new();
    for index in 0..nodes.len() {
        let mut programs: Vec<String> = Vec::new();
        let backends: &[Backend] = if unsettled { &[Backend::Mp, Backend::Ray] } else { &[backend] };
        for backend in backends {
            for names in programs_needed(request.engine, *backend, role_of(*backend, index)) {
                for name in names.iter().map(|n| n.to_string()) {
                    if !programs.contains(&name) {
                        programs.push(name);
                    }
                }
            }
        }
        asks.push(ServeCheck {
            toolbox: request.toolbox.clone(),
            start: !request.dry_run,
            programs,
            paths: model_paths(request, index)?,
            flags: (unsettled && index == 0).then(|| FlagQuestion {
                help: ["vllm", "serve", "--help=all"].map(String::from).to_vec(),
                flags: vec![NNODES.to_string()],
            }),
            sha256_of: gguf_to_identify(request, index),
        });
    }
    let results = join_all(nodes.iter().zip(asks).map(|(node, ask)| node.call(ask))).await;
    let mut problems = MultiError::new("nothing was started");
    let mut answered = Vec::new();
    for (node, result) in nodes.iter().zip(results) {
        match result {
            Ok(check) => answered.push(check),
            Err(error) => problems.push(node.name(), error),
        }
    }
    let (backend, why) = settle_backend(request, backend, &answered);
    let mut checks = Vec::new();
    if problems.is_empty() {
        for (index, (node, check)) in nodes.iter().zip(answered).enumerate() {
            for error in node_problems(request, backend, index, &check, nodes.len()) {
                problems.push(node.name(), error);
            }
            checks.push(check);
        }
    }
    if problems.is_empty() {
        let images: Vec<&str> = checks.iter().filter_map(|c| c.image.as_deref()).collect();
        if images.windows(2).any(|pair| pair[0] != pair[1]) {
            let each: Vec<String> = nodes
                .iter()
                .zip(&checks)
                .map(|(n, c)| format!("{} {}", n.name(), crate::image::short_digest(c.image.as_deref().unwrap_or("-"))))
                .collect();
            problems.push(
                "the cluster",
                Error::Toolbox {
                    name: request.toolbox.clone(),
                    message: format!("the nodes run different toolbox images ({})", each.join(", ")),
                    fix: Some("`strix-toolbox cluster refresh` puts every node on one".into()),
                },
            );
        }
    }
    if problems.is_empty() {
        Ok((checks, backend, why))
    } else {
        Err(problems.into())
    }
}

/// What is wrong with one node for its part in the launch.
fn node_problems(
    request: &LaunchRequest,
    backend: Backend,
    index: usize,
    check: &ServeCheckReport,
    nodes: usize,
) -> Vec<Error> {
    let mut problems = Vec::new();
    if let Some(engine) = check.engine.filter(|engine| *engine != request.engine) {
        problems.push(Error::toolbox(
            &request.toolbox,
            format!("toolbox {} was made for {engine}, not {}", request.toolbox, request.engine),
            format!("`--engine {engine}`, or `--name` a toolbox made for {}", request.engine),
        ));
    }
    let needed =
        if check.looked { programs_needed(request.engine, backend, role_of(backend, index)) } else { Vec::new() };
    for names in needed {
        if !names.iter().any(|name| check.programs.iter().any(|p| p == name)) {
            problems.push(Error::toolbox(
                &request.toolbox,
                format!(
                    "toolbox {} has no {} (its role: {:?})",
                    request.toolbox,
                    names.join(" or "),
                    role_of(backend, index)
                ),
                format!(
                    "refresh it from an image made for {} (`strix-toolbox cluster refresh --engine {}`)",
                    request.engine, request.engine
                ),
            ));
        }
    }
    if !check.missing.is_empty() {
        problems.push(Error::Host {
            what: request.model.clone(),
            message: format!(
                "the model is not where the launch reads it: no {} in toolbox {}",
                check.missing.join(", "),
                request.toolbox
            ),
            fix: Some(match request.engine {
                ServingEngine::Vllm => "put the model at the same path on every node (or give its Hub id: the \
                                        launch then pulls it once and spreads it)"
                    .into(),
                ServingEngine::LlamaCpp => "put every part of the GGUF at that path on the head (the workers need \
                                            no copy)"
                    .into(),
            }),
        });
    }
    if nodes > 1 {
        problems.extend(check.cluster_link.address().err());
    }
    problems
}

/// Something of a launch runs on a node and `--replace` was not given: nothing starts.
fn refuse_when_serving(nodes: &[&dyn Node], request: &LaunchRequest, checks: &[ServeCheckReport]) -> Result<()> {
    let active: Vec<(&str, &ServingRecord)> = checks
        .iter()
        .zip(nodes)
        .filter_map(|(check, node)| check.serving.as_ref().filter(|s| s.active()).map(|s| (node.name(), &s.record)))
        .collect();
    if active.is_empty() || request.replace {
        return Ok(());
    }
    let names: Vec<&str> = active.iter().map(|(node, _)| *node).collect();
    let record = active[0].1;
    Err(Error::Toolbox {
        name: request.toolbox.clone(),
        message: format!(
            "{} already serve{} ({} with {} at {}); nothing was started",
            names.join(", "),
            if names.len() == 1 { "s" } else { "" },
            record.model,
            record.engine,
            record.endpoint
        ),
        fix: Some("`--replace` stops it first, or `strix-toolbox cluster stop`".into()),
    })
}

/// A Hub model (None for a path), with the revision asked for and whether the cache of every
/// node that loads it has it.
struct ModelLookup {
    repo: RepoId,
    revision: Option<Revision>,
    cached: Option<CachedEverywhere>,
}

async fn look_up_model(nodes: &[&dyn Node], request: &LaunchRequest) -> Result<Option<ModelLookup>> {
    let ModelSource::Hub(repo) = &request.source else { return Ok(None) };
    let revision = flag_value(&request.extra, "--revision").map(Revision::parse).transpose()?;
    let cached = cached_everywhere(nodes, repo, revision.as_ref().unwrap_or(&Revision::main())).await?;
    Ok(Some(ModelLookup { repo: repo.clone(), revision, cached }))
}

/// A Hub model in every node's cache before anything starts: pulled when a node lacks it (a dry
/// run only looks).
async fn model_in_every_cache(
    nodes: &[&dyn Node],
    request: &LaunchRequest,
    model: Option<ModelLookup>,
    reporter: &dyn Reporter,
) -> Result<Option<(RepoId, Option<CachedEverywhere>)>> {
    let Some(ModelLookup { repo, revision, cached }) = model else { return Ok(None) };
    if request.dry_run || cached.is_some() {
        return Ok(Some((repo, cached)));
    }
    let pull = ModelPullRequest {
        toolbox: request.toolbox.clone(),
        repo: repo.clone(),
        revision,
        hub_env: request.hub_env.clone(),
        hf_token: request.hf_token.clone(),
        gguf: None,
    };
    Ok(Some((repo, Some(ensure_everywhere(nodes, &pull, reporter).await?))))
}

/// The engine's plan for these nodes, as the launch reports it, with no effect.
fn plan(
    nodes: &[&dyn Node],
    checks: &[ServeCheckReport],
    request: &LaunchRequest,
    backend: Backend,
    split: Option<&Parallelism>,
    hub_model: Option<&(RepoId, Option<CachedEverywhere>)>,
    gguf: Option<&HeadGguf>,
) -> Result<LaunchReport> {
    let cached = hub_model.and_then(|(_, cached)| cached.as_ref());
    let facts: Vec<NodeFacts> = nodes
        .iter()
        .zip(checks)
        .enumerate()
        .map(|(index, (node, check))| NodeFacts {
            node: node.name().to_string(),
            link_ip: check.cluster_link.address().unwrap_or(Ipv4Addr::LOCALHOST),
            transport: check.cluster_link.transport.clone(),
            hub_cache: cached.map(|c| c.caches[index].clone()),
            programs: check.programs.clone(),
        })
        .collect();
    let served = request
        .engine
        .name_flags()
        .iter()
        .find_map(|flag| flag_value(&request.extra, flag))
        .unwrap_or(&request.model)
        .to_string();
    let mut secrets = Vec::new();
    if request.hf_token.is_some() {
        secrets.push("HF_TOKEN".to_string());
    }
    if request.api_key.is_some() {
        secrets.push(request.engine.api_key_env().to_string());
    }
    if backend.runs_ray() {
        secrets.push(AUTH_TOKEN.to_string());
    }
    let asked = PlanRequest {
        // A Hub GGUF is read from the head's cache; anything else as given.
        model: gguf.map_or_else(|| request.model.clone(), |gguf| gguf.path.clone()),
        served: served.clone(),
        tp: split.map(|s| s.tp),
        host: request.host.unwrap_or(Ipv4Addr::UNSPECIFIED).to_string(),
        port: request.port,
        extra: request.extra.clone(),
        hub_commit: cached.map(|c| c.commit.to_string()),
        env: request.env.clone(),
        secrets,
    };
    let LaunchPlan { engine, backend, nodes: planned, steps } = match request.engine {
        ServingEngine::Vllm => {
            vllm::plan(&facts, &asked, backend, split.unwrap_or(&Parallelism::by_link(1, &facts[0].transport)))
        }
        ServingEngine::LlamaCpp => llama::plan(&facts, &asked, backend),
    };
    let probe = request.host.filter(|host| !host.is_unspecified()).unwrap_or(facts[0].link_ip);
    Ok(LaunchReport {
        engine,
        backend,
        model: request.model.clone(),
        served,
        endpoint: ServingRecord::endpoint_of(probe, request.port),
        tp: split.map(|s| s.tp),
        pp: split.map(|s| s.pp),
        why: Vec::new(),
        warnings: Vec::new(),
        nodes: planned,
        steps,
        dry_run: request.dry_run,
        api_key: request.api_key.is_some(),
        replaced: false,
        seconds_to_serve: None,
        hub_model: match (hub_model, gguf, &request.source) {
            (Some((repo, found)), _, _) => Some(HubModel {
                repo: repo.clone(),
                commit: found.as_ref().map(|c| c.commit.clone()),
                pulled: found.as_ref().and_then(|c| c.pull.clone()),
            }),
            (None, Some(gguf), _) => Some(HubModel {
                repo: gguf.repo.clone(),
                commit: Some(gguf.pull.commit.clone()),
                pulled: Some(gguf.pull.clone()),
            }),
            // A dry run: the head would pull it first.
            (None, None, ModelSource::HubGguf { repo, .. }) => {
                Some(HubModel { repo: repo.clone(), commit: None, pulled: None })
            }
            (None, None, _) => None,
        },
        gguf: gguf.map(|gguf| gguf.identity.clone()).or_else(|| {
            checks[0].sha256.clone().map(|sha256| ModelIdentity::Gguf {
                name: std::path::Path::new(&request.model)
                    .file_name()
                    .map_or_else(|| request.model.clone(), |name| name.to_string_lossy().into_owned()),
                sha256,
            })
        }),
    })
}

/// The plan's steps in order, each proven before the next; the name the endpoint serves under,
/// and what the proofs found wrong without failing.
async fn carry_out(
    nodes: &[&dyn Node],
    request: &LaunchRequest,
    plan: &LaunchReport,
    transport: &Transport,
    interrupt: &Interrupt,
    reporter: &dyn Reporter,
) -> Result<(String, Vec<String>)> {
    let mut secrets: BTreeMap<String, Secret> = BTreeMap::new();
    if let Some(token) = &request.hf_token {
        secrets.insert("HF_TOKEN".into(), token.clone());
    }
    if let Some(key) = &request.api_key {
        secrets.insert(plan.engine.api_key_env().into(), key.clone());
    }
    if plan.backend.runs_ray() {
        secrets.insert(AUTH_TOKEN.into(), Secret::random()?);
    }
    let started = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    // A GGUF by its content (a Hub GGUF's commit holds every quant); else the commit every
    // node's cache has, which the engine loads offline.
    let identity = plan.gguf.clone().or_else(|| {
        plan.hub_model.as_ref().and_then(|hub| {
            Some(ModelIdentity::Hub { repo: hub.repo.to_string(), commit: hub.commit.as_ref()?.to_string() })
        })
    });
    let probe =
        SocketAddr::from((request.host.filter(|h| !h.is_unspecified()).unwrap_or(plan.nodes[0].link_ip), request.port));
    let mut proving = Proving {
        nodes,
        toolbox: &request.toolbox,
        engine: plan.engine,
        planned: &plan.nodes,
        probe,
        api_key: request.api_key.as_ref(),
        timeout: request.timeout,
        interrupt,
        reporter,
        served: plan.served.clone(),
        transport: transport.clone(),
        warnings: Vec::new(),
    };
    for step in &plan.steps {
        let starts = step.starts.iter().map(|(node, command)| {
            let launched = &plan.nodes[*node];
            let command = &launched.commands[*command];
            reporter.step_started(&launched.node, &describe(command, launched));
            let mut record = ServingRecord::new(
                &request.toolbox,
                &request.model,
                &plan.served,
                plan.engine,
                plan.backend,
                launched.role,
                plan.nodes.len(),
                request.port,
                launched.link_ip,
                plan.nodes[0].link_ip,
                &plan.endpoint,
            );
            record.tp = plan.tp;
            record.pp = plan.pp;
            record.transport = (plan.nodes.len() > 1).then(|| transport.clone());
            record.api_key = plan.api_key;
            record.started = started.clone();
            record.identity = identity.clone();
            record.extra = request.extra.clone();
            record.env = recorded_env(&request.env);
            record.file = match &request.source {
                ModelSource::HubGguf { pick: GgufPick::File(name), .. } => Some(name.clone()),
                _ => None,
            };
            start(nodes[*node], request, command, record, &secrets)
        });
        let mut failed = MultiError::new("the launch could not start everything");
        for ((node, _), result) in step.starts.iter().zip(join_all(starts).await) {
            if let Err(error) = result {
                failed.push(nodes[*node].name(), error);
            }
        }
        if !failed.is_empty() {
            return Err(failed.into());
        }
        proving.stopped("the start")?;
        for proof in &step.proofs {
            prove(&mut proving, proof).await?;
        }
    }
    Ok((proving.served, proving.warnings))
}

/// One planned command, started on its node through the call its kind takes.
async fn start(
    node: &dyn Node,
    request: &LaunchRequest,
    command: &PlannedCommand,
    record: ServingRecord,
    secrets: &BTreeMap<String, Secret>,
) -> Result<()> {
    // vLLM's compile cache is cleared by what starts first on the node: Ray where it runs (its
    // actors compile), else `vllm serve`.
    let first_of_vllm = match command.start {
        Start::Ray { .. } => true,
        Start::Process { .. } => !record.backend.runs_ray(),
    };
    let fresh_compile_cache = record.engine == ServingEngine::Vllm && first_of_vllm;
    match &command.start {
        Start::Ray { role } => {
            let token =
                secrets.get(AUTH_TOKEN).cloned().ok_or_else(|| Error::Internal("Ray without its token".into()))?;
            let call = RayStart {
                toolbox: request.toolbox.clone(),
                role: role.clone(),
                env: command.env.clone(),
                token,
                fresh_compile_cache,
                record,
            };
            node.call(call).await.map(drop)
        }
        Start::Process { name, listens } => {
            let call = ProcessStart {
                toolbox: request.toolbox.clone(),
                name: name.clone(),
                argv: command.argv.clone(),
                env: command.env.clone(),
                secrets: command.secret_env.iter().filter_map(|n| Some((n.clone(), secrets.get(n)?.clone()))).collect(),
                listens: *listens,
                fresh_compile_cache,
                record,
            };
            node.call(call).await.map(drop)
        }
    }
}

/// What the progress says a command does.
fn describe(command: &PlannedCommand, node: &NodePlan) -> String {
    match &command.start {
        Start::Ray { role: crate::serving::ray::RayRole::Head } => format!("starting Ray's head on {}", node.link_ip),
        Start::Ray { .. } => format!("starting a Ray worker on {}", node.link_ip),
        Start::Process { listens: Some(address), .. } => format!("starting {} on {address}", command.argv[0]),
        Start::Process { .. } => command.argv.iter().take(3).cloned().collect::<Vec<_>>().join(" "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(engine: ServingEngine, tp: Option<usize>) -> LaunchRequest {
        LaunchRequest {
            engine,
            toolbox: "vllm".into(),
            model: "acme/tiny".into(),
            source: ModelSource::of("acme/tiny"),
            backend: None,
            tp,
            pp: None,
            host: None,
            port: 8000,
            timeout: Duration::from_secs(60),
            replace: false,
            dry_run: true,
            extra: Vec::new(),
            env: BTreeMap::new(),
            hf_token: None,
            api_key: None,
            hub_env: BTreeMap::new(),
        }
    }

    #[test]
    fn tp_and_pp_are_vllms_and_fill_the_nodes() {
        assert_eq!(parallelism_asked(&request(ServingEngine::Vllm, None), 4).unwrap(), None, "the link decides");
        assert_eq!(parallelism_asked(&request(ServingEngine::Vllm, Some(2)), 4).unwrap().map(|p| p.pp), Some(2));
        let error = parallelism_asked(&request(ServingEngine::Vllm, Some(3)), 2).unwrap_err();
        assert!(matches!(error, Error::Usage(_)) && error.to_string().contains("--tp 3"), "{error}");
        assert_eq!(parallelism_asked(&request(ServingEngine::LlamaCpp, None), 3).unwrap(), None);
        assert!(matches!(parallelism_asked(&request(ServingEngine::LlamaCpp, Some(2)), 3), Err(Error::Usage(_))));
    }

    #[test]
    fn the_image_says_whether_vllm_spans_nodes_without_ray() {
        let vllm = request(ServingEngine::Vllm, None);
        assert_eq!(first_backend(&vllm, 3).unwrap(), Backend::Mp);
        assert_eq!(first_backend(&vllm, 1).unwrap(), Backend::Single);
        let mut llama = request(ServingEngine::LlamaCpp, None);
        llama.backend = Some(Backend::Ray);
        assert!(matches!(first_backend(&llama, 2), Err(Error::Usage(_))));

        let answered = |flags: Option<Vec<String>>| {
            let mut check: ServeCheckReport = serde_json::from_value(serde_json::json!({
                "toolbox": "vllm", "image": null, "started": false, "serving": null, "transport": {"kind": "ethernet_tcp"}
            }))
            .unwrap();
            check.flags = flags;
            vec![check]
        };
        let (backend, why) = settle_backend(&vllm, Backend::Mp, &answered(Some(Vec::new())));
        assert_eq!(backend, Backend::Ray);
        assert!(why[0].contains("no --nnodes"), "{why:?}");
        assert_eq!(settle_backend(&vllm, Backend::Mp, &answered(Some(vec![NNODES.into()]))).0, Backend::Mp);
        assert_eq!(settle_backend(&vllm, Backend::Mp, &answered(None)).0, Backend::Mp, "not asked: kept");
        let mut asked = vllm.clone();
        asked.backend = Some(Backend::Mp);
        assert_eq!(settle_backend(&asked, Backend::Mp, &answered(Some(Vec::new()))), (Backend::Mp, Vec::new()));
    }

    #[test]
    fn each_role_needs_its_programs_and_the_model_where_it_is_read() {
        assert_eq!(programs_needed(ServingEngine::Vllm, Backend::Ray, Role::Head), [&["vllm"][..], &["ray"][..]]);
        assert_eq!(programs_needed(ServingEngine::Vllm, Backend::Single, Role::Single), [&["vllm"][..]]);
        assert_eq!(programs_needed(ServingEngine::LlamaCpp, Backend::Rpc, Role::Worker), [&RPC_PROGRAMS[..]]);
        let mut llama = request(ServingEngine::LlamaCpp, None);
        llama.source = ModelSource::Path("/m/q-00001-of-00002.gguf".into());
        assert_eq!(model_paths(&llama, 0).unwrap().len(), 2, "every part, on the head");
        assert!(model_paths(&llama, 1).unwrap().is_empty(), "the workers need no copy");
        let mut vllm = request(ServingEngine::Vllm, None);
        vllm.source = ModelSource::Path("/models/tiny".into());
        assert_eq!(model_paths(&vllm, 2).unwrap(), ["/models/tiny"], "every vLLM rank reads it");
    }

    #[test]
    fn a_secret_given_with_e_reaches_the_nodes_and_no_report() {
        let nodes = [NodeFacts {
            node: "node1".into(),
            link_ip: Ipv4Addr::new(192, 168, 2, 1),
            transport: crate::spec::Transport::ThunderboltTcp { netdev: "thunderbolt0".into() },
            hub_cache: None,
            programs: vec!["vllm".into()],
        }];
        let asked = PlanRequest {
            model: "/models/tiny".into(),
            served: "/models/tiny".into(),
            tp: Some(1),
            host: "0.0.0.0".into(),
            port: 8000,
            extra: Vec::new(),
            hub_commit: None,
            env: [("HF_TOKEN", "hf_s3cret"), ("TOKENIZERS_PARALLELISM", "false")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
            secrets: Vec::new(),
        };
        let one = Parallelism { tp: 1, pp: 1, why: String::new() };
        let plan = vllm::plan(&nodes, &asked, Backend::Single, &one);
        assert_eq!(plan.nodes[0].commands[0].env["HF_TOKEN"], "hf_s3cret", "the node gets it");
        let report = LaunchReport {
            engine: plan.engine,
            backend: plan.backend,
            model: asked.model.clone(),
            served: asked.served.clone(),
            endpoint: "http://192.168.2.1:8000/v1".into(),
            tp: Some(1),
            pp: None,
            why: Vec::new(),
            warnings: Vec::new(),
            nodes: plan.nodes,
            steps: plan.steps,
            dry_run: true,
            api_key: false,
            replaced: false,
            seconds_to_serve: None,
            hub_model: None,
            gguf: None,
        };
        let shown = report.shown();
        let json = serde_json::to_string(&shown).unwrap();
        assert!(!json.contains("hf_s3cret") && !format!("{shown:?}").contains("hf_s3cret"), "{json}");
        assert_eq!(shown.nodes[0].commands[0].env["HF_TOKEN"], crate::secret::REDACTED);
        assert_eq!(shown.nodes[0].commands[0].env["TOKENIZERS_PARALLELISM"], "false");
    }
}
