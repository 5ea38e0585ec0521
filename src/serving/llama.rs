//! llama.cpp as a serving engine: `llama-server` on the head, across nodes through llama.cpp's RPC
//! backend. Every other node runs `rpc-server` bound to its cluster-link address only (it has no
//! authentication of its own; its banner says never to expose it), with its local tensor cache
//! (`-c`), so a relaunch sends the weights' hashes instead of the weights. The head's
//! `llama-server` lists every worker in `--rpc`, offloads every layer (`-ngl 999`: its own GPU and
//! the workers'), and splits the model's layers over them, its `/metrics` on (`--metrics`). The model is a GGUF file on the head
//! only: the workers get their tensors over RPC.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::error::{Error, Result};
use crate::image::reference::ImageRef;
use crate::link::ports::LinkPort;
use crate::model::gguf_pick::gguf_parts;
use crate::model::shape::ModelShape;
use crate::model::source::{ModelFormat, ModelSource};
use crate::serving::engine::{Backend, EngineProfile, EngineRef, ServingEngine, ToolboxProfile};
use crate::serving::engine_args::{EngineArgs, Flag};
use crate::serving::fit::llama::LlamaRules;
use crate::serving::fit::llama_build::{self, LlamaBuild};
use crate::serving::fit::{llama_log, Fit, FitAsk, FitNodes, KvCacheDtype, Measured, NodeLog, NodeMemory, Planned};
use crate::serving::logs::LogTail;
use crate::serving::parallelism::Parallelism;
use crate::serving::plan::{
    with_overrides, LaunchPlan, LaunchStep, NodeForPlan, NodePlan, PlanRequest, PlannedCommand, Proof,
};
use crate::serving::record::Role;
use crate::serving::state::FlagQuestion;
use crate::spec::{ToolboxNeeds, Transport};
use crate::verify::programs::RequiredProgram;

/// llama.cpp, as the launch and everything else ask it.
pub const LLAMA_CPP: EngineRef = EngineRef::of(&LlamaCpp);

/// `rpc-server`'s port on each worker (its own default).
pub const RPC_PORT: u16 = 50052;
/// The process name (and log) of the head's server.
pub const SERVER: &str = "llama-server";
/// The process name (and log) of a worker's RPC server.
pub const RPC_SERVER: &str = "rpc-server";
/// The RPC server's program, as llama.cpp builds it now (`ggml-rpc-server`) and before.
pub const RPC_PROGRAMS: [&str; 2] = ["ggml-rpc-server", "rpc-server"];
/// What llama-server logs for each device a model is loaded onto: `… using device RPC0
/// (192.168.2.2:50052) …` names a worker by its endpoint.
pub const DEVICE_LINE: &str = "using device";

// llama-server's flags the launch reads or writes, by the spellings its common/arg.cpp takes; the
// first is the one the launch (and the plan, `serving::fit::llama`) writes.
const CTX_SIZE: Flag = Flag::new(&["-c", "--ctx-size"]);
const CACHE_TYPE_K: Flag = Flag::new(&["-ctk", "--cache-type-k"]);
const CACHE_TYPE_V: Flag = Flag::new(&["-ctv", "--cache-type-v"]);
const DEVICE: Flag = Flag::new(&["--device", "-dev"]);
const TENSOR_SPLIT: Flag = Flag::new(&["--tensor-split", "-ts"]);
const ALIAS: Flag = Flag::new(&["--alias", "-a"]);
const METRICS: Flag = Flag::new(&["--metrics"]);

/// What the head's `llama-server` is set to, each by a variable rather than a flag: a build
/// refuses a flag it does not know but ignores a variable it does not read. `-e` overrides any.
/// - No mmap: on Strix Halo's unified memory a mapped multi-GB file makes loading crawl (kyuz0's
///   toolboxes say to always turn it off).
/// - Verbosity 4: the devices the model is loaded onto, which the launch's proof reads, are logged
///   at 4 only by builds since `--load-mode`.
///
/// Each setting's spellings, newest first, as llama.cpp's common/arg.cpp registers them
/// (`set_env`): `--load-mode` (`LLAMA_ARG_LOAD_MODE`), which replaced `--mmap/--no-mmap`
/// (`LLAMA_ARG_MMAP`), which replaced `--no-mmap` alone (`LLAMA_ARG_NO_MMAP`, from when flags got
/// variables); `-lv` as `LLAMA_ARG_LOG_VERBOSITY`, `LLAMA_LOG_VERBOSITY` before. Which ones a
/// build reads, its `--help` says (`(env: …)` after each flag): the head's image is asked
/// ([`ServingEngine::image_question`]), and a toolbox not asked (a dry run of a stopped one) is
/// taken for today's llama.cpp, which the plan says.
pub const HEAD_SETTINGS: [HeadSetting; 2] = [
    HeadSetting {
        what: "mmap off",
        spellings: &[("LLAMA_ARG_LOAD_MODE", "none"), ("LLAMA_ARG_MMAP", "0"), ("LLAMA_ARG_NO_MMAP", "1")],
        without: "it maps the model (loading is slow on unified memory)",
    },
    HeadSetting {
        what: "log verbosity 4",
        spellings: &[("LLAMA_ARG_LOG_VERBOSITY", "4"), ("LLAMA_LOG_VERBOSITY", "4")],
        without: "it logs at its own verbosity",
    },
];

/// One setting of the head's `llama-server`: its variables and values, newest first.
#[derive(Debug)]
pub struct HeadSetting {
    pub what: &'static str,
    pub spellings: &'static [(&'static str, &'static str)],
    /// What the server does when its build reads none of them.
    pub without: &'static str,
}

/// The head's environment for an image whose `llama-server --help` named `named` of the
/// settings' variables (None: not asked), and what the plan says of it.
fn head_env(named: Option<&[String]>) -> (BTreeMap<String, String>, Vec<String>) {
    let mut env = BTreeMap::new();
    let mut notes = Vec::new();
    for setting in &HEAD_SETTINGS {
        let reads = |variable: &str| named.is_none_or(|named| named.iter().any(|n| n == variable));
        match setting.spellings.iter().find(|(variable, _)| reads(variable)) {
            Some((variable, value)) => {
                env.insert(variable.to_string(), value.to_string());
                if named.is_some() && Some(variable) != setting.spellings.first().map(|(newest, _)| newest) {
                    notes.push(format!(
                        "{}: {variable}={value}, the spelling the image's llama-server reads (an older build, its --help \
                         says)",
                        setting.what
                    ));
                }
            }
            None => notes.push(format!(
                "{}: the image's llama-server reads none of {} (its --help), so {}",
                setting.what,
                setting.spellings.iter().map(|(variable, _)| *variable).collect::<Vec<_>>().join(", "),
                setting.without
            )),
        }
    }
    if named.is_none() {
        notes.push(format!(
            "the stopped toolbox's llama-server was not asked which variables it reads: today's llama.cpp assumed ({})",
            env.iter().map(|(key, value)| format!("{key}={value}")).collect::<Vec<_>>().join(", ")
        ));
    }
    (env, notes)
}

