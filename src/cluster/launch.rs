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
use super::stop::stop_serving;
use crate::error::{Error, MultiError, Result};
use crate::model::gguf_pick::GgufPick;
use crate::model::identity::ModelIdentity;
use crate::model::repo_id::RepoId;
use crate::model::revision::{Commit, Revision};
use crate::node::{Node, NodeCalls};
use crate::reporter::Reporter;
use crate::secret::{shown_env, Secret};
use crate::serving::engine::{Backend, EngineRef};
pub use crate::serving::model_source::ModelSource;
use crate::serving::parallelism::Parallelism;
use crate::serving::plan::{flag_value, LaunchPlan, NodeFacts, NodePlan, PlanRequest, PlannedCommand, Start, Step};
use crate::serving::process::ProcessStart;
use crate::serving::ray::{RayStart, AUTH_TOKEN};
use crate::serving::record::{recorded_env, ServingRecord};
use crate::serving::state::{ServeCheck, ServeCheckReport};
use crate::spec::Transport;

/// What to serve, and how.
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    pub engine: EngineRef,
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
    pub engine: EngineRef,
    pub backend: Backend,
    pub model: String,
    /// The name the endpoint serves it under: as `/v1/models` says, once it serves.
    pub served: String,
    /// `http://HEAD:PORT/v1`.
    pub endpoint: String,
    /// The tensor-parallel size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<usize>,
    /// The pipeline-parallel size (llama.cpp's layers split over the nodes).
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

/// Launch on `nodes` (the first is the head). A failure or a signal stops what was started.
pub async fn launch(nodes: &[&dyn Node], request: &LaunchRequest, reporter: &dyn Reporter) -> Result<LaunchReport> {
    let engine = request.engine;
    let backends = engine.backends(request.backend, nodes.len())?;
    let asked = engine.parallelism_asked(request.tp, request.pp, nodes.len())?;
    // Both only look: asked together, they cost one round trip.
    let (checks, model) = tokio::join!(check_every_node(nodes, request, &backends), look_up_model(nodes, request));
    let ((checks, backend, mut why), model) = (checks?, model?);
    refuse_when_serving(nodes, request, &checks)?;
    let split = asked.unwrap_or_else(|| {
        let chosen = engine.parallelism(nodes.len(), &checks[0].cluster_link.transport);
        if nodes.len() > 1 {
            why.push(chosen.why.clone());
        }
        chosen
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
    let mut report = plan(nodes, &checks, request, backend, split, hub.as_ref(), gguf.as_ref())?;
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

/// Every node's check, refusing the launch on the first problem anywhere (nothing started yet);
/// the backend as the image settles it, and why.
async fn check_every_node(
    nodes: &[&dyn Node],
    request: &LaunchRequest,
    backends: &[Backend],
) -> Result<(Vec<ServeCheckReport>, Backend, Vec<String>)> {
    // When the image settles the backend, what every candidate needs is asked at once.
    let engine = request.engine;
    let mut asks = Vec::new();
    for index in 0..nodes.len() {
        let mut programs: Vec<String> = Vec::new();
        for backend in backends {
            for names in engine.programs(*backend, backend.role_of(index)) {
                for name in names.iter().map(|n| n.to_string()) {
                    if !programs.contains(&name) {
                        programs.push(name);
                    }
                }
            }
        }
        // The role the model's files are read in does not depend on which candidate wins.
        let role = backends[0].role_of(index);
        asks.push(ServeCheck {
            toolbox: request.toolbox.clone(),
            start: !request.dry_run,
            programs,
            paths: engine.model_paths(&request.source, role)?,
            flags: if index == 0 { engine.backend_question(backends) } else { None },
            sha256_of: engine.identity_file(&request.source, role).filter(|_| !request.dry_run),
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
    let head_flags = answered.first().and_then(|head| head.flags.as_deref());
    let (backend, why) = engine.settle_backend(backends, head_flags);
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
    let role = backend.role_of(index);
    let needed = if check.looked { request.engine.programs(backend, role) } else { Vec::new() };
    for names in needed {
        if !names.iter().any(|name| check.programs.iter().any(|p| p == name)) {
            problems.push(Error::toolbox(
                &request.toolbox,
                format!("toolbox {} has no {} (its role: {role:?})", request.toolbox, names.join(" or ")),
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
            fix: Some(request.engine.missing_model_fix().into()),
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
    split: Parallelism,
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
    let served = request.engine.served_name(&request.model, &request.extra);
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
        split: split.clone(),
        host: request.host.unwrap_or(Ipv4Addr::UNSPECIFIED).to_string(),
        port: request.port,
        extra: request.extra.clone(),
        hub_commit: cached.map(|c| c.commit.to_string()),
        env: request.env.clone(),
        secrets,
    };
    let LaunchPlan { engine, backend, nodes: planned, steps } = request.engine.plan(&facts, &asked, backend);
    let probe = request.host.filter(|host| !host.is_unspecified()).unwrap_or(facts[0].link_ip);
    Ok(LaunchReport {
        engine,
        backend,
        model: request.model.clone(),
        served,
        endpoint: ServingRecord::endpoint_of(probe, request.port),
        tp: Some(split.tp),
        pp: Some(split.pp),
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
    let fresh_compile_cache = command.clears_compile_cache;
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
            split: Parallelism { tp: 1, pp: 1, why: String::new() },
            host: "0.0.0.0".into(),
            port: 8000,
            extra: Vec::new(),
            hub_commit: None,
            env: [("HF_TOKEN", "hf_s3cret"), ("TOKENIZERS_PARALLELISM", "false")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
            secrets: Vec::new(),
        };
        let plan = crate::serving::vllm::VLLM.plan(&nodes, &asked, Backend::Single);
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
