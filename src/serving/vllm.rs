//! vLLM as a serving engine: across nodes with its multiprocessing executor (`vllm serve` on every
//! node, the head's serving the API, the others `--headless`, meeting at the head's rendezvous on
//! the link) or through Ray (vLLM's Ray executor joins the running Ray cluster), one rank per
//! node's GPU; on one node with its default executor. Its plan ([`plan`]) and its command line;
//! its compile cache is [`super::compile_cache`]'s.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::error::{Error, Result};
use crate::link::ports::LinkPort;
use crate::model::shape::ModelShape;
use crate::model::source::{ModelFormat, ModelSource};
use crate::rccl::log::{judge, RcclVerdict};
use crate::serving::engine::{Backend, EngineProfile, EngineRef, ServingEngine, ToolboxProfile};
use crate::serving::engine_args::{EngineArgs, Flag, REVISION};
use crate::serving::environment::serving_env;
use crate::serving::fit::vllm::VllmRules;
use crate::serving::fit::{self, vllm_log, Fit, FitAsk, FitNodes, Measured, NodeLog, Planned};
use crate::serving::logs::LogTail;
use crate::serving::parallelism::Parallelism;
use crate::serving::plan::{
    with_overrides, LaunchPlan, LaunchStep, NodeForPlan, NodePlan, PlanRequest, PlannedCommand, Proof, StartKind,
};
use crate::serving::ray::{ray_head, ray_worker, RayRole, AUTH_MODE, AUTH_TOKEN, RAY_PORT};
use crate::serving::record::Role;
use crate::serving::state::FlagQuestion;
use crate::serving::vllm_args;
use crate::spec::{ToolboxNeeds, Transport};

/// vLLM, as the launch and everything else ask it.
pub const VLLM: EngineRef = EngineRef::of(&Vllm);

/// The process name (and log) of `vllm serve`: the server on the head, a headless rank elsewhere.
pub const SERVER: &str = "vllm";

/// Where the head's rank 0 takes the others in (vLLM's default `--master-port`), on the link.
pub const RENDEZVOUS_PORT: u16 = 29501;

/// The flag of vLLM's that says its multiprocessing executor spans nodes.
const NNODES: &str = "--nnodes";
/// The shorthand of `--compilation-config` that vLLM's help names from the versions whose
/// compilation config has `cudagraph_mode` (the shorthand came after it).
const COMPILATION_SHORTHAND: &str = "-cc";

/// vLLM's constants.
const PROFILE: EngineProfile = EngineProfile {
    name: "vllm",
    aliases: &[],
    about: "vLLM: tensor or pipeline parallel across the nodes, safetensors models from the Hub or a directory",
    title: "vLLM",
    toolbox: ToolboxProfile {
        image_repo: crate::DEFAULT_IMAGE_REPO,
        channels: &crate::image::reference::CHANNELS,
        default_toolbox: "vllm",
        ask_channel: true,
    },
    image_programs: &[],
    link_ports: &[
        LinkPort::on_head(RAY_PORT, "Ray's GCS"),
        LinkPort::on_head(10001, "Ray's client server"),
        LinkPort::on_head(8265, "Ray's dashboard"),
    ],
    node_port: RENDEZVOUS_PORT,
    // config.json and safetensors weights, as every rank reads them.
    model_format: ModelFormat::Safetensors,
    missing_model_fix: "put the model at the same path on every node (or give its Hub id: the launch then pulls it \
                        once and spreads it)",
    server: SERVER,
    // torch.compile's graphs under `VLLM_CACHE_ROOT`.
    keeps_compile_cache: true,
    // vLLM's `VLLM_API_KEY` (the `--api-key` default).
    api_key_env: "VLLM_API_KEY",
    progress: crate::watch::VLLM_PROGRESS,
    name_flag: Flag::new(&["--served-model-name"]),
    // vLLM's plan needs only the nodes' memory: one rank a node's GPU.
    head_question: None,
};

struct Vllm;