/// llama.cpp's constants.
const PROFILE: EngineProfile = EngineProfile {
    name: "llama.cpp",
    aliases: &["llamacpp", "llama-cpp"],
    about: "llama.cpp: the layers split over the nodes (rpc-server on each worker), GGUF models",
    title: "llama-server",
    // kyuz0's llama.cpp toolboxes: `vulkan-radv` is the one its README recommends for most users
    // and all models; the ROCm tags need /dev/kfd.
    toolbox: ToolboxProfile {
        image_repo: "docker.io/kyuz0/amd-strix-halo-toolboxes",
        channels: &[
            "vulkan-radv",
            "vulkan-amdvlk",
            "rocm-6.4.4",
            "rocm-6.4.4-rocwmma",
            "rocm-7.1.1",
            "rocm-7.1.1-rocwmma",
            "rocm-7rc",
            "rocm-7rc-rocwmma",
            "rocm-7alpha",
            "rocm-7alpha-rocwmma",
            "rocm-7alpha-rocwmma-improved",
        ],
        default_toolbox: "llama",
        ask_channel: false,
    },
    image_programs: &[
        RequiredProgram { names: &[SERVER], probe: "--version" },
        RequiredProgram { names: &RPC_PROGRAMS, probe: "--help" },
    ],
    link_ports: &[LinkPort { port: RPC_PORT, what: "llama.cpp's rpc-server", from_head: Some("rpc port") }],
    node_port: RPC_PORT,
    // A GGUF: its first part, then the others of a split model.
    model_format: ModelFormat::Gguf,
    missing_model_fix: "put every part of the GGUF at that path on the head (the workers need no copy)",
    server: SERVER,
    keeps_compile_cache: false,
    // llama-server's `LLAMA_API_KEY` (`--api-key`'s).
    api_key_env: "LLAMA_API_KEY",
    progress: crate::watch::LLAMA_CPP_PROGRESS,
    // `--alias`, which names the model at its endpoint.
    name_flag: ALIAS,
    // The head's llama.cpp (`serving::fit::llama_build`): its version, the GPUs its build sees (a
    // CPU build sees none, and the layers then go to the workers alone), its RPC devices' names.
    head_question: Some(&llama_build::QUESTION),
};

struct LlamaCpp;

