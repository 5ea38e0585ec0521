//! `cluster launch MODEL` (and `launch MODEL` on one node): the cluster serves one model at one
//! OpenAI-compatible endpoint. All or nothing, like `cluster refresh`: every node is checked
//! before anything starts (reachable, the same toolbox image, an address on the cluster link,
//! nothing serving already); then Ray's head, then every worker at once, bound to their link
//! addresses; then proof from Ray itself that every node joined with its GPU; then `vllm serve` on
//! the head, and proof that it serves (`/health`, then `/v1/models` listing the model). Any
//! failure, and Ctrl-C, stops everything this launch started on every node. A model from the Hub
//! is put in every node's cache first when a node lacks it (`cluster::model`: downloaded once),
//! and vLLM then runs offline on the commit that was pulled.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use super::interrupt::Interrupt;
use super::model::{cached_everywhere, ensure_everywhere, CachedEverywhere, ModelPullReport, ModelPullRequest};
use super::stop::stop_serving;
use crate::error::{Error, MultiError, Result};
use crate::model::repo_id::RepoId;
use crate::model::revision::{Commit, Revision};
use crate::node::{Node, NodeCalls};
use crate::reporter::Reporter;
use crate::secret::{shown_env, Secret};
use crate::serving::commands::{ray_head, ray_worker, vllm_serve};
use crate::serving::environment::serving_env;
use crate::serving::http::HttpAnswer;
use crate::serving::logs::ServeLogs;
use crate::serving::probe::{ServeProbe, ServeProbeReport};
use crate::serving::ray::{RayNode, RayNodes, RayRole, RayStart};
use crate::serving::record::{Role, ServingRecord};
use crate::serving::state::{ServeCheck, ServeCheckReport};
use crate::serving::vllm::VllmStart;

/// How long every node gets to appear in Ray's node table after its `ray start` returned.
const RAY_JOIN_LIMIT: Duration = Duration::from_secs(60);
/// Between two readiness probes (of Ray's node table, of the endpoint).
const PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// Between two looks inside the head's toolbox whether vLLM still runs, while it loads.
const LOOK_INSIDE: Duration = Duration::from_secs(3);
/// The least time between two reports of what vLLM is doing.
const STATUS_INTERVAL: Duration = Duration::from_secs(10);

/// What to serve, and how.
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    pub toolbox: String,
    pub model: String,
    /// Tensor-parallel size; None: one rank per node.
    pub tp: Option<usize>,
    pub port: u16,
    /// How long vLLM may take to serve (loading weights takes minutes on a real node).
    pub timeout: Duration,
    /// Stop what already serves first, instead of refusing.
    pub replace: bool,
    pub dry_run: bool,
    /// Extra `vllm serve` arguments (after `--`).
    pub extra: Vec<String>,
    /// The user's `-e KEY=VALUE`: they override the serving environment.
    pub env: BTreeMap<String, String>,
    pub hf_token: Option<Secret>,
    /// The operator's `HF_*` settings, for a pull of the model (`model::hub_env`).
    pub hub_env: BTreeMap<String, String>,
}

/// One command a node runs, with the environment it runs in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedCommand {
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchedNode {
    pub node: String,
    pub role: Role,
    pub link_ip: Ipv4Addr,
    /// What it runs, in order (the token is never among them).
    pub commands: Vec<PlannedCommand>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchReport {
    pub model: String,
    /// `http://HEAD:PORT/v1`.
    pub endpoint: String,
    pub tp: usize,
    pub nodes: Vec<LaunchedNode>,
    pub dry_run: bool,
    /// What served before was stopped first (`--replace`).
    pub replaced: bool,
    /// From the first `ray start` (or `vllm serve`) to serving.
    pub seconds_to_serve: Option<f64>,
    /// The model from the Hub, in every node's cache; None for a path.
    pub hub_model: Option<HubModel>,
}

/// A Hub model as the launch found or pulled it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HubModel {
    pub repo: RepoId,
    /// The commit vLLM serves, offline, on every node; None in a dry run when a node lacks it
    /// (the launch would pull it first).
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

    /// `curl http://HEAD:PORT/v1/models`: the first request to try.
    pub fn curl_example(&self) -> String {
        format!(
            "curl {}/chat/completions -H 'Content-Type: application/json' -d '{{\"model\": \"{}\", \"messages\": \
             [{{\"role\": \"user\", \"content\": \"Hello\"}}]}}'",
            self.endpoint, self.model
        )
    }
}