impl ServingEngine for Vllm {
    fn profile(&self) -> &'static EngineProfile {
        &PROFILE
    }

    fn needs(&self, _image_ref: &str) -> ToolboxNeeds {
        ToolboxNeeds { kfd: true, rdma: true, nccl: true }
    }

    fn source(&self, model: &str, file: Option<&str>) -> Result<ModelSource> {
        if ModelSource::names_gguf(model, file) {
            return Err(Error::Usage(format!(
                "{model}: a GGUF model (a .gguf path, REPO:QUANT or --file) is served by llama.cpp, not vLLM"
            )));
        }
        ModelSource::whole(model, file)
    }

    /// vLLM's ranks load a model given by its path on every node.
    fn model_paths(&self, source: &ModelSource, _role: Role) -> Result<Vec<String>> {
        Ok(match source {
            ModelSource::Path(path) => vec![path.clone()],
            _ => Vec::new(),
        })
    }

    fn identity_file(&self, _source: &ModelSource, _role: Role) -> Option<String> {
        None
    }

    /// Its multiprocessing executor where the image's vLLM spans nodes with it, else Ray's.
    fn backends(&self, asked: Option<Backend>, nodes: usize) -> Result<Vec<Backend>> {
        Ok(match asked {
            _ if nodes == 1 => vec![Backend::Single],
            Some(backend) => vec![backend],
            None => vec![Backend::Mp, Backend::Ray],
        })
    }

    /// Across nodes: whether its multiprocessing executor spans nodes (`--nnodes`), and whether
    /// its compilation config can turn graph capture off alone (`-cc`).
    fn image_question(&self, candidates: &[Backend]) -> Option<FlagQuestion> {
        (candidates != [Backend::Single]).then(|| FlagQuestion {
            help: ["vllm", "serve", "--help=all"].map(String::from).to_vec(),
            flags: vec![NNODES.to_string(), COMPILATION_SHORTHAND.to_string()],
        })
    }

    /// vLLM's multiprocessing executor spans nodes from the version that has `--nnodes`: it is
    /// kept when the image's vLLM names it (or could not be asked: a dry run of a stopped
    /// toolbox), else Ray's executor takes over, and the report says so.
    fn settle_backend(&self, candidates: &[Backend], flags: Option<&[String]>) -> (Backend, Vec<String>) {
        if candidates.len() == 1 {
            return (candidates[0], Vec::new());
        }
        match flags {
            Some(found) if !found.iter().any(|flag| flag == NNODES) => (
                Backend::Ray,
                vec![format!(
                    "backend ray: the image's vLLM has no {NNODES} (its own executor spans one node only), so \
                     Ray's executor spans the nodes; a newer image runs without Ray"
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

    fn parallelism_asked(&self, tp: Option<usize>, pp: Option<usize>, nodes: usize) -> Result<Option<Parallelism>> {
        Parallelism::asked(tp, pp, nodes)
    }

    fn parallelism(&self, nodes: usize, transport: &Transport) -> Parallelism {
        Parallelism::by_link(nodes, transport)
    }

    fn programs(&self, backend: Backend, role: Role) -> Vec<&'static [&'static str]> {
        match role {
            Role::Worker if backend.runs_ray() => vec![&["ray"]],
            _ if backend.runs_ray() => vec![&["vllm"], &["ray"]],
            _ => vec![&["vllm"]],
        }
    }

    fn plan(&self, nodes: &[NodeForPlan], request: &PlanRequest, backend: Backend) -> LaunchPlan {
        plan(nodes, request, backend)
    }

    fn tcp_on_roce(&self, logs: &[LogTail], node: &str) -> Option<String> {
        let rccl = judge(&logs.iter().find(|tail| tail.file == SERVER)?.lines);
        (rccl.verdict == RcclVerdict::Tcp).then(|| {
            format!(
                "on {node}, {}, although the link is RoCE: tensor parallelism is slow this way; check the RoCE \
                 settings (`strix-toolbox cluster verify`, NCCL_IB_HCA, NCCL_IB_GID_INDEX)",
                rccl.why
            )
        })
    }

    fn tokenize_request(&self, model: &str, text: &str, add_special: bool) -> serde_json::Value {
        serde_json::json!({ "model": model, "prompt": text, "add_special_tokens": add_special })
    }

    /// `--max-model-len`, `--kv-cache-dtype` and `--max-num-batched-tokens` among its arguments,
    /// `VLLM_PP_LAYER_PARTITION` and `VLLM_MLA_DISABLE` in its environment, read as vLLM reads
    /// them (`serving::vllm_args`).
    fn fit_asked(&self, extra: &EngineArgs, env: &BTreeMap<String, String>) -> Result<FitAsk> {
        Ok(FitAsk {
            max_model_len: extra.value(MAX_MODEL_LEN).map(vllm_args::max_model_len).transpose()?.flatten(),
            kv_cache_dtype: extra.value(KV_CACHE_DTYPE).map(str::to_string),
            max_num_batched_tokens: extra
                .value(MAX_NUM_BATCHED_TOKENS)
                .map(|text| vllm_args::human_readable_int(MAX_NUM_BATCHED_TOKENS.name(), text))
                .transpose()?,
            pp_layer_partition: env
                .get("VLLM_PP_LAYER_PARTITION")
                .map(|v| vllm_args::pp_layer_partition(v))
                .transpose()?,
            mla_disabled: env.get("VLLM_MLA_DISABLE").map(|v| vllm_args::mla_disable(v)).transpose()?.unwrap_or(false),
            ..FitAsk::default()
        })
    }

    fn head_gpu(&self, _said: &str) -> Option<bool> {
        None
    }

    /// vLLM's rules (`serving::fit::vllm`): TP × PP, and DP with expert parallelism for a MoE
    /// model; `--tp`/`--pp` as asked, else chosen by the link.
    fn fit(&self, shape: &ModelShape, nodes: &FitNodes, asked: &FitAsk) -> Result<Fit> {
        let build = nodes.image.vllm_build();
        let mut rules = VllmRules::new(shape, asked.kv_cache_dtype.as_deref(), build)?;
        rules.asked_context = asked.max_model_len;
        rules.asked_layout = asked.tp.zip(asked.pp);
        rules.max_num_batched_tokens = asked.max_num_batched_tokens;
        rules.mla_disabled = asked.mla_disabled;
        if let Some(partition) = &asked.pp_layer_partition {
            fit::vllm::check_partition(&fit::vllm::as_served(shape, &rules), partition)?;
            rules.pp_layer_partition = Some(partition.clone());
        }
        Ok(fit::vllm::fit(shape, &nodes.memory, &nodes.transport, &rules))
    }

    /// TP × PP, and DP with expert parallelism, as the chosen layout has them.
    fn planned_split(&self, fit: &Fit) -> Option<Parallelism> {
        let chosen = fit.chosen.as_ref()?;
        let layout = fit.chosen_layout()?;
        let (tp, pp, dp) = (layout.tp as usize, layout.pp as usize, layout.dp as usize);
        Some(Parallelism { dp, expert_parallel: layout.expert_parallel, ..Parallelism::of(tp, pp, chosen.why.clone()) })
    }

    /// `--max-model-len`, `--kv-cache-memory-bytes`, `--gpu-memory-utilization` and (with sliding
    /// layers) `--max-num-batched-tokens`; the operator's own win: a flag the plan read as asked
    /// (`--max-model-len`, `--max-num-batched-tokens`), `--kv-cache-memory-bytes`, and
    /// `--gpu-memory-utilization`, with which vLLM sizes the cache itself.
    fn planned_args(&self, fit: &Fit, extra: &EngineArgs) -> Vec<String> {
        let mut dropped = SPLIT_FLAGS.to_vec();
        dropped.extend(
            [MAX_MODEL_LEN, MAX_NUM_BATCHED_TOKENS, KV_CACHE_MEMORY_BYTES].into_iter().filter(|own| extra.gives(*own)),
        );
        if extra.gives(GPU_MEMORY_UTILIZATION) {
            dropped.extend([GPU_MEMORY_UTILIZATION, KV_CACHE_MEMORY_BYTES]);
        }
        EngineArgs::new(fit.engine_args.clone()).without(&dropped).into_words()
    }

    /// Each rank's `Model loading took` and KV cache lines: a rank's in its own node's log (its
    /// multiprocessing executor), or in the head's prefixed with its node's address (Ray's).
    fn measured(&self, planned: &[Planned], logs: &[NodeLog]) -> Vec<Measured> {
        let mut measured = Measured::unsaid(planned);
        for log in logs {
            let Some(lines) = log.lines_of(SERVER) else { continue };
            for rank in vllm_log::parse(&lines).ranks {
                let named = rank_address(&rank.who).and_then(|ip| logs.iter().find(|l| l.link_ip == ip));
                let node = named.map_or(log.node, |l| l.node);
                if let Some(figures) = measured.iter_mut().find(|m| m.planned.node == node) {
                    figures.said_weights_bytes = rank.weights_bytes.or(figures.said_weights_bytes);
                    figures.said_kv_cache_bytes = rank.kv_cache_bytes.or(figures.said_kv_cache_bytes);
                }
            }
        }
        measured
    }
}

/// The flags a vLLM launch writes itself for the split: the plan's are not added again.
const SPLIT_FLAGS: [Flag; 4] = [
    Flag::new(&["--tensor-parallel-size"]),
    Flag::new(&["--pipeline-parallel-size"]),
    Flag::new(&["--data-parallel-size"]),
    Flag::new(&["--enable-expert-parallel"]),
];

/// vLLM's flags the plan reads or writes (the operator's win over the plan's).
const MAX_MODEL_LEN: Flag = Flag::new(&["--max-model-len"]);
const KV_CACHE_DTYPE: Flag = Flag::new(&["--kv-cache-dtype"]);
const MAX_NUM_BATCHED_TOKENS: Flag = Flag::new(&["--max-num-batched-tokens"]);
const KV_CACHE_MEMORY_BYTES: Flag = Flag::new(&["--kv-cache-memory-bytes"]);
const GPU_MEMORY_UTILIZATION: Flag = Flag::new(&["--gpu-memory-utilization"]);

/// The node address a Ray worker's prefix names (`RayWorkerWrapper pid=212, ip=192.168.2.2`).
fn rank_address(who: &str) -> Option<std::net::Ipv4Addr> {
    who.split(", ").find_map(|part| part.trim().strip_prefix("ip=")).and_then(|ip| ip.parse().ok())
}

/// How one `vllm serve` spans the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executor {
    /// One node, vLLM's default executor.
    Alone,
    /// The driver on the head, its workers placed by the running Ray cluster.
    Ray,
    /// vLLM's multiprocessing executor, rank `rank` of `nodes`, meeting at `master`.
    Mp { nodes: usize, rank: usize, master: SocketAddr },
    /// A data-parallel deployment across nodes (vLLM's docs/serving/data_parallel_deployment.md):
    /// DP rank `rank` of `size`, one a node; the head's API server takes the others in at
    /// `address` (`--data-parallel-address`, `--data-parallel-rpc-port`).
    DataParallel { size: usize, rank: usize, address: SocketAddr },
}

/// `vllm serve MODEL` split as `split` says, run by `executor`; the head (rank 0, or alone)
/// serves the API on `host:port`, the other ranks are `--headless`.
pub fn vllm_serve(
    model: &str,
    split: &Parallelism,
    executor: Executor,
    (host, port): (&str, u16),
    extra: &[String],
) -> Vec<String> {
    let mut argv: Vec<String> = ["vllm", "serve", model, "--tensor-parallel-size"].map(String::from).to_vec();
    argv.push(split.tp.to_string());
    if split.pp > 1 {
        argv.extend(["--pipeline-parallel-size".to_string(), split.pp.to_string()]);
    }
    let mut serves_api = true;
    match executor {
        Executor::Alone => {}
        Executor::Ray => {
            argv.extend(["--distributed-executor-backend", "ray"].map(String::from));
            if split.dp > 1 {
                // Ray places every DP rank from the head's one command.
                argv.extend(["--data-parallel-size".into(), split.dp.to_string()]);
                argv.extend(["--data-parallel-backend", "ray"].map(String::from));
            }
        }
        Executor::DataParallel { size, rank, address } => {
            argv.extend(["--data-parallel-size".into(), size.to_string(), "--data-parallel-size-local".into()]);
            argv.push("1".into());
            if rank > 0 {
                argv.extend(["--data-parallel-start-rank".into(), rank.to_string(), "--headless".into()]);
                serves_api = false;
            }
            argv.extend(["--data-parallel-address".into(), address.ip().to_string()]);
            argv.extend(["--data-parallel-rpc-port".into(), address.port().to_string()]);
        }
        Executor::Mp { nodes, rank, master } => {
            argv.extend(["--distributed-executor-backend", "mp", "--nnodes"].map(String::from));
            argv.extend([nodes.to_string(), "--node-rank".into(), rank.to_string()]);
            argv.extend(["--master-addr".into(), master.ip().to_string(), "--master-port".into()]);
            argv.push(master.port().to_string());
            if rank > 0 {
                argv.push("--headless".into());
                serves_api = false;
            }
        }
    }
    if split.expert_parallel {
        argv.push("--enable-expert-parallel".into());
    }
    if serves_api {
        argv.extend(["--host".to_string(), host.to_string(), "--port".to_string(), port.to_string()]);
    }
    argv.extend(extra.iter().cloned());
    argv
}

/// What each node runs. Over Ray: Ray on every node first (the head, then the workers at once,
/// proven by Ray's own node table), then `vllm serve` on the head. With vLLM's multiprocessing
/// executor: `vllm serve` on every node at once (the head's rank 0 and its API, a headless rank
/// on each other node), proven by every rank's log saying it joined, then by the endpoint. On
/// one node, `vllm serve` alone.
fn plan(nodes: &[NodeForPlan], request: &PlanRequest, backend: Backend) -> LaunchPlan {
    let split = &request.split;
    let over_ray = backend == Backend::Ray;
    let head_ip = nodes[0].link_ip;
    let rendezvous = SocketAddr::from((head_ip, nodes[0].listen_port));
    let mut extra = request.extra.clone();
    if let Some(commit) = request.hub_commit.as_ref().filter(|_| request.extra.value(REVISION).is_none()) {
        // vLLM loads the commit every node has, from its cache, never asking the Hub.
        extra = extra.with(REVISION, commit);
    }
    let mut extra = extra.into_words();
    let (graphs, notes) = graph_capture(nodes.len(), request);
    extra.extend(graphs);
    let mut planned = Vec::new();
    for (index, facts) in nodes.iter().enumerate() {
        let mut env = serving_env(&facts.transport, facts.link_ip, &BTreeMap::new());
        if !over_ray {
            env.retain(|key, _| !key.starts_with("RAY_"));
        }
        if nodes.len() > 1 {
            // RCCL says which transport it really uses (NET/IB or NET/Socket): the launch reads it.
            env.insert("NCCL_DEBUG".into(), "INFO".into());
        }
        if let Some(cache) = &facts.hub_cache {
            env.insert("HF_HUB_OFFLINE".into(), "1".into());
            env.insert("HF_HUB_CACHE".into(), cache.clone());
        }
        let env = with_overrides(env, request);
        let ray = |role| PlannedCommand {
            argv: Vec::new(),
            env: env.clone(),
            secret_env: Vec::new(),
            start: StartKind::Ray { role },
            uses_compile_cache: false,
        };
        let role = backend.role_of(index);
        let mut commands = match (over_ray, index) {
            (false, _) => Vec::new(),
            (true, 0) => vec![PlannedCommand { argv: ray_head(facts.link_ip), ..ray(RayRole::Head) }],
            (true, _) => {
                vec![PlannedCommand { argv: ray_worker(head_ip, facts.link_ip), ..ray(RayRole::Worker { head_ip }) }]
            }
        };
        let executor = match backend {
            Backend::Ray => Executor::Ray,
            Backend::Mp if split.dp > 1 => {
                Executor::DataParallel { size: nodes.len(), rank: index, address: rendezvous }
            }
            Backend::Mp => Executor::Mp { nodes: nodes.len(), rank: index, master: rendezvous },
            Backend::Single | Backend::Rpc => Executor::Alone,
        };
        let argv = vllm_serve(&request.model, split, executor, (&request.host, request.port), &extra);
        if index == 0 {
            let mut serve_env = env.clone();
            let mut secrets = vec!["HF_TOKEN", PROFILE.api_key_env];
            if over_ray {
                // The driver talks to Ray: it needs the launch's token too.
                serve_env.insert(AUTH_MODE.0.into(), AUTH_MODE.1.into());
                secrets.push(AUTH_TOKEN);
            }
            let mut serve = PlannedCommand::process(SERVER, argv, serve_env).with_secrets(&secrets, request);
            if backend == Backend::Mp {
                serve = serve.listening(rendezvous);
            }
            commands.push(serve);
        } else if backend == Backend::Mp {
            commands.push(PlannedCommand::process(SERVER, argv, env.clone()).with_secrets(&["HF_TOKEN"], request));
        }
        // Ray (its actors compile) and `vllm serve` take the image's own compile cache.
        for command in &mut commands {
            command.uses_compile_cache = true;
        }
        planned.push(NodePlan { node: facts.node.clone(), role, link_ip: facts.link_ip, commands });
    }
    let steps = match backend {
        // `ray start` on a worker returns once its node is in the head's table (Ray's Node waits
        // for it: ray/_private/node.py), as the steps typed by hand count on: `vllm serve` starts
        // then, and Ray's own node table is read while it loads, not before (a python start on the
        // head, seconds of the launch that were the proof's alone).
        Backend::Ray => vec![
            LaunchStep { starts: vec![(0, 0)], proofs: Vec::new() },
            LaunchStep { starts: (1..nodes.len()).map(|node| (node, 0)).collect(), proofs: Vec::new() },
            LaunchStep { starts: vec![(0, 1)], proofs: vec![Proof::RayJoined, Proof::Endpoint] },
        ],
        Backend::Mp => {
            // RCCL's start-up lines are the ranks' proof; an operator's `-e NCCL_DEBUG=WARN` leaves
            // the endpoint alone to prove it (vLLM serves only once every rank joined).
            let rccl_speaks =
                request.env.get("NCCL_DEBUG").is_none_or(|level| matches!(level.as_str(), "INFO" | "TRACE"));
            let ranks = rccl_speaks.then_some(Proof::RanksJoined { rendezvous });
            vec![LaunchStep {
                starts: (0..nodes.len()).map(|node| (node, 0)).collect(),
                proofs: ranks.into_iter().chain([Proof::Endpoint]).collect(),
            }]
        }
        Backend::Single | Backend::Rpc => vec![LaunchStep { starts: vec![(0, 0)], proofs: vec![Proof::Endpoint] }],
    };
    LaunchPlan { engine: VLLM, backend, nodes: planned, steps, notes }
}

/// No CUDA graph capture across nodes unless the operator takes the risk (`--cuda-graphs`) or
/// says otherwise after `--`: it can freeze on distributed APU nodes (vllm#32180 on gfx1151).
/// Where the image's vLLM turns capture off alone (`cudagraph_mode` NONE; its help names `-cc`),
/// Inductor's fusion stays (7-9% faster than `--enforce-eager`, hang-free over a 600 s soak);
/// else `--enforce-eager`. The args to add, and what the report says.
fn graph_capture(nodes: usize, request: &PlanRequest) -> (Vec<String>, Vec<String>) {
    if nodes < 2 || request.cuda_graphs || request.extra.words().iter().any(|word| says_how_to_compile(word)) {
        return (Vec::new(), Vec::new());
    }
    let named = request.image_flags.as_ref().map(|flags| flags.iter().any(|f| f == COMPILATION_SHORTHAND));
    let risk = "CUDA graph capture can freeze across gfx1151 nodes (vllm#32180; --cuda-graphs to capture anyway)";
    match named {
        Some(true) => (
            vec!["--compilation-config".into(), r#"{"cudagraph_mode":"NONE"}"#.into()],
            vec![format!("graph capture off (cudagraph_mode NONE, Inductor's fusion kept): {risk}")],
        ),
        Some(false) => (
            vec!["--enforce-eager".into()],
            vec![format!("--enforce-eager: {risk}, and the image's vLLM has no cudagraph_mode to turn it off alone")],
        ),
        None => (
            vec!["--enforce-eager".into()],
            vec![format!("--enforce-eager: {risk} (the stopped toolbox's vLLM was not asked for cudagraph_mode)")],
        ),
    }
}

/// An argument of the operator's that says how to compile or capture graphs.
fn says_how_to_compile(word: &str) -> bool {
    let flags = ["--enforce-eager", "--no-enforce-eager", "--compilation-config"];
    flags.iter().any(|flag| word == *flag || word.starts_with(&format!("{flag}=")))
        || word.starts_with("-cc")
        || word.starts_with("-O")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn tp_and_pp_fill_the_nodes_and_the_link_decides_when_nobody_asked() {
        assert_eq!(VLLM.parallelism_asked(None, None, 4).unwrap(), None, "the link decides");
        assert_eq!(VLLM.parallelism_asked(Some(2), None, 4).unwrap().map(|p| p.pp), Some(2));
        let error = VLLM.parallelism_asked(Some(3), None, 2).unwrap_err();
        assert!(matches!(error, crate::error::Error::Usage(_)) && error.to_string().contains("--tp 3"), "{error}");
    }

    #[test]
    fn the_image_says_whether_vllm_spans_nodes_without_ray() {
        assert_eq!(VLLM.backends(None, 3).unwrap(), [Backend::Mp, Backend::Ray], "mp where the image has it");
        assert_eq!(VLLM.backends(None, 1).unwrap(), [Backend::Single]);
        assert_eq!(VLLM.backends(Some(Backend::Ray), 2).unwrap(), [Backend::Ray]);
        let candidates = [Backend::Mp, Backend::Ray];
        assert!(VLLM.image_question(&candidates).is_some() && VLLM.image_question(&[Backend::Single]).is_none());
        let (backend, why) = VLLM.settle_backend(&candidates, Some(&[]));
        assert_eq!(backend, Backend::Ray);
        assert!(why[0].contains("no --nnodes"), "{why:?}");
        assert_eq!(VLLM.settle_backend(&candidates, Some(&[NNODES.into()])).0, Backend::Mp);
        assert_eq!(VLLM.settle_backend(&candidates, None).0, Backend::Mp, "not asked: kept");
        assert_eq!(VLLM.settle_backend(&[Backend::Mp], Some(&[])), (Backend::Mp, Vec::new()), "asked: kept");
    }

    #[test]
    fn each_role_needs_its_programs_and_every_rank_reads_the_model() {
        assert_eq!(VLLM.programs(Backend::Ray, Role::Head), [&["vllm"][..], &["ray"][..]]);
        assert_eq!(VLLM.programs(Backend::Ray, Role::Worker), [&["ray"][..]]);
        assert_eq!(VLLM.programs(Backend::Single, Role::Single), [&["vllm"][..]]);
        let path = ModelSource::Path("/models/tiny".into());
        assert_eq!(VLLM.model_paths(&path, Role::Worker).unwrap(), ["/models/tiny"], "every vLLM rank reads it");
        assert!(VLLM.source("/m/x.gguf", None).unwrap_err().to_string().contains("llama.cpp"));
    }

    #[test]
    fn the_plan_reads_its_own_flags_as_vllm_reads_them() {
        let words = |w: &[&str]| EngineArgs::new(w.iter().map(|s| s.to_string()).collect());
        let none = BTreeMap::new();
        let asked = VLLM.fit_asked(&words(&["--max-model-len", "32K", "--kv-cache-dtype=fp8"]), &none).unwrap();
        assert_eq!((asked.max_model_len, asked.kv_cache_dtype.as_deref()), (Some(32_768), Some("fp8")));
        let asked = |w: &[&str]| VLLM.fit_asked(&words(w), &none);
        assert_eq!(asked(&["--max-model-len", "8k"]).unwrap().max_model_len, Some(8_000));
        assert_eq!(asked(&["--max-model-len", "25.6k"]).unwrap().max_model_len, Some(25_600));
        assert_eq!(asked(&["--max-model-len", "1T"]).unwrap().max_model_len, Some(1 << 40));
        assert_eq!(asked(&["--max-model-len", "-1"]).unwrap().max_model_len, None, "vLLM decides");
        assert!(matches!(asked(&["--max-model-len", "99999999999999999999G"]), Err(Error::Usage(_))));
        assert_eq!(asked(&["--max-num-batched-tokens=4K"]).unwrap().max_num_batched_tokens, Some(4096));
        // -e VLLM_PP_LAYER_PARTITION and VLLM_MLA_DISABLE, as vLLM reads its environment.
        let env: BTreeMap<String, String> =
            [("VLLM_PP_LAYER_PARTITION", "31,30"), ("VLLM_MLA_DISABLE", "1")].map(|(k, v)| (k.into(), v.into())).into();
        let asked_env = VLLM.fit_asked(&EngineArgs::default(), &env).unwrap();
        assert_eq!((asked_env.pp_layer_partition, asked_env.mla_disabled), (Some(vec![31, 30]), true));
        let bad: BTreeMap<String, String> = [("VLLM_MLA_DISABLE".to_string(), "yes".to_string())].into();
        assert!(matches!(VLLM.fit_asked(&EngineArgs::default(), &bad), Err(Error::Usage(_))));
        assert_eq!(PROFILE.model_format, ModelFormat::Safetensors);
        assert_eq!(PROFILE.head_question, None);
    }

    #[test]
    fn the_asked_layout_and_context_reach_the_plan() {
        use crate::model::shape::fixtures::{with_weights, QWEN3_32B};
        use crate::serving::fit::NodeMemory;
        let shape = with_weights(QWEN3_32B);
        let roce =
            Transport::Roce { device: "rocep194s0f0".into(), port: 1, netdev: "enp194s0np0".into(), gid_index: 1 };
        let memory = (1..=2).map(|i| NodeMemory::new(&format!("node{i}"), 120 << 30, 0, 4 << 30)).collect();
        let nodes = FitNodes { memory, transport: roce, head_gpu: None, head_said: None, image: Default::default() };
        let asked = FitAsk { tp: Some(1), pp: Some(2), max_model_len: Some(8192), ..FitAsk::default() };
        let fit = VLLM.fit(&shape, &nodes, &asked).expect("a plan");
        let chosen = fit.chosen_layout().expect("PP 2 as asked");
        assert_eq!((chosen.tp, chosen.pp), (1, 2));
        assert_eq!(chosen.fits().map(|f| f.context_tokens), Some(8192));
        assert!(fit.engine_args.join(" ").contains("--max-model-len 8192"), "{:?}", fit.engine_args);
        let bad = FitAsk { kv_cache_dtype: Some("fp3".into()), ..FitAsk::default() };
        assert!(matches!(VLLM.fit(&shape, &nodes, &bad), Err(Error::Usage(_))));
    }

    #[test]
    fn rccl_over_sockets_on_roce_is_a_warning() {
        let tail =
            |line: &str| vec![LogTail { service: "m".into(), file: SERVER.into(), lines: vec![line.into()], end: 0 }];
        let socket = tail("NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0");
        let roce =
            Transport::Roce { device: "rocep194s0f0".into(), port: 1, netdev: "enp194s0np0".into(), gid_index: 1 };
        let warned = crate::serving::engine::tcp_on_roce(VLLM, &roce, &[("node2".into(), socket.clone())]);
        assert!(warned[0].contains("node2") && warned[0].contains("NET/Socket"), "{warned:?}");
        let ib = tail("NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0");
        assert!(crate::serving::engine::tcp_on_roce(VLLM, &roce, &[("node2".into(), ib)]).is_empty());
        let tb = Transport::ThunderboltTcp { netdev: "thunderbolt0".into() };
        assert!(crate::serving::engine::tcp_on_roce(VLLM, &tb, &[("node2".into(), socket)]).is_empty(), "TCP link");
    }

    #[test]
    fn across_nodes_no_graph_capture_unless_asked_and_the_image_says_how() {
        let nodes = [facts("node1", [192, 168, 2, 1], None), facts("node2", [192, 168, 2, 2], None)];
        let head_argv = |request: PlanRequest| {
            let plan = planned(&nodes, request, Backend::Mp, split(1, 2));
            (plan.nodes[0].commands[0].argv.join(" "), plan.notes)
        };
        let (argv, notes) = head_argv(request("/m", &[], &[], None));
        assert!(argv.ends_with(r#"--compilation-config {"cudagraph_mode":"NONE"}"#), "{argv}");
        assert!(notes[0].contains("vllm#32180") && notes[0].contains("--cuda-graphs"), "{notes:?}");
        let old = PlanRequest { image_flags: Some(vec![NNODES.into()]), ..request("/m", &[], &[], None) };
        let (argv, notes) = head_argv(old);
        assert!(argv.ends_with("--enforce-eager") && notes[0].contains("no cudagraph_mode"), "{argv}");
        let (argv, notes) = head_argv(PlanRequest { image_flags: None, ..request("/m", &[], &[], None) });
        assert!(argv.ends_with("--enforce-eager") && notes[0].contains("not asked"), "{argv}");
        let risk = PlanRequest { cuda_graphs: true, ..request("/m", &[], &[], None) };
        let (argv, notes) = head_argv(risk);
        assert!(!argv.contains("eager") && !argv.contains("compilation") && notes.is_empty(), "{argv}");
        for own in [&["-O3"][..], &["--compilation-config", "{}"], &["--enforce-eager"], &["-cc.mode=3"]] {
            let (argv, notes) = head_argv(request("/m", own, &[], None));
            assert!(argv.ends_with(&own.join(" ")) && notes.is_empty(), "the operator's own say: {argv}");
        }
        let alone = [facts("node1", [127, 0, 0, 1], None)];
        let plan = planned(&alone, request("/m", &[], &[], None), Backend::Single, split(1, 1));
        assert!(plan.notes.is_empty() && !plan.nodes[0].commands[0].argv.join(" ").contains("eager"), "one node");
    }

    #[test]
    fn each_rank_says_its_figures_in_its_own_log_or_by_its_address() {
        use crate::serving::fit::{NodeLog, Planned};
        use crate::serving::logs::LogTail;
        let planned: Vec<Planned> = ["node1", "node2"]
            .map(|node| Planned {
                node: node.into(),
                weights_bytes: 30 << 30,
                kv_cache_bytes: 5 << 30,
                ..Planned::default()
            })
            .to_vec();
        let tail = |lines: &[&str]| {
            vec![LogTail {
                service: "m".into(),
                file: SERVER.into(),
                lines: lines.iter().map(|l| l.to_string()).collect(),
                end: 0,
            }]
        };
        let head = tail(&[
            "(EngineCore_DP0 pid=90) INFO 11-26 18:00:00 [gpu_model_runner.py:2653] Model loading took 30.5 GiB memory \
             and 60.1 seconds",
            "(RayWorkerWrapper pid=212, ip=192.168.2.2) INFO 11-26 18:00:09 [gpu_worker.py:298] Available KV cache \
             memory: 5.02 GiB",
        ]);
        let logs = [
            NodeLog { node: "node1", link_ip: Ipv4Addr::new(192, 168, 2, 1), tails: &head },
            NodeLog { node: "node2", link_ip: Ipv4Addr::new(192, 168, 2, 2), tails: &[] },
        ];
        let measured = VLLM.measured(&planned, &logs);
        assert_eq!(measured[0].said_weights_bytes, Some((30.5 * (1u64 << 30) as f64) as u64));
        assert_eq!(measured[0].said_kv_cache_bytes, None);
        assert_eq!(measured[1].said_kv_cache_bytes, Some((5.02 * (1u64 << 30) as f64).round() as u64), "by its ip");
    }

    #[test]
    fn each_executor_spells_its_flags() {
        let extra = vec!["--max-model-len".to_string(), "8192".to_string()];
        let api = ("0.0.0.0", 8000);
        assert_eq!(
            vllm_serve("org/m", &split(2, 1), Executor::Ray, api, &extra).join(" "),
            "vllm serve org/m --tensor-parallel-size 2 --distributed-executor-backend ray --host 0.0.0.0 --port 8000 \
             --max-model-len 8192"
        );
        assert_eq!(
            vllm_serve("org/m", &split(1, 1), Executor::Alone, api, &[]).join(" "),
            "vllm serve org/m --tensor-parallel-size 1 --host 0.0.0.0 --port 8000"
        );
        let master = SocketAddr::from((Ipv4Addr::new(192, 168, 2, 1), RENDEZVOUS_PORT));
        assert_eq!(
            vllm_serve("org/m", &split(1, 3), Executor::Mp { nodes: 3, rank: 0, master }, api, &[]).join(" "),
            "vllm serve org/m --tensor-parallel-size 1 --pipeline-parallel-size 3 --distributed-executor-backend mp \
             --nnodes 3 --node-rank 0 --master-addr 192.168.2.1 --master-port 29501 --host 0.0.0.0 --port 8000"
        );
        assert_eq!(
            vllm_serve("org/m", &split(1, 3), Executor::Mp { nodes: 3, rank: 2, master }, api, &extra).join(" "),
            "vllm serve org/m --tensor-parallel-size 1 --pipeline-parallel-size 3 --distributed-executor-backend mp \
             --nnodes 3 --node-rank 2 --master-addr 192.168.2.1 --master-port 29501 --headless --max-model-len 8192"
        );
    }

    #[test]
    fn expert_parallel_over_data_parallel_ranks_runs_a_dp_rank_on_every_node() {
        let nodes = [
            facts("node1", [192, 168, 100, 1], None),
            facts("node2", [192, 168, 100, 2], None),
            facts("node3", [192, 168, 100, 3], None),
        ];
        let ep = Parallelism { dp: 3, expert_parallel: true, ..split(1, 1) };
        let plan = planned(&nodes, request("/m", &[], &[], None), Backend::Mp, ep);
        let argv = |node: usize| plan.nodes[node].commands[0].argv.join(" ");
        assert!(
            argv(0).starts_with(
                "vllm serve /m --tensor-parallel-size 1 --data-parallel-size 3 --data-parallel-size-local 1 \
                 --data-parallel-address 192.168.100.1 --data-parallel-rpc-port 29501 --enable-expert-parallel --host"
            ),
            "{}",
            argv(0)
        );
        assert!(
            argv(2).starts_with(
                "vllm serve /m --tensor-parallel-size 1 --data-parallel-size 3 --data-parallel-size-local 1 \
                 --data-parallel-start-rank 2 --headless --data-parallel-address 192.168.100.1 \
                 --data-parallel-rpc-port 29501 --enable-expert-parallel"
            ),
            "{}",
            argv(2)
        );
        assert!(!argv(1).contains("--nnodes") && !argv(1).contains("--host"), "{}", argv(1));
        assert!(matches!(plan.steps[0].proofs[..], [Proof::RanksJoined { .. }, Proof::Endpoint]));
    }

    #[test]
    fn mp_runs_a_rank_on_every_node_at_once_and_no_ray() {
        let nodes = [facts("node1", [192, 168, 2, 1], None), facts("node2", [192, 168, 2, 2], None)];
        let plan = planned(&nodes, request("/models/tiny", &[], &[], None), Backend::Mp, split(1, 2));
        for (index, node) in plan.nodes.iter().enumerate() {
            let serve = &node.commands[0];
            assert_eq!(node.commands.len(), 1);
            let argv = EngineArgs::new(serve.argv.clone());
            assert_eq!(argv.value(Flag::new(&["--node-rank"])), Some(index.to_string().as_str()));
            assert_eq!(serve.env["NCCL_DEBUG"], "INFO");
            assert!(!serve.env.keys().any(|key| key.starts_with("RAY_")), "{:?}", serve.env);
        }
        assert_eq!(plan.nodes[1].role, Role::Worker);
        assert_eq!(plan.nodes[1].commands[0].secret_env, ["HF_TOKEN"], "no API key on a headless rank");
        assert_eq!(plan.steps.len(), 1);
        assert_eq!(plan.steps[0].starts, [(0, 0), (1, 0)]);
        assert!(matches!(plan.steps[0].proofs[..], [Proof::RanksJoined { .. }, Proof::Endpoint]));
        let quiet = request("/models/tiny", &[], &[("NCCL_DEBUG", "WARN")], None);
        let plan = planned(&nodes, quiet, Backend::Mp, split(1, 2));
        assert_eq!(plan.steps[0].proofs, [Proof::Endpoint], "no RCCL lines to read: the endpoint proves it");
    }

    /// The plan of `request` split `split`.
    fn planned(nodes: &[NodeForPlan], request: PlanRequest, backend: Backend, split: Parallelism) -> LaunchPlan {
        plan(nodes, &PlanRequest { split, ..request }, backend)
    }

    fn split(tp: usize, pp: usize) -> Parallelism {
        Parallelism::of(tp, pp, "")
    }

    fn facts(node: &str, ip: [u8; 4], cache: Option<&str>) -> NodeForPlan {
        NodeForPlan {
            node: node.into(),
            link_ip: std::net::Ipv4Addr::from(ip),
            transport: crate::spec::Transport::ThunderboltTcp { netdev: "thunderbolt0".into() },
            hub_cache: cache.map(str::to_string),
            programs: vec!["vllm".into(), "ray".into()],
            listen_port: RENDEZVOUS_PORT,
        }
    }

    fn request(model: &str, extra: &[&str], env: &[(&str, &str)], commit: Option<&str>) -> PlanRequest {
        PlanRequest {
            model: model.into(),
            served: model.into(),
            split: split(2, 1),
            host: "0.0.0.0".into(),
            port: 8000,
            extra: EngineArgs::new(extra.iter().map(|s| s.to_string()).collect()),
            hub_commit: commit.map(str::to_string),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            secrets: vec!["HF_TOKEN".into(), "RAY_AUTH_TOKEN".into()],
            image_flags: Some(vec![NNODES.into(), COMPILATION_SHORTHAND.into()]),
            cuda_graphs: false,
        }
    }

    #[test]
    fn ray_first_on_every_node_then_vllm_on_the_head() {
        let nodes = [facts("node1", [192, 168, 2, 1], None), facts("node2", [192, 168, 2, 2], None)];
        let plan = planned(&nodes, request("/models/tiny", &[], &[], None), Backend::Ray, split(2, 1));
        assert_eq!(plan.nodes[0].commands[0].argv[..3], ["ray", "start", "--head"]);
        assert_eq!(plan.nodes[1].commands[0].argv[..4], ["ray", "start", "--address", "192.168.2.1:6379"]);
        let serve = &plan.nodes[0].commands[1];
        assert_eq!(serve.argv[..5], ["vllm", "serve", "/models/tiny", "--tensor-parallel-size", "2"]);
        assert_eq!(serve.secret_env, ["HF_TOKEN", "RAY_AUTH_TOKEN"], "the driver presents Ray's token");
        assert_eq!(serve.env["RAY_AUTH_MODE"], "token");
        let order: Vec<Vec<(usize, usize)>> = plan.steps.iter().map(|s| s.starts.clone()).collect();
        assert_eq!(order, [vec![(0, 0)], vec![(1, 0)], vec![(0, 1)]]);
        assert!(plan.steps[1].proofs.is_empty(), "each worker's `ray start` returns once it joined");
        assert_eq!(plan.steps[2].proofs, [Proof::RayJoined, Proof::Endpoint], "Ray's table read while vLLM loads");
    }

    #[test]
    fn a_cached_hub_model_runs_offline_on_its_commit_everywhere() {
        let commit = "c12a728b0b9a3d8c0a9e6a1d5b1f4e2c3d4e5f60";
        let nodes =
            [facts("node1", [192, 168, 2, 1], Some("/h1/hub")), facts("node2", [192, 168, 2, 2], Some("/h2/hub"))];
        let plan = planned(&nodes, request("acme/tiny", &[], &[], Some(commit)), Backend::Ray, split(2, 1));
        for (node, cache) in plan.nodes.iter().zip(["/h1/hub", "/h2/hub"]) {
            for command in &node.commands {
                assert_eq!(command.env["HF_HUB_OFFLINE"], "1", "{}", node.node);
                assert_eq!(command.env["HF_HUB_CACHE"], cache);
            }
        }
        let serve = &plan.nodes[0].commands.last().unwrap().argv;
        assert!(serve.windows(2).any(|pair| pair == ["--revision", commit]), "{serve:?}");

        // The operator's own --revision and -e win.
        let asked = request("acme/tiny", &["--revision", "v1"], &[("HF_HUB_OFFLINE", "0")], Some(commit));
        let plan = planned(&nodes, asked, Backend::Ray, split(2, 1));
        let serve = &plan.nodes[0].commands.last().unwrap().argv;
        assert_eq!(serve.iter().filter(|w| *w == "--revision").count(), 1, "{serve:?}");
        assert_eq!(plan.nodes[1].commands[0].env["HF_HUB_OFFLINE"], "0");

        // A path: vLLM as before, on one node without Ray.
        let alone = [facts("node1", [127, 0, 0, 1], None)];
        let plan = planned(&alone, request("/models/tiny", &[], &[], None), Backend::Single, split(1, 1));
        assert!(!plan.nodes[0].commands[0].env.contains_key("HF_HUB_OFFLINE"));
        assert!(!plan.nodes[0].commands[0].argv.contains(&"--revision".to_string()));
        assert_eq!(plan.nodes[0].commands[0].secret_env, ["HF_TOKEN"], "no Ray, no Ray token");
        assert_eq!(plan.nodes[0].role, Role::Single);
    }
}