impl ServingEngine for LlamaCpp {
    fn profile(&self) -> &'static EngineProfile {
        &PROFILE
    }

    /// ROCm's /dev/kfd for a ROCm build (its tag says so: `rocm-…`), not for Vulkan, which needs
    /// /dev/dri alone. The node's RDMA devices and memlock for its RPC, whatever the tag: a build
    /// with `-DGGML_RPC_RDMA=ON` upgrades each connection to RDMA when both ends find a device
    /// (ggml-rpc's transport.cpp, docs/backend/RPC-RDMA.md), and registers its buffers (6.25 MiB a
    /// connection: the head's, one per worker, pass the common 8 MiB limit). No NCCL: it runs no RCCL.
    fn needs(&self, image_ref: &str) -> ToolboxNeeds {
        let tag = ImageRef::parse(image_ref).ok().and_then(|r| r.tag);
        ToolboxNeeds { kfd: tag.is_some_and(|tag| tag.starts_with("rocm")), rdma: true, nccl: false }
    }

    /// A GGUF by path, or GGUF file(s) of a Hub repository.
    fn source(&self, model: &str, file: Option<&str>) -> Result<ModelSource> {
        ModelSource::gguf(model, file)
    }

    /// The head reads every part of a GGUF given by its path; the workers get tensors over RPC.
    fn model_paths(&self, source: &ModelSource, role: Role) -> Result<Vec<String>> {
        match source {
            ModelSource::Path(path) if role != Role::Worker => gguf_parts(path),
            _ => Ok(Vec::new()),
        }
    }

    /// The head's GGUF (the first part of a split model), hashed where it is read.
    fn identity_file(&self, source: &ModelSource, role: Role) -> Option<String> {
        match source {
            ModelSource::Path(path) if role != Role::Worker => Some(path.clone()),
            _ => None,
        }
    }

    fn backends(&self, asked: Option<Backend>, nodes: usize) -> Result<Vec<Backend>> {
        match asked {
            Some(_) => Err(Error::Usage("--backend is vLLM's: llama.cpp spans the nodes with its RPC backend".into())),
            None if nodes == 1 => Ok(vec![Backend::Single]),
            None => Ok(vec![Backend::Rpc]),
        }
    }

    /// Which spellings of the head's settings ([`HEAD_SETTINGS`]) its `llama-server` reads.
    fn image_question(&self, _candidates: &[Backend]) -> Option<FlagQuestion> {
        let variables =
            HEAD_SETTINGS.iter().flat_map(|setting| setting.spellings.iter().map(|(variable, _)| *variable));
        Some(FlagQuestion { help: vec![SERVER.into(), "--help".into()], flags: variables.map(String::from).collect() })
    }

    fn settle_backend(&self, candidates: &[Backend], _flags: Option<&[String]>) -> (Backend, Vec<String>) {
        (candidates.first().copied().unwrap_or_default(), Vec::new())
    }

    fn parallelism_asked(&self, tp: Option<usize>, pp: Option<usize>, _nodes: usize) -> Result<Option<Parallelism>> {
        match (tp, pp) {
            (None, None) => Ok(None),
            _ => Err(Error::Usage(
                "--tp and --pp are vLLM's: llama.cpp splits the model's layers over every node's GPU".into(),
            )),
        }
    }

    /// Its layers over every node's GPU (llama.cpp's `--split-mode layer`): a pipeline.
    fn parallelism(&self, nodes: usize, _transport: &Transport) -> Parallelism {
        let why = match nodes {
            1 => "one node, one GPU".to_string(),
            _ => format!("the model's layers split over the {nodes} nodes' GPUs (llama.cpp's RPC backend)"),
        };
        Parallelism::of(1, nodes, why)
    }

    fn programs(&self, _backend: Backend, role: Role) -> Vec<&'static [&'static str]> {
        match role {
            Role::Worker => vec![&RPC_PROGRAMS],
            Role::Head | Role::Single => vec![&[SERVER]],
        }
    }

    fn plan(&self, nodes: &[NodeForPlan], request: &PlanRequest, backend: Backend) -> LaunchPlan {
        plan(nodes, request, backend)
    }

    /// A worker's `rpc-server` whose log says its last connection runs over TCP, and why, as its
    /// log tells it apart ([`RpcLink`]): a build without RDMA, no device found on this node, none
    /// offered by the head, or a connection that did not come up.
    fn tcp_on_roce(&self, logs: &[LogTail], node: &str) -> Option<String> {
        let lines = &logs.iter().find(|tail| tail.file == RPC_SERVER)?.lines;
        let why = match RpcLink::of(lines) {
            RpcLink::Rdma => return None,
            RpcLink::BuiltWithout => "its rpc-server was built without RDMA (its banner says `transport : TCP`, not \
                                      `TCP (RDMA auto-negotiate enabled)`). Fix: an image whose llama.cpp is built \
                                      with -DGGML_RPC_RDMA=ON"
                .to_string(),
            RpcLink::NotProbed => format!(
                "its rpc-server, built with RDMA, found no RDMA device with a GID for its link address: its toolbox \
                 has no /dev/infiniband (one made before llama.cpp toolboxes carried RDMA: `strix-toolbox cluster \
                 refresh` makes it again), GGML_RDMA_DEV/GGML_RDMA_GID name a device or GID that does not hold the \
                 link address, or the toolbox's memlock limit is too low for its buffers. Fix: `strix-toolbox \
                 cluster verify` on {node}"
            ),
            RpcLink::HeadOfferedNone => "its rpc-server found RDMA, but the head's llama-server offered none: built \
                                         without RDMA, or its own probe found no device (its toolbox without \
                                         /dev/infiniband, or a memlock limit below the 6.25 MiB it registers for each \
                                         worker). Fix: `strix-toolbox cluster verify` on the head"
                .to_string(),
            RpcLink::ActivateFailed(line) => format!(
                "both ends found RDMA but the connection did not come up ({line}): check that the nodes' RoCE v2 GIDs \
                 are on one subnet and the path MTU (`strix-toolbox cluster verify`)"
            ),
        };
        Some(format!(
            "llama.cpp's RPC to {node} runs over TCP although the link is RoCE: {why}; RDMA is about 4% faster at \
             prefill and 6% at decode (llama.cpp's docs/backend/RPC-RDMA.md)"
        ))
    }

    /// llama-server's own fields, and the model its clients name: a router in front of it sends
    /// the request by its `model` (llama-server ignores the field).
    fn tokenize_request(&self, model: &str, text: &str, add_special: bool) -> serde_json::Value {
        serde_json::json!({ "model": model, "content": text, "add_special": add_special })
    }

    /// `-c`/`--ctx-size` and the cache's type (`-ctk`/`--cache-type-k`, when `-ctv` agrees).
    fn fit_asked(&self, extra: &EngineArgs, _env: &BTreeMap<String, String>) -> Result<FitAsk> {
        let context = extra.value(CTX_SIZE).and_then(|c| c.trim().parse::<u64>().ok()).filter(|&c| c > 0);
        let (key, value) = (extra.value(CACHE_TYPE_K), extra.value(CACHE_TYPE_V));
        let kv_cache_dtype = key.filter(|key| value.is_none_or(|value| value == *key)).map(str::to_string);
        Ok(FitAsk { max_model_len: context, kv_cache_dtype, ..FitAsk::default() })
    }

    fn head_gpu(&self, said: &str) -> Option<bool> {
        LlamaBuild::read(said).head_devices.map(|devices| !devices.is_empty())
    }

    /// llama.cpp's rules (`serving::fit::llama`): the layers over every device by its memory, the
    /// RPC servers first (as llama.cpp lists them), then the head's own GPU when it has one; every
    /// device named (`--device`) where the build's names are known, an MLA model's cache as the
    /// build keeps it.
    fn fit(&self, shape: &ModelShape, nodes: &FitNodes, asked: &FitAsk) -> Result<Fit> {
        let mut rules = LlamaRules::default();
        if let Some(name) = &asked.kv_cache_dtype {
            rules.kv_cache_dtype =
                KvCacheDtype::named(name, format!("the cache type asked, {name}")).ok_or_else(|| {
                    Error::Usage(format!(
                    "cache type {name}: not one this plan knows. Fix: f16, bf16, f32, q8_0, q4_0, q4_1, iq4_nl, q5_0 \
                     or q5_1"
                ))
                })?;
        }
        rules.asked_context = asked.max_model_len;
        let (head, workers) = match nodes.memory.split_first() {
            Some((head, workers)) => (Some(head), workers),
            None => (None, &[][..]),
        };
        let mut devices: Vec<NodeMemory> = workers.to_vec();
        let head_device = match head.filter(|_| nodes.head_gpu != Some(false)) {
            Some(head) => {
                devices.push(head.clone());
                Some(devices.len() - 1)
            }
            None => None,
        };
        let build = nodes.head_said.as_deref().map(LlamaBuild::read).unwrap_or_default();
        let (stores_v, why) = build.mla_stores_v();
        rules.mla_stores_v = stores_v.then(|| why.clone());
        let mut notes = Vec::new();
        if shape.mla.is_some() && !stores_v {
            notes.push(why);
        }
        if !workers.is_empty() {
            match device_names(&build, workers.len(), head_device.is_some()) {
                Ok(names) => rules.device_names = Some(names),
                Err(why) => notes.push(format!(
                    "llama.cpp's own device order is assumed (the RPC servers, then the head's GPU): {why}; builds from \
                     #23007 to #23868 (May 2026) leave the head's GPU out when --rpc is given"
                )),
            }
        }
        let mut fit = crate::serving::fit::llama::fit(shape, &devices, head_device, &rules);
        fit.notes.extend(notes);
        Ok(fit)
    }

    /// Its layers over every node's GPU, whatever the plan: the plan only says how many each takes.
    fn planned_split(&self, _fit: &Fit) -> Option<Parallelism> {
        None
    }

    /// `--device`, `--tensor-split` and `-c`, unless the operator gave their own (`-dev`, `-ts`,
    /// `-c`/`--ctx-size`).
    fn planned_args(&self, fit: &Fit, extra: &EngineArgs) -> Vec<String> {
        let dropped: Vec<Flag> = [DEVICE, TENSOR_SPLIT, CTX_SIZE].into_iter().filter(|own| extra.gives(*own)).collect();
        EngineArgs::new(fit.engine_args.clone()).without(&dropped).into_words()
    }

    /// The head's `llama-server` log: each RPC device's buffers by its server's address (a
    /// worker's link address), the head's own device and host buffers (the token embedding,
    /// `CPU_Mapped`) as the head's, and the context it took.
    fn measured(&self, planned: &[Planned], logs: &[NodeLog]) -> Vec<Measured> {
        let mut measured = Measured::unsaid(planned);
        for log in logs {
            let Some(lines) = log.lines_of(SERVER) else { continue };
            let said = llama_log::parse(&lines);
            for device in &said.devices {
                let node = match rpc_address(&device.device) {
                    Some(ip) => logs.iter().find(|l| l.link_ip == ip).map(|l| l.node),
                    None => Some(log.node),
                };
                let Some(figures) = measured.iter_mut().find(|m| Some(m.planned.node.as_str()) == node) else {
                    continue;
                };
                Measured::add(&mut figures.said_weights_bytes, Some(device.model_bytes).filter(|&b| b > 0));
                Measured::add(&mut figures.said_kv_cache_bytes, Some(device.kv_bytes).filter(|&b| b > 0));
                figures.said_context_tokens = said.context_tokens;
            }
        }
        measured
    }
}