/// Launch on `nodes` (the first is the head). A failure or a signal stops what was started.
pub async fn launch(nodes: &[&dyn Node], request: &LaunchRequest, reporter: &dyn Reporter) -> Result<LaunchReport> {
    let tp = tensor_parallel_size(nodes.len(), request.tp)?;
    // Both only look: asked together, they cost one round trip.
    let (checks, model) = tokio::join!(check_every_node(nodes, request), look_up_model(nodes, request));
    let (checks, model) = (checks?, model?);
    let active: Vec<&str> = checks
        .iter()
        .zip(nodes)
        .filter(|(check, _)| check.serving.as_ref().is_some_and(|s| s.active()))
        .map(|(_, node)| node.name())
        .collect();
    if !active.is_empty() && !request.replace {
        return Err(Error::Toolbox {
            name: request.toolbox.clone(),
            message: format!(
                "{} already serve{} ({}); nothing was started",
                active.join(", "),
                if active.len() == 1 { "s" } else { "" },
                describe_serving(&checks)
            ),
            fix: Some("`--replace` stops it first, or `strix-toolbox cluster stop`".into()),
        });
    }
    let cached = model_in_every_cache(nodes, request, model, reporter).await?;
    let mut plan = plan(nodes, &checks, request, tp, cached.as_ref())?;
    if request.dry_run {
        return Ok(plan.shown());
    }
    if !active.is_empty() {
        reporter.step_started(nodes[0].name(), "stopping what serves now (--replace)");
        stop_serving(nodes, &request.toolbox).await.into_result()?;
        plan.replaced = true;
    }

    let interrupt = Interrupt::watch();
    let started = Instant::now();
    let outcome = start_and_prove(nodes, request, &plan, &interrupt, reporter).await;
    reporter.finish();
    match outcome {
        Ok(()) => {
            plan.seconds_to_serve = Some(started.elapsed().as_secs_f64());
            Ok(plan.shown())
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

/// `--tp` defaults to one rank per node; more ranks than nodes (one GPU each) cannot be placed.
fn tensor_parallel_size(nodes: usize, asked: Option<usize>) -> Result<usize> {
    match asked {
        None => Ok(nodes),
        Some(0) => Err(Error::Usage("--tp 0: the tensor-parallel size is at least 1".into())),
        Some(tp) if tp > nodes => Err(Error::Usage(format!(
            "--tp {tp} needs {tp} GPUs, one per node, and the cluster has {nodes} node(s). Fix: --tp {nodes} or \
             less, or add nodes"
        ))),
        Some(tp) => Ok(tp),
    }
}

/// Every node's check, refusing the launch on the first problem anywhere (nothing started yet).
async fn check_every_node(nodes: &[&dyn Node], request: &LaunchRequest) -> Result<Vec<ServeCheckReport>> {
    let check = ServeCheck { toolbox: request.toolbox.clone(), start: !request.dry_run };
    let results = join_all(nodes.iter().map(|node| node.call(check.clone()))).await;
    let mut problems = MultiError::new("nothing was started");
    let mut checks = Vec::new();
    for (node, result) in nodes.iter().zip(results) {
        match result {
            Ok(check) => checks.push(check),
            Err(error) => problems.push(node.name(), error),
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
        if nodes.len() > 1 {
            for (node, check) in nodes.iter().zip(&checks) {
                if let Err(error) = check.cluster_link.address() {
                    problems.push(node.name(), error);
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(checks)
    } else {
        Err(problems.into())
    }
}

fn link_ip(check: &ServeCheckReport) -> Option<Ipv4Addr> {
    check.cluster_link.address().ok()
}

fn describe_serving(checks: &[ServeCheckReport]) -> String {
    checks
        .iter()
        .find_map(|c| c.serving.as_ref().filter(|s| s.active()))
        .map_or("something".into(), |s| format!("{} at {}", s.record.model, s.record.endpoint))
}

/// A Hub model (None for a path), with the revision asked for and whether every node's cache
/// has it.
struct ModelLookup {
    repo: RepoId,
    revision: Option<Revision>,
    cached: Option<CachedEverywhere>,
}

async fn look_up_model(nodes: &[&dyn Node], request: &LaunchRequest) -> Result<Option<ModelLookup>> {
    let Ok(repo) = RepoId::parse(&request.model) else { return Ok(None) };
    let revision = vllm_flag(&request.extra, "--revision").map(Revision::parse).transpose()?;
    let cached = cached_everywhere(nodes, &repo, revision.as_ref().unwrap_or(&Revision::main())).await?;
    Ok(Some(ModelLookup { repo, revision, cached }))
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
    };
    Ok(Some((repo, Some(ensure_everywhere(nodes, &pull, reporter).await?))))
}

/// The commands and records of this launch, per node, with no effect.
fn plan(
    nodes: &[&dyn Node],
    checks: &[ServeCheckReport],
    request: &LaunchRequest,
    tp: usize,
    hub_model: Option<&(RepoId, Option<CachedEverywhere>)>,
) -> Result<LaunchReport> {
    let cached = hub_model.and_then(|(_, cached)| cached.as_ref());
    // vLLM loads the commit every node has, from its cache, never asking the Hub.
    let mut extra = request.extra.clone();
    if let Some(cached) = cached.filter(|_| vllm_flag(&request.extra, "--revision").is_none()) {
        extra.extend(["--revision".to_string(), cached.commit.to_string()]);
    }
    let over_ray = nodes.len() > 1;
    let head_ip = link_ip(&checks[0]).unwrap_or(Ipv4Addr::LOCALHOST);
    let endpoint = ServingRecord::endpoint_of(head_ip, request.port);
    let mut launched = Vec::new();
    for (index, (node, check)) in nodes.iter().zip(checks).enumerate() {
        let ip = link_ip(check).unwrap_or(Ipv4Addr::LOCALHOST);
        let mut env = serving_env(&check.cluster_link.transport, ip, &request.env);
        if let Some(cached) = cached {
            for (key, value) in [("HF_HUB_OFFLINE", "1"), ("HF_HUB_CACHE", cached.caches[index].as_str())] {
                if !request.env.contains_key(key) {
                    env.insert(key.to_string(), value.to_string());
                }
            }
        }
        let (role, mut commands) = match (over_ray, index) {
            (false, _) => (Role::Single, Vec::new()),
            (true, 0) => (Role::Head, vec![ray_head(ip)]),
            (true, _) => (Role::Worker, vec![ray_worker(head_ip, ip)]),
        };
        if index == 0 {
            commands.push(vllm_serve(&request.model, tp, request.port, over_ray, &extra));
        }
        let commands = commands.into_iter().map(|argv| PlannedCommand { argv, env: env.clone() }).collect();
        launched.push(LaunchedNode { node: node.name().to_string(), role, link_ip: ip, commands });
    }
    Ok(LaunchReport {
        model: request.model.clone(),
        endpoint,
        tp,
        nodes: launched,
        dry_run: request.dry_run,
        replaced: false,
        seconds_to_serve: None,
        hub_model: hub_model.map(|(repo, found)| HubModel {
            repo: repo.clone(),
            commit: found.as_ref().map(|c| c.commit.clone()),
            pulled: found.as_ref().and_then(|c| c.pull.clone()),
        }),
    })
}

/// Ray everywhere (when more than one node), then vLLM on the head, each proven before the next.
async fn start_and_prove(
    nodes: &[&dyn Node],
    request: &LaunchRequest,
    plan: &LaunchReport,
    interrupt: &Interrupt,
    reporter: &dyn Reporter,
) -> Result<()> {
    let stopped = |during: &str| -> Result<()> {
        match interrupt.came() {
            Some(signal) => Err(Error::Interrupted { during: during.to_string(), signal }),
            None => Ok(()),
        }
    };
    let head = &plan.nodes[0];
    let record = |launched: &LaunchedNode| ServingRecord {
        toolbox: request.toolbox.clone(),
        model: request.model.clone(),
        served: served_name(&request.model, &request.extra),
        role: launched.role,
        nodes: nodes.len(),
        tp: plan.tp,
        port: request.port,
        link_ip: launched.link_ip,
        head_ip: head.link_ip,
        endpoint: plan.endpoint.clone(),
        // The node records the image its toolbox runs.
        image: String::new(),
        started: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        ray: launched.role != Role::Single,
        vllm_pid: None,
    };
    if nodes.len() > 1 {
        let ray_start = |launched: &LaunchedNode, role: RayRole| RayStart {
            toolbox: request.toolbox.clone(),
            role,
            env: launched.commands[0].env.clone(),
            record: record(launched),
        };
        reporter.step_started(&head.node, &format!("starting Ray's head on {}", head.link_ip));
        nodes[0]
            .call(ray_start(head, RayRole::Head))
            .await
            .map_err(|e| MultiError::one("Ray's head did not start", nodes[0].name(), e))?;
        stopped("Ray's start")?;
        for worker in &plan.nodes[1..] {
            reporter.step_started(&worker.node, &format!("starting a Ray worker on {}", worker.link_ip));
        }
        let workers = nodes[1..].iter().zip(&plan.nodes[1..]).map(|(node, launched)| async move {
            let role = RayRole::Worker { head_ip: head.link_ip };
            node.call(ray_start(launched, role)).await
        });
        let mut failed = MultiError::new("Ray workers did not start");
        for (node, result) in nodes[1..].iter().zip(join_all(workers).await) {
            if let Err(error) = result {
                failed.push(node.name(), error);
            }
        }
        if !failed.is_empty() {
            return Err(failed.into());
        }
        stopped("Ray's start")?;
        wait_for_ray(nodes, request, plan, interrupt, reporter).await?;
    }

    let serve = VllmStart {
        toolbox: request.toolbox.clone(),
        argv: head.commands.last().map(|c| c.argv.clone()).unwrap_or_default(),
        env: head.commands.last().map(|c| c.env.clone()).unwrap_or_default(),
        hf_token: request.hf_token.clone(),
        record: record(head),
    };
    reporter.step_started(&head.node, &format!("vllm serve {}", request.model));
    nodes[0].call(serve).await.map_err(|e| MultiError::one("vLLM did not start", nodes[0].name(), e))?;
    stopped("vLLM's start")?;
    wait_for_vllm(nodes[0], request, plan, interrupt, reporter).await
}

/// Until Ray's own node table has every node alive with its GPU, on its link address.
async fn wait_for_ray(
    nodes: &[&dyn Node],
    request: &LaunchRequest,
    plan: &LaunchReport,
    interrupt: &Interrupt,
    reporter: &dyn Reporter,
) -> Result<()> {
    let deadline = Instant::now() + RAY_JOIN_LIMIT;
    let ask = RayNodes { toolbox: request.toolbox.clone() };
    loop {
        let table: Vec<RayNode> = nodes[0]
            .call(ask.clone())
            .await
            .map_err(|e| MultiError::one("Ray's head does not answer", nodes[0].name(), e))?;
        let missing: Vec<&LaunchedNode> = plan.nodes.iter().filter(|n| !joined(&table, n.link_ip)).collect();
        if missing.is_empty() {
            reporter.step_finished(
                &plan.nodes[0].node,
                &format!("Ray: {} node(s) alive with a GPU each", plan.nodes.len()),
            );
            return Ok(());
        }
        if let Some(signal) = interrupt.came() {
            return Err(Error::Interrupted { during: "the wait for Ray's nodes".into(), signal });
        }
        if Instant::now() >= deadline {
            let mut failed = MultiError::new(format!("nodes never joined Ray within {} s", RAY_JOIN_LIMIT.as_secs()));
            for launched in missing {
                let node = nodes.iter().find(|n| n.name() == launched.node).copied().unwrap_or(nodes[0]);
                let tail = log_tail(node, &request.toolbox, "raylet.out").await;
                let error = Error::Node {
                    node: launched.node.clone(),
                    message: format!(
                        "it is not in Ray's node table on {}; its raylet.out ends: {tail}",
                        launched.link_ip
                    ),
                    fix: Some(
                        "a firewall between it and the head, or a wrong address: trust the cluster link on every node \
                         (`sudo firewall-cmd --zone=trusted --change-interface=IFACE --permanent`), and check it with \
                         `strix-toolbox cluster doctor`"
                            .into(),
                    ),
                };
                failed.push(&launched.node, error);
            }
            return Err(failed.into());
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}

fn joined(table: &[RayNode], ip: Ipv4Addr) -> bool {
    table.iter().any(|node| node.alive && node.gpus >= 1.0 && node.ip == ip.to_string())
}

/// Until `/health` is 200 and `/v1/models` lists the model; vLLM dying, or the timeout, fails
/// with its last log lines.
async fn wait_for_vllm(
    head: &dyn Node,
    request: &LaunchRequest,
    plan: &LaunchReport,
    interrupt: &Interrupt,
    reporter: &dyn Reporter,
) -> Result<()> {
    let address = SocketAddr::from((probe_address(plan), request.port));
    let served = served_name(&request.model, &request.extra);
    let started = Instant::now();
    let mut said: Option<(String, Instant)> = None;
    let mut looked = Instant::now();
    loop {
        // Whether vLLM still runs costs an exec: asked every LOOK_INSIDE, and at the deadline.
        let look_inside = looked.elapsed() >= LOOK_INSIDE || started.elapsed() >= request.timeout;
        if look_inside {
            looked = Instant::now();
        }
        let probe = ServeProbe { toolbox: request.toolbox.clone(), address, look_inside };
        let report: ServeProbeReport = head
            .call(probe.clone())
            .await
            .map_err(|e| MultiError::one("the endpoint could not be probed", head.name(), e))?;
        if report.serves(&served) {
            reporter.step_finished(head.name(), &format!("serving {served} after {} s", started.elapsed().as_secs()));
            return Ok(());
        }
        if !report.vllm_alive {
            let tail = log_tail(head, &request.toolbox, "vllm").await;
            let exited = Error::Command {
                program: "vllm serve".into(),
                message: format!("it exited before serving; its log ends: {tail}"),
                fix: Some(format!("`strix-toolbox cluster logs --node {}` shows all of it", head.name())),
            };
            return Err(MultiError::one("vLLM did not serve", head.name(), exited));
        }
        if matches!(report.health, HttpAnswer::Status(200, _)) && !report.models.is_empty() {
            let other = Error::Command {
                program: "vllm serve".into(),
                message: format!("it serves {} instead of {served}", report.models.join(", ")),
                fix: Some("check `--served-model-name` among the vLLM arguments".into()),
            };
            return Err(MultiError::one("vLLM did not serve", head.name(), other));
        }
        if let Some(signal) = interrupt.came() {
            return Err(Error::Interrupted { during: "the wait for vLLM".into(), signal });
        }
        if started.elapsed() >= request.timeout {
            let tail = log_tail(head, &request.toolbox, "vllm").await;
            let slow = Error::Command {
                program: "vllm serve".into(),
                message: format!("it did not serve within {} s; its log ends: {tail}", request.timeout.as_secs()),
                fix: Some("give it longer with `--timeout SECONDS` (large models load for minutes)".into()),
            };
            return Err(MultiError::one("vLLM did not serve", head.name(), slow));
        }
        // What vLLM is doing (loading weights takes minutes), said when it changes, at most
        // every STATUS_INTERVAL.
        let doing = report.last_line.unwrap_or_else(|| "starting".into());
        if said.as_ref().is_none_or(|(before, at)| *before != doing && at.elapsed() >= STATUS_INTERVAL) {
            reporter.step_started(head.name(), &format!("{:>4} s  {doing}", started.elapsed().as_secs()));
            said = Some((doing, Instant::now()));
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}

/// Where the head is probed: its link address (one node without a link: its own loopback).
fn probe_address(plan: &LaunchReport) -> Ipv4Addr {
    plan.nodes[0].link_ip
}

/// The name `/v1/models` will list: `--served-model-name`, else the model.
fn served_name(model: &str, extra: &[String]) -> String {
    vllm_flag(extra, "--served-model-name").unwrap_or(model).to_string()
}

/// The value of `flag` among the vLLM arguments (`--flag VALUE` or `--flag=VALUE`).
fn vllm_flag<'a>(extra: &'a [String], flag: &str) -> Option<&'a str> {
    let mut words = extra.iter();
    while let Some(word) = words.next() {
        if word == flag {
            return words.next().map(String::as_str);
        }
        if let Some(value) = word.strip_prefix(flag).and_then(|rest| rest.strip_prefix('=')) {
            return Some(value);
        }
    }
    None
}

/// The last lines of one of the node's serving logs, for an error message.
async fn log_tail(node: &dyn Node, toolbox: &str, file: &str) -> String {
    let ask = ServeLogs { toolbox: toolbox.to_string(), lines: 5, seen: Vec::new() };
    match node.call(ask).await {
        Ok(tails) => tails
            .into_iter()
            .find(|t| t.file == file)
            .map(|t| t.lines.join(" | "))
            .filter(|text| !text.is_empty())
            .unwrap_or_else(|| format!("(no {file} log)")),
        Err(error) => format!("(its log could not be read: {error})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tp_defaults_to_the_nodes_and_never_exceeds_them() {
        assert_eq!(tensor_parallel_size(4, None).unwrap(), 4);
        assert_eq!(tensor_parallel_size(4, Some(2)).unwrap(), 2);
        let error = tensor_parallel_size(2, Some(3)).unwrap_err();
        assert!(matches!(error, Error::Usage(_)) && error.to_string().contains("--tp 2"), "{error}");
        assert!(matches!(tensor_parallel_size(2, Some(0)), Err(Error::Usage(_))));
    }

    #[test]
    fn the_served_name_follows_served_model_name() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(served_name("org/m", &[]), "org/m");
        assert_eq!(served_name("org/m", &words(&["--served-model-name", "m"])), "m");
        assert_eq!(served_name("org/m", &words(&["--max-model-len", "8", "--served-model-name=x"])), "x");
        assert_eq!(vllm_flag(&words(&["--revision", "v1"]), "--revision"), Some("v1"));
        assert_eq!(vllm_flag(&words(&["--revisions=x"]), "--revision"), None);
    }

    /// A node that answers nothing: `plan` only asks its name.
    struct Named(&'static str);

    #[async_trait::async_trait]
    impl Node for Named {
        fn name(&self) -> &str {
            self.0
        }

        async fn ask(&self, _call: crate::node::call::NodeCall) -> Result<serde_json::Value> {
            Err(Error::Internal("not asked in these tests".into()))
        }
    }

    fn check(ip: [u8; 4]) -> ServeCheckReport {
        ServeCheckReport {
            toolbox: "vllm".into(),
            image: Some("sha256:ab".into()),
            started: false,
            cluster_link: crate::link::NodeLink {
                transport: crate::spec::Transport::ThunderboltTcp { netdev: "thunderbolt0".into() },
                link: Some(crate::link::ClusterLink {
                    netdev: "thunderbolt0".into(),
                    address: Some(Ipv4Addr::from(ip)),
                    prefix: Some(24),
                    mtu: Some(65520),
                }),
            },
            serving: None,
        }
    }

    fn request(model: &str, extra: &[&str], env: &[(&str, &str)]) -> LaunchRequest {
        LaunchRequest {
            toolbox: "vllm".into(),
            model: model.into(),
            tp: None,
            port: 8000,
            timeout: Duration::from_secs(60),
            replace: false,
            dry_run: true,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            hf_token: None,
            hub_env: BTreeMap::new(),
        }
    }

    #[test]
    fn a_cached_hub_model_runs_offline_on_its_commit_everywhere() {
        let (head, worker) = (Named("node1"), Named("node2"));
        let nodes: [&dyn Node; 2] = [&head, &worker];
        let checks = [check([192, 168, 2, 1]), check([192, 168, 2, 2])];
        let commit = Commit::parse("c12a728b0b9a3d8c0a9e6a1d5b1f4e2c3d4e5f60").unwrap();
        let cached =
            CachedEverywhere { commit: commit.clone(), caches: vec!["/h1/hub".into(), "/h2/hub".into()], pull: None };
        let model = (RepoId::parse("acme/tiny").unwrap(), Some(cached));

        let plan = plan(&nodes, &checks, &request("acme/tiny", &[], &[]), 2, Some(&model)).unwrap();
        for (node, cache) in plan.nodes.iter().zip(["/h1/hub", "/h2/hub"]) {
            for command in &node.commands {
                assert_eq!(command.env["HF_HUB_OFFLINE"], "1", "{}", node.node);
                assert_eq!(command.env["HF_HUB_CACHE"], cache);
            }
        }
        let serve = &plan.nodes[0].commands.last().unwrap().argv;
        assert!(serve.ends_with(&["--revision".to_string(), commit.to_string()]), "{serve:?}");
        assert_eq!(plan.hub_model.as_ref().unwrap().commit.as_ref(), Some(&commit));

        // The operator's own --revision and -e win.
        let asked = request("acme/tiny", &["--revision", "v1"], &[("HF_HUB_OFFLINE", "0")]);
        let plan = super::plan(&nodes, &checks, &asked, 2, Some(&model)).unwrap();
        let serve = &plan.nodes[0].commands.last().unwrap().argv;
        assert_eq!(serve.iter().filter(|w| *w == "--revision").count(), 1, "{serve:?}");
        assert_eq!(plan.nodes[1].commands[0].env["HF_HUB_OFFLINE"], "0");

        // A path, or a model a dry run found missing: vLLM as before.
        for hub_model in [None, Some(&(RepoId::parse("acme/tiny").unwrap(), None))] {
            let plan = super::plan(&nodes, &checks, &request("/models/tiny", &[], &[]), 2, hub_model).unwrap();
            assert!(!plan.nodes[0].commands[0].env.contains_key("HF_HUB_OFFLINE"));
            assert!(!plan.nodes[0].commands.last().unwrap().argv.contains(&"--revision".to_string()));
        }
    }

    #[test]
    fn a_secret_given_with_e_reaches_the_nodes_and_no_report() {
        let (head, worker) = (Named("node1"), Named("node2"));
        let nodes: [&dyn Node; 2] = [&head, &worker];
        let checks = [check([192, 168, 2, 1]), check([192, 168, 2, 2])];
        let asked = request("/models/tiny", &[], &[("HF_TOKEN", "hf_s3cret"), ("TOKENIZERS_PARALLELISM", "false")]);
        let plan = plan(&nodes, &checks, &asked, 2, None).unwrap();
        assert!(plan.nodes.iter().all(|node| node.commands.iter().all(|c| c.env["HF_TOKEN"] == "hf_s3cret")));
        let shown = plan.shown();
        let json = serde_json::to_string(&shown).unwrap();
        assert!(!json.contains("hf_s3cret") && !format!("{shown:?}").contains("hf_s3cret"), "{json}");
        assert_eq!(shown.nodes[1].commands[0].env["HF_TOKEN"], crate::secret::REDACTED);
        assert_eq!(shown.nodes[1].commands[0].env["TOKENIZERS_PARALLELISM"], "false");
    }

    #[test]
    fn a_node_joined_when_alive_with_a_gpu_on_its_link_address() {
        let ip = Ipv4Addr::new(192, 168, 2, 2);
        let node = |ip: &str, alive, gpus| RayNode { ip: ip.into(), alive, gpus };
        assert!(joined(&[node("192.168.2.2", true, 1.0)], ip));
        assert!(!joined(&[node("192.168.2.2", false, 1.0)], ip));
        assert!(!joined(&[node("192.168.2.2", true, 0.0)], ip));
        assert!(!joined(&[node("10.213.0.6", true, 1.0)], ip), "the management address is not the link's");
    }
}