/// The server address an RPC device's name carries (`RPC0[192.168.2.2:50052]`).
fn rpc_address(device: &str) -> Option<std::net::Ipv4Addr> {
    let inside = device.strip_prefix("RPC")?.split_once('[')?.1.strip_suffix(']')?;
    inside.parse::<SocketAddr>().ok().and_then(|address| match address.ip() {
        std::net::IpAddr::V4(ip) => Some(ip),
        std::net::IpAddr::V6(_) => None,
    })
}

/// What an `rpc-server`'s log says of the link its last connection runs over, in ggml-rpc's own
/// lines (ggml/src/ggml-rpc: the server's banner, and transport.cpp's GGML_LOG_INFO/ERROR; the
/// RDMA transport came with llama.cpp#20590, docs/backend/RPC-RDMA.md): the banner's
/// `transport      : TCP` (no RDMA in the build; a build before it has no such line) or
/// `transport      : TCP (RDMA auto-negotiate enabled)`; then for each `Accepted client
/// connection`, `RDMA probed: dev=… gid=…` once this end registered its buffers on a device with a
/// GID for its link address, and `RDMA activated: …` once both ends upgraded, or `RDMA activate
/// failed, staying on TCP`. A probe that finds nothing, or a peer that offers no RDMA, is silent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpcLink {
    /// The last connection runs over RDMA.
    Rdma,
    /// The build has no RDMA (or predates it): TCP whatever the node has.
    BuiltWithout,
    /// Built with RDMA, and this node's probe found no device with a GID for its link address.
    NotProbed,
    /// This node probed; the head offered no RDMA of its own.
    HeadOfferedNone,
    /// Both ends probed; the connection did not come up: the line that says so.
    ActivateFailed(String),
}

impl RpcLink {
    /// The link `lines` of an `rpc-server` log show, judged on its last connection.
    pub fn of(lines: &[String]) -> RpcLink {
        let last = lines.iter().rposition(|line| line.contains("Accepted client connection")).unwrap_or(0);
        let connection = &lines[last..];
        let said = |what: &str| connection.iter().find(|line| line.contains(what));
        if said("RDMA activated").is_some() {
            RpcLink::Rdma
        } else if let Some(failed) = said("RDMA activate failed") {
            RpcLink::ActivateFailed(failed.trim().to_string())
        } else if said("RDMA probed").is_some() {
            RpcLink::HeadOfferedNone
        } else if lines.iter().any(|line| line.contains("RDMA auto-negotiate enabled")) {
            RpcLink::NotProbed
        } else {
            RpcLink::BuiltWithout
        }
    }
}

/// On a RoCE link, the RDMA device and GID index ggml-rpc's transport uses (`GGML_RDMA_DEV`,
/// `GGML_RDMA_GID`): the node's own, as NCCL's are, instead of its guess from the TCP socket's
/// address; a build without RDMA ignores them.
fn rdma_env(transport: &Transport) -> BTreeMap<String, String> {
    match transport {
        Transport::Roce { device, gid_index, .. } => {
            [("GGML_RDMA_DEV", device.clone()), ("GGML_RDMA_GID", gid_index.to_string())]
                .map(|(key, value)| (key.to_string(), value))
                .into()
        }
        _ => BTreeMap::new(),
    }
}

/// `rpc-server` on a worker: bound to its link address, with its local cache.
pub fn rpc_server(program: &str, listen: SocketAddr) -> Vec<String> {
    vec![program.to_string(), "-H".into(), listen.ip().to_string(), "-p".into(), listen.port().to_string(), "-c".into()]
}

/// `llama-server` on the head: the model, every worker's RPC server, all layers offloaded, its
/// Prometheus metrics on (`--metrics`: the watch reads its progress there; tools/server/README.md
/// lists `/metrics` as off unless asked), the name it serves the model under, on `host:port`. (No
/// mmap: see [`HEAD_SETTINGS`].)
pub fn llama_server(
    gguf: &str,
    workers: &[SocketAddr],
    alias: Option<&str>,
    host: &str,
    port: u16,
    extra: &EngineArgs,
) -> Vec<String> {
    let mut argv: Vec<String> = ["llama-server", "-m", gguf].map(String::from).to_vec();
    if !workers.is_empty() {
        let list: Vec<String> = workers.iter().map(SocketAddr::to_string).collect();
        argv.extend(["--rpc".to_string(), list.join(",")]);
    }
    argv.extend(["-ngl", "999"].map(String::from));
    // `/metrics` answers only with `--metrics` (tools/server/README.md): `cluster metrics`,
    // `cluster top` and the watch read the engine there.
    if !extra.gives(METRICS) {
        argv.push(METRICS.name().into());
    }
    if let Some(alias) = alias {
        argv.extend([ALIAS.name().to_string(), alias.to_string()]);
    }
    argv.extend(["--host".to_string(), host.to_string(), "--port".to_string(), port.to_string()]);
    argv.extend(extra.words().iter().cloned());
    argv
}

/// What each node runs: every worker's `rpc-server` at once, proven by each answering on its link
/// address from the head; then `llama-server` on the head, proven by its endpoint and by its log
/// naming every worker as a device it loaded the model onto. One node: `llama-server` alone.
fn plan(nodes: &[NodeForPlan], request: &PlanRequest, backend: Backend) -> LaunchPlan {
    let listen = |facts: &NodeForPlan| SocketAddr::from((facts.link_ip, facts.listen_port));
    let workers: Vec<SocketAddr> =
        if backend == Backend::Rpc { nodes[1..].iter().map(listen).collect() } else { Vec::new() };
    // The operator's own name wins; otherwise the model as given, as vLLM names it.
    let alias = request.extra.value(ALIAS).is_none().then_some(request.served.as_str());
    let mut planned = Vec::new();
    let mut notes = Vec::new();
    for (index, facts) in nodes.iter().enumerate() {
        let (role, command) = match (backend, index) {
            (Backend::Rpc, 0) | (_, 0) => {
                let argv = llama_server(&request.model, &workers, alias, &request.host, request.port, &request.extra);
                let (mut settings, said) = head_env(request.image_flags.as_deref());
                notes.extend(said);
                if backend == Backend::Rpc {
                    settings.extend(rdma_env(&facts.transport));
                }
                let env = with_overrides(settings, request);
                let role = if backend == Backend::Rpc { Role::Head } else { Role::Single };
                let secrets = [PROFILE.api_key_env];
                (role, PlannedCommand::process(SERVER, argv, env).with_secrets(&secrets, request))
            }
            _ => {
                let env = with_overrides(rdma_env(&facts.transport), request);
                let program =
                    RPC_PROGRAMS.iter().find(|p| facts.programs.iter().any(|f| f == *p)).unwrap_or(&RPC_PROGRAMS[0]);
                let argv = rpc_server(program, listen(facts));
                (Role::Worker, PlannedCommand::process(RPC_SERVER, argv, env).listening(listen(facts)))
            }
        };
        planned.push(NodePlan { node: facts.node.clone(), role, link_ip: facts.link_ip, commands: vec![command] });
    }
    let steps = if backend == Backend::Rpc {
        let listeners: Vec<(usize, SocketAddr)> = (1..nodes.len()).map(|i| (i, workers[i - 1])).collect();
        let mentions = listeners.iter().map(|(node, address)| (*node, address.to_string())).collect();
        vec![
            LaunchStep {
                starts: (1..nodes.len()).map(|node| (node, 0)).collect(),
                proofs: vec![Proof::Reachable { listeners }],
            },
            LaunchStep {
                starts: vec![(0, 0)],
                proofs: vec![Proof::Endpoint, Proof::HeadLog { prefix: DEVICE_LINE.into(), mentions }],
            },
        ]
    } else {
        vec![LaunchStep { starts: vec![(0, 0)], proofs: vec![Proof::Endpoint] }]
    };
    LaunchPlan { engine: LLAMA_CPP, backend, nodes: planned, steps, notes }
}

/// Every device of a split over `workers` RPC servers (and the head's GPU when `head`), by the
/// names `build` gives them, in llama.cpp's order: the RPC servers as `--rpc` lists them, then the
/// head's GPU. Why not, when the build's names are not known.
fn device_names(build: &LlamaBuild, workers: usize, head: bool) -> std::result::Result<Vec<String>, String> {
    let version = build.version.as_deref().unwrap_or("its version unknown");
    match build.numbers_rpc_devices() {
        Some(true) => {}
        Some(false) => {
            return Err(format!(
                "the image's llama.cpp ({version}) names an RPC device by its address, which the launch gives it \
                 later"
            ))
        }
        None => return Err(format!("the image's llama.cpp ({version}) did not say how it names its RPC devices")),
    }
    let mut names: Vec<String> = (0..workers).map(|index| format!("RPC{index}")).collect();
    if head {
        match build.head_devices.as_ref().and_then(|devices| devices.first()) {
            Some(gpu) => names.push(gpu.clone()),
            None => return Err("the head's llama-server did not name its GPU".to_string()),
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Transport;
    use std::net::Ipv4Addr;

    fn facts(node: &str, ip: [u8; 4], programs: &[&str]) -> NodeForPlan {
        NodeForPlan {
            node: node.into(),
            link_ip: Ipv4Addr::from(ip),
            transport: Transport::ThunderboltTcp { netdev: "thunderbolt0".into() },
            hub_cache: None,
            programs: programs.iter().map(|p| p.to_string()).collect(),
            listen_port: RPC_PORT,
        }
    }

    fn request(extra: &[&str]) -> PlanRequest {
        PlanRequest {
            model: "/models/tiny.gguf".into(),
            served: "/models/tiny.gguf".into(),
            split: Parallelism::of(1, 1, ""),
            host: "0.0.0.0".into(),
            port: 8080,
            extra: EngineArgs::new(extra.iter().map(|s| s.to_string()).collect()),
            hub_commit: None,
            env: BTreeMap::new(),
            secrets: vec!["LLAMA_API_KEY".into(), "HF_TOKEN".into()],
            image_flags: None,
            cuda_graphs: false,
        }
    }

    #[test]
    fn workers_serve_rpc_on_their_link_address_and_the_head_uses_them_all() {
        let nodes = [
            facts("node1", [192, 168, 2, 1], &["llama-server"]),
            facts("node2", [192, 168, 2, 2], &["ggml-rpc-server"]),
            facts("node3", [192, 168, 2, 3], &["rpc-server"]),
        ];
        let plan = plan(&nodes, &request(&[]), Backend::Rpc);
        assert!(!plan.nodes.iter().flat_map(|n| &n.commands).any(|c| c.uses_compile_cache), "vLLM's cache");
        assert_eq!(plan.nodes[1].commands[0].argv.join(" "), "ggml-rpc-server -H 192.168.2.2 -p 50052 -c");
        assert_eq!(plan.nodes[2].commands[0].argv.join(" "), "rpc-server -H 192.168.2.3 -p 50052 -c", "an older build");
        let head = &plan.nodes[0].commands[0];
        assert_eq!(
            head.argv.join(" "),
            "llama-server -m /models/tiny.gguf --rpc 192.168.2.2:50052,192.168.2.3:50052 -ngl 999 --metrics \
             --alias /models/tiny.gguf --host 0.0.0.0 --port 8080",
            "--metrics: the watch reads its progress there"
        );
        assert_eq!(head.secret_env, ["LLAMA_API_KEY"], "the key, and no HF token: the head has the file");
        assert_eq!(head.env["LLAMA_ARG_LOAD_MODE"], "none", "no mmap, in the variable today's llama.cpp reads");
        assert!(plan.nodes[1].commands[0].env.is_empty(), "{:?}", plan.nodes[1].commands[0].env);
        assert_eq!(plan.steps[0].starts, [(1, 0), (2, 0)], "the workers first, at once");
        assert!(matches!(&plan.steps[0].proofs[0], Proof::Reachable { listeners } if listeners.len() == 2));
        assert!(
            matches!(&plan.steps[1].proofs[1], Proof::HeadLog { mentions, .. } if mentions[1].1 == "192.168.2.3:50052")
        );
        assert_eq!((plan.nodes[0].role, plan.nodes[1].role), (Role::Head, Role::Worker));
    }

    #[test]
    fn the_heads_settings_take_the_spelling_its_build_reads_and_say_what_was_assumed() {
        use crate::serving::state::named_in;
        let flags = LLAMA_CPP.image_question(&[Backend::Rpc]).expect("the head's help is asked").flags;
        let pairs = |env: &BTreeMap<String, String>| {
            env.iter().map(|(key, value)| format!("{key}={value}")).collect::<Vec<_>>().join(" ")
        };
        // The real llama-server of target/llama-cpp (llama-cpp-python 0.3.36's llama.cpp).
        let help = include_str!("../../tests/fixtures/engine-logs/llama-server-help.txt");
        let today = named_in(help, &flags);
        assert_eq!(today, ["LLAMA_ARG_LOAD_MODE", "LLAMA_ARG_LOG_VERBOSITY"], "what that build registers");
        let (env, notes) = head_env(Some(&today));
        assert_eq!(pairs(&env), "LLAMA_ARG_LOAD_MODE=none LLAMA_ARG_LOG_VERBOSITY=4");
        assert!(notes.is_empty(), "nothing assumed: {notes:?}");
        // Older builds' help, as their common/arg.cpp registered the flags: `--mmap, --no-mmap`
        // with LLAMA_ARG_MMAP; before, `--no-mmap` with LLAMA_ARG_NO_MMAP and `-lv` with
        // LLAMA_LOG_VERBOSITY.
        let mmap_pair = "--mmap, --no-mmap  whether to memory-map model (default: enabled)\n  (env: LLAMA_ARG_MMAP)\n\
                         -lv, --verbosity, --log-verbosity N  Set the verbosity threshold.\n  (env: \
                         LLAMA_ARG_LOG_VERBOSITY)\n";
        let (env, notes) = head_env(Some(&named_in(mmap_pair, &flags)));
        assert_eq!(pairs(&env), "LLAMA_ARG_LOG_VERBOSITY=4 LLAMA_ARG_MMAP=0");
        assert!(notes.len() == 1 && notes[0].contains("LLAMA_ARG_MMAP=0"), "{notes:?}");
        let oldest = "--no-mmap  do not memory-map model\n  (env: LLAMA_ARG_NO_MMAP)\n-lv, --verbosity, \
                      --log-verbosity N\n  (env: LLAMA_LOG_VERBOSITY)\n";
        let (env, notes) = head_env(Some(&named_in(oldest, &flags)));
        assert_eq!(pairs(&env), "LLAMA_ARG_NO_MMAP=1 LLAMA_LOG_VERBOSITY=4");
        assert_eq!(notes.len(), 2, "{notes:?}");
        // A help that names none (it failed): nothing set, and said.
        let (env, notes) = head_env(Some(&[]));
        assert!(env.is_empty() && notes.iter().any(|note| note.contains("it maps the model")), "{notes:?}");
        // Not asked (a dry run of a stopped toolbox): today's llama.cpp, and the plan says so.
        let (env, notes) = head_env(None);
        assert_eq!(pairs(&env), "LLAMA_ARG_LOAD_MODE=none LLAMA_ARG_LOG_VERBOSITY=4");
        assert!(notes.len() == 1 && notes[0].contains("not asked"), "{notes:?}");
        let plan = plan(&[facts("node1", [127, 0, 0, 1], &["llama-server"])], &request(&[]), Backend::Single);
        assert_eq!(plan.notes, notes, "the launch's report says it");
    }

    #[test]
    fn one_node_runs_llama_server_alone_and_the_operators_alias_wins() {
        let plan =
            plan(&[facts("node1", [127, 0, 0, 1], &["llama-server"])], &request(&["-a", "tiny"]), Backend::Single);
        let argv = plan.nodes[0].commands[0].argv.join(" ");
        assert!(!argv.contains("--rpc") && !argv.contains("--alias") && argv.ends_with("-a tiny"), "{argv}");
        assert_eq!(plan.nodes[0].role, Role::Single);
    }

    #[test]
    fn it_spans_nodes_over_rpc_alone_and_takes_no_tp_pp_or_backend() {
        assert_eq!(LLAMA_CPP.backends(None, 3).unwrap(), [Backend::Rpc]);
        assert!(matches!(LLAMA_CPP.backends(Some(Backend::Ray), 2), Err(Error::Usage(_))));
        assert_eq!(LLAMA_CPP.parallelism_asked(None, None, 3).unwrap(), None);
        assert!(matches!(LLAMA_CPP.parallelism_asked(Some(2), None, 3), Err(Error::Usage(_))));
        let layers = LLAMA_CPP.parallelism(2, &Transport::ThunderboltTcp { netdev: "thunderbolt0".into() });
        assert_eq!((layers.tp, layers.pp), (1, 2), "its layers split over both nodes");
    }

    #[test]
    fn the_head_alone_reads_the_gguf_and_a_gguf_is_its_model() {
        assert_eq!(LLAMA_CPP.programs(Backend::Rpc, Role::Worker), [&RPC_PROGRAMS[..]]);
        let split = ModelSource::Path("/m/q-00001-of-00002.gguf".into());
        assert_eq!(LLAMA_CPP.model_paths(&split, Role::Head).unwrap().len(), 2, "every part, on the head");
        assert!(LLAMA_CPP.model_paths(&split, Role::Worker).unwrap().is_empty(), "the workers need no copy");
        assert_eq!(LLAMA_CPP.identity_file(&split, Role::Head).as_deref(), Some("/m/q-00001-of-00002.gguf"));
        assert_eq!(EngineRef::claiming("org/name:Q8_0", None), Some(LLAMA_CPP));
        assert_eq!(EngineRef::claiming("org/name", None), None, "a repository of safetensors is nobody's alone");
    }

    #[test]
    fn llama_cpp_toolboxes_are_kyuz0s_with_its_tags_as_channels() {
        let profile = &PROFILE.toolbox;
        assert_eq!(profile.image_repo, "docker.io/kyuz0/amd-strix-halo-toolboxes");
        assert_eq!(profile.channels[0], "vulkan-radv", "its README's recommendation");
        assert_eq!(LLAMA_CPP.toolbox_for("vulkan-radv"), "llama");
        assert_eq!(LLAMA_CPP.toolbox_for("rocm-7.1.1"), "llama-rocm-7.1.1");
        assert!(LLAMA_CPP.parse_channel("latest").unwrap_err().to_string().contains("vulkan-radv"));
        assert!(LLAMA_CPP.needs("docker.io/kyuz0/amd-strix-halo-toolboxes:rocm-7.1.1-rocwmma").kfd);
        let vulkan = LLAMA_CPP.needs("docker.io/kyuz0/amd-strix-halo-toolboxes:vulkan-radv");
        assert!(!vulkan.kfd && vulkan.rdma && !vulkan.nccl, "RDMA for its RPC, no RCCL: {vulkan:?}");
    }

    #[test]
    fn the_plan_reads_its_context_and_cache_type_and_asks_the_head_for_its_gpus() {
        let words = |w: &[&str]| EngineArgs::new(w.iter().map(|s| s.to_string()).collect());
        let asked = LLAMA_CPP
            .fit_asked(&words(&["--ctx-size", "2048", "-ctk", "q8_0", "-ctv", "q8_0"]), &BTreeMap::new())
            .unwrap();
        assert_eq!((asked.max_model_len, asked.kv_cache_dtype.as_deref()), (Some(2048), Some("q8_0")));
        let mixed = LLAMA_CPP.fit_asked(&words(&["-c", "0", "-ctk", "q8_0", "-ctv", "f16"]), &BTreeMap::new()).unwrap();
        assert_eq!((mixed.max_model_len, mixed.kv_cache_dtype), (None, None), "-c 0 is the model's own");
        assert_eq!(LLAMA_CPP.head_gpu("Available devices:\n  (none)\n"), Some(false), "a CPU build");
        let vulkan = "ggml_vulkan: Found 1 Vulkan devices:\nAvailable devices:\n  Vulkan0: AMD Radeon Graphics \
                      (RADV GFX1151) (131072 MiB, 120000 MiB free)\n";
        assert_eq!(LLAMA_CPP.head_gpu(vulkan), Some(true));
        assert_eq!(LLAMA_CPP.head_gpu("error: invalid argument: --list-devices"), None, "an older build");
        assert_eq!(PROFILE.model_format, ModelFormat::Gguf);
    }

    #[test]
    fn the_workers_come_first_and_a_head_without_a_gpu_holds_no_layers() {
        use crate::model::shape::fixtures::{with_weights, LLAMA_3_3_70B};
        let shape = with_weights(LLAMA_3_3_70B);
        let gib = 1u64 << 30;
        let memory = vec![
            NodeMemory::new("node1", 64 * gib, 0, 4 * gib),
            NodeMemory::new("node2", 120 * gib, 0, 4 * gib),
            NodeMemory::new("node3", 96 * gib, 0, 4 * gib),
        ];
        let thunderbolt = Transport::ThunderboltTcp { netdev: "thunderbolt0".into() };
        let mut nodes =
            FitNodes { memory, transport: thunderbolt, head_gpu: None, head_said: None, image: Default::default() };
        let fit = LLAMA_CPP.fit(&shape, &nodes, &FitAsk::default()).expect("a plan");
        let devices: Vec<&str> = fit.nodes.iter().map(|n| n.node.as_str()).collect();
        assert_eq!(devices, ["node2", "node3", "node1"], "RPC servers first, then the head's GPU");
        nodes.head_gpu = Some(false);
        let asked = FitAsk { max_model_len: Some(2000), ..FitAsk::default() };
        let fit = LLAMA_CPP.fit(&shape, &nodes, &asked).expect("a plan");
        let devices: Vec<&str> = fit.nodes.iter().map(|n| n.node.as_str()).collect();
        assert_eq!(devices, ["node2", "node3"], "the head's CPU build holds no layers");
        let figures = fit.chosen_layout().and_then(|l| l.fits()).expect("it fits on the two");
        assert_eq!(figures.context_tokens, 2048, "-c 2000 is padded to 2048 cells, as llama.cpp pads it");
        assert!(fit.notes[0].contains("no GPU of its own"), "{:?}", fit.notes);
    }

    /// The head's toolbox's answer to the plan's question: llama.cpp `version`, its devices, and
    /// whether its rpc-server takes `--device`.
    fn said(version: &str, devices: &[&str], rpc_device_flag: bool) -> String {
        let mut text = format!("version: {version}\n--- strix: list-devices\nAvailable devices:\n");
        if devices.is_empty() {
            text.push_str("  (none)\n");
        }
        for device in devices {
            text.push_str(&format!("  {device}: AMD Radeon Graphics (131072 MiB, 120000 MiB free)\n"));
        }
        text.push_str("--- strix: rpc-server --help\n  -H, --host HOST   host to bind to\n");
        if rpc_device_flag {
            text.push_str("  -d, --device <dev1,dev2,...>     comma-separated list of devices\n");
        }
        text
    }

    #[test]
    fn every_device_is_named_in_the_plans_order_when_the_build_names_them_by_number() {
        use crate::model::shape::fixtures::{with_weights, LLAMA_3_3_70B};
        let shape = with_weights(LLAMA_3_3_70B);
        let gib = 1u64 << 30;
        let memory = vec![
            NodeMemory::new("node1", 120 * gib, 0, 4 * gib),
            NodeMemory::new("node2", 120 * gib, 0, 4 * gib),
            NodeMemory::new("node3", 96 * gib, 0, 4 * gib),
        ];
        let thunderbolt = Transport::ThunderboltTcp { netdev: "thunderbolt0".into() };
        let nodes = |said: String| {
            let head_gpu = LLAMA_CPP.head_gpu(&said);
            FitNodes {
                memory: memory.clone(),
                transport: thunderbolt.clone(),
                head_gpu,
                head_said: Some(said),
                image: Default::default(),
            }
        };
        let arg =
            |fit: &Fit, flag: &str| fit.engine_args.windows(2).find(|pair| pair[0] == flag).map(|pair| pair[1].clone());
        // A ROCm build whose rpc-server exposes devices by number: the workers', then the head's GPU,
        // as many as --tensor-split has entries (no build's default selection can drop one).
        let rocm = LLAMA_CPP.fit(&shape, &nodes(said("9600 (0a1b2c3)", &["ROCm0"], true)), &FitAsk::default());
        let rocm = rocm.expect("a plan");
        assert_eq!(arg(&rocm, "--device").as_deref(), Some("RPC0,RPC1,ROCm0"), "{:?}", rocm.engine_args);
        let split = arg(&rocm, "--tensor-split").expect("a split");
        assert_eq!(split.split(',').count(), 3, "{split}");
        // A CPU head (the tests' build): the workers' devices alone.
        let cpu =
            LLAMA_CPP.fit(&shape, &nodes(said("0.5.0-dev (build 0, commit unknown)", &[], true)), &FitAsk::default());
        assert_eq!(arg(&cpu.expect("a plan"), "--device").as_deref(), Some("RPC0,RPC1"));
        // An older build names an RPC device by its address: llama.cpp's own order, said so.
        let old = LLAMA_CPP.fit(&shape, &nodes(said("5000 (0a1b2c3)", &["Vulkan0"], false)), &FitAsk::default());
        let old = old.expect("a plan");
        assert_eq!(arg(&old, "--device"), None);
        assert!(old.notes.iter().any(|n| n.contains("own device order") && n.contains("#23868")), "{:?}", old.notes);
        // The operator's own --device wins.
        let extra = EngineArgs::new(["-dev", "RPC1,RPC0,ROCm0"].map(String::from).to_vec());
        assert!(!LLAMA_CPP.planned_args(&rocm, &extra).contains(&"--device".to_string()));
        assert!(LLAMA_CPP.planned_args(&rocm, &EngineArgs::default()).contains(&"RPC0,RPC1,ROCm0".to_string()));
    }

    #[test]
    fn a_deepseek_gguf_is_cached_as_the_images_llama_cpp_caches_it() {
        use crate::model::shape::{fixtures::deepseek_v3_gguf, gguf, Sizing};
        let header = gguf::parse(&deepseek_v3_gguf(true).build()).expect("a header");
        let Ok(Sizing::Sized(shape)) = gguf::shape(&header, &[]) else { panic!("sized") };
        let gib = 1u64 << 30;
        let memory =
            vec![NodeMemory::new("node1", 120 * gib, 0, 4 * gib), NodeMemory::new("node2", 120 * gib, 0, 4 * gib)];
        let per_token = |version: &str| {
            let said = said(version, &["ROCm0"], true);
            let nodes = FitNodes {
                memory: memory.clone(),
                transport: Transport::ThunderboltTcp { netdev: "thunderbolt0".into() },
                head_gpu: Some(true),
                head_said: Some(said),
                image: Default::default(),
            };
            let fit = LLAMA_CPP.fit(&shape, &nodes, &FitAsk::default()).expect("a plan");
            let figures = fit.chosen_layout().and_then(|l| l.fits()).cloned().expect("it fits");
            let bytes: u64 = figures.nodes.iter().map(|n| n.kv_per_token.full_bytes).sum();
            (bytes, fit.notes)
        };
        // A build with the V-less cache: the latent alone, (512 + 64) × 2 bytes × 61 layers.
        let (latent, notes) = per_token("0.3.0-dev (build 10711, commit 9723942ad)");
        assert_eq!(latent, 576 * 2 * 61);
        assert!(notes.iter().any(|n| n.contains("latent alone")), "{notes:?}");
        // A build from before it: K 576 and V 512 a token and layer, 1.9 times as much.
        let (both, notes) = per_token("4800 (aabbccd)");
        assert_eq!(both, (576 + 512) * 2 * 61);
        assert_eq!(both * 10 / latent, 18, "1.89×");
        assert!(
            notes.iter().any(|n| n.contains("predates the V-less cache") && n.contains("K 576 and V 512")),
            "{notes:?}"
        );
        // Unknown: the larger cache, and said.
        let (unknown, notes) = per_token("");
        assert_eq!(unknown, both);
        assert!(notes.iter().any(|n| n.contains("unknown")), "{notes:?}");
    }

    #[test]
    fn on_roce_both_ends_of_rpc_name_the_nodes_rdma_device_and_gid() {
        let roce = |ip: [u8; 4], program: &str| NodeForPlan {
            transport: Transport::Roce {
                device: "rocep194s0f0".into(),
                port: 1,
                netdev: "enp194s0f0".into(),
                gid_index: 3,
            },
            ..facts("n", ip, &[program])
        };
        let rdma = plan(
            &[roce([192, 168, 100, 1], "llama-server"), roce([192, 168, 100, 2], "rpc-server")],
            &request(&[]),
            Backend::Rpc,
        );
        for node in &rdma.nodes {
            let env = &node.commands[0].env;
            assert_eq!(
                (env["GGML_RDMA_DEV"].as_str(), env["GGML_RDMA_GID"].as_str()),
                ("rocep194s0f0", "3"),
                "{env:?}"
            );
        }
        let tcp = plan(
            &[facts("n1", [192, 168, 2, 1], &["llama-server"]), facts("n2", [192, 168, 2, 2], &["rpc-server"])],
            &request(&[]),
            Backend::Rpc,
        );
        assert!(!tcp.nodes[1].commands[0].env.contains_key("GGML_RDMA_DEV"), "Thunderbolt: no RDMA");
    }

    /// The real `rpc-server` log of a build without RDMA (tests/fixtures/engine-logs), and the same
    /// log as a build with RDMA writes it: its banner, and after the last connection ggml-rpc's
    /// lines `after` (as docs/backend/RPC-RDMA.md shows them).
    fn rpc_log(rdma_build: bool, after: &[&str]) -> Vec<String> {
        let log = include_str!("../../tests/fixtures/engine-logs/rpc-server-tcp.log");
        let mut lines: Vec<String> = log.lines().map(str::to_string).collect();
        if rdma_build {
            let banner = lines.iter_mut().find(|line| line.trim() == "transport      : TCP").expect("the banner");
            *banner = "  transport      : TCP (RDMA auto-negotiate enabled)".into();
        }
        let last = lines.iter().rposition(|line| line == "Accepted client connection").expect("a connection");
        lines.splice(last + 1..last + 1, after.iter().map(|line| line.to_string()));
        lines
    }

    #[test]
    fn tcp_on_roce_says_what_kept_rdma_from_coming_up() {
        const PROBED: &str = "RDMA probed: dev=rocep194s0f0 gid=3 RoCEv2 qpn=328 inline=316";
        const ACTIVATED: &str = "RDMA activated: qpn=328->488 mtu=1024 rx_depth=24";
        const FAILED: &str = "RDMA activate failed, staying on TCP";
        assert_eq!(RpcLink::of(&rpc_log(false, &[])), RpcLink::BuiltWithout, "the real TCP build");
        assert_eq!(RpcLink::of(&rpc_log(true, &[PROBED, ACTIVATED])), RpcLink::Rdma);
        assert_eq!(RpcLink::of(&rpc_log(true, &[])), RpcLink::NotProbed);
        assert_eq!(RpcLink::of(&rpc_log(true, &[PROBED])), RpcLink::HeadOfferedNone);
        assert_eq!(RpcLink::of(&rpc_log(true, &[PROBED, FAILED])), RpcLink::ActivateFailed(FAILED.into()));
        let older = ["Starting RPC server v2.0.0", "  endpoint       : 0.0.0.0:50052", "Accepted client connection"];
        assert_eq!(RpcLink::of(&older.map(String::from)), RpcLink::BuiltWithout, "before the transport line");
        // An earlier connection over RDMA, the last one not: the last decides.
        let mut again = rpc_log(true, &[PROBED, ACTIVATED]);
        again.extend(["Client connection closed", "Accepted client connection"].map(String::from));
        assert_eq!(RpcLink::of(&again), RpcLink::NotProbed);

        let roce =
            Transport::Roce { device: "rocep194s0f0".into(), port: 1, netdev: "enp194s0np0".into(), gid_index: 3 };
        let warned = |lines: Vec<String>| {
            let logs = vec![LogTail { service: "m".into(), file: RPC_SERVER.into(), lines, end: 0 }];
            crate::serving::engine::tcp_on_roce(LLAMA_CPP, &roce, &[("node2".into(), logs)])
        };
        assert!(warned(rpc_log(true, &[PROBED, ACTIVATED])).is_empty());
        let built = warned(rpc_log(false, &[]));
        assert!(built[0].contains("node2") && built[0].contains("-DGGML_RPC_RDMA=ON"), "{built:?}");
        let unprobed = warned(rpc_log(true, &[])).join("");
        assert!(unprobed.contains("/dev/infiniband") && !unprobed.contains("-DGGML_RPC_RDMA=ON"), "{unprobed}");
        assert!(warned(rpc_log(true, &[PROBED]))[0].contains("the head's llama-server offered none"));
        assert!(warned(rpc_log(true, &[PROBED, FAILED]))[0].contains(FAILED));
        let thunderbolt = Transport::ThunderboltTcp { netdev: "thunderbolt0".into() };
        let logs = vec![LogTail { service: "m".into(), file: RPC_SERVER.into(), lines: rpc_log(false, &[]), end: 0 }];
        assert!(crate::serving::engine::tcp_on_roce(LLAMA_CPP, &thunderbolt, &[("node2".into(), logs)]).is_empty());
    }

    #[test]
    fn each_device_is_its_nodes_by_the_rpc_servers_address() {
        use crate::serving::fit::{NodeLog, Planned};
        use crate::serving::logs::LogTail;
        // The real run in tests/fixtures/engine-logs: two RPC servers, -ts 3,1, the head on the CPU.
        let log = include_str!("../../tests/fixtures/engine-logs/llama-server-rpc-ts-3-1.log");
        let head = [LogTail {
            service: "tiny".into(),
            file: SERVER.into(),
            lines: log.lines().map(str::to_string).collect(),
            end: 0,
        }];
        let logs = [
            NodeLog { node: "node1", link_ip: std::net::Ipv4Addr::new(10, 0, 0, 1), tails: &head },
            NodeLog { node: "node2", link_ip: std::net::Ipv4Addr::LOCALHOST, tails: &[] },
        ];
        let planned = vec![Planned { node: "node2".into(), ..Planned::default() }];
        let measured = LLAMA_CPP.measured(&planned, &logs);
        // Both servers listen on 127.0.0.1 in that run: their buffers add up on the one node.
        assert_eq!(measured[0].said_weights_bytes, Some(2_359_296 + (11.72 * (1u64 << 20) as f64).round() as u64));
        assert_eq!((measured[0].said_kv_cache_bytes, measured[0].said_context_tokens), (Some(1_572_864), Some(2048)));
        assert_eq!(rpc_address("RPC0[192.168.2.2:50052]"), Some(std::net::Ipv4Addr::new(192, 168, 2, 2)));
        assert_eq!(rpc_address("Vulkan0"), None);
    }
}
