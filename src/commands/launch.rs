//! `launch MODEL` on this node, and `cluster launch MODEL` on every node: the same launch (see
//! `cluster::launch`), over this machine or over ssh.

use crate::commands::arg_values::{bounded, MAX_RESERVE_GIB, MAX_SECONDS, MAX_TP};
use crate::serving::engine::Backend;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

use super::measured::render_measured;
use super::secrets::{api_key, hf_token};

use crate::cluster::launch::{launch, LaunchReport, LaunchRequest, OnDemandAsk};
use crate::error::{Error, Result};
use crate::model::hub_env::forwarded_hub_env;
use crate::node::ssh::{shell_quote, SshOptions};
use crate::node::Node;
use crate::output::{Output, Render, Style};
use crate::reporter::Bytes;
use crate::serving::engine::EngineRef;
use crate::serving::engine_args::EngineArgs;
use crate::serving::service_name::ServiceName;
use crate::spec::parse_env;
use crate::watch::{format_duration, parse_duration};

/// A model to serve, and how.
#[derive(Debug, Clone, Args)]
pub struct LaunchArgs {
    /// The model: a Hugging Face repository (`org/name`), a directory inside the toolbox (vLLM), a
    /// GGUF file on the head (llama.cpp; of a split model, the first part), or a Hub repository's
    /// GGUF by its quant (`org/name:Q4_K_M`, as `llama-server -hf` takes it; llama.cpp: only those
    /// files are downloaded, on the head only).
    #[arg(value_name = "MODEL")]
    pub model: String,

    /// The GGUF file of the Hub repository MODEL to serve, by its path in the repository (of a
    /// split model, the first part); llama.cpp [default: the quant after MODEL's ':', else the
    /// repository's only GGUF].
    #[arg(long, value_name = "NAME.gguf")]
    pub file: Option<String>,

    /// The serving engine [default: llama.cpp for a .gguf MODEL, REPO:QUANT or --file, else vllm].
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub engine: Option<EngineRef>,

    /// How vLLM spans the nodes [default: mp, or ray when the image's vLLM has no --nnodes].
    #[arg(long, value_enum, value_name = "BACKEND")]
    pub backend: Option<Backend>,

    /// vLLM's tensor-parallel size, one rank per node's GPU [default: the number of nodes on a
    /// RoCE link, else 1].
    #[arg(long, value_name = "N", value_parser = bounded::<usize>(1, MAX_TP))]
    pub tp: Option<usize>,

    /// vLLM's pipeline-parallel size (the layers split over the nodes) [default: the number of
    /// nodes on a TCP link (Thunderbolt, Ethernet), else 1].
    #[arg(long, value_name = "N", value_parser = bounded::<usize>(1, MAX_TP))]
    pub pp: Option<usize>,

    /// The address the endpoint (the router on the cluster's head) listens on [default: every
    /// interface, or where the running router listens].
    #[arg(long, value_name = "ADDRESS")]
    pub host: Option<std::net::Ipv4Addr>,

    /// The endpoint's port on the cluster's head [default: the running router's, else 8000]; each
    /// engine listens on a port of its own from 8001 up.
    #[arg(long, value_parser = bounded::<u16>(1, 65535))]
    pub port: Option<u16>,

    /// Seconds the engine may take to serve (loading weights takes minutes).
    #[arg(long, value_name = "SECONDS", default_value_t = 1800, value_parser = bounded::<u64>(1, MAX_SECONDS))]
    pub timeout: u64,

    /// Stop what serves now first, instead of refusing.
    #[arg(long)]
    pub replace: bool,

    /// Print each node's commands and environment; start nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Environment for the engine's processes, KEY=VALUE (repeatable; overrides the defaults shown
    /// by --dry-run).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,

    /// Read the Hugging Face token from FILE [default: the HF_TOKEN environment variable]. It reaches
    /// vLLM through its environment, never a command line, a log or a report.
    #[arg(long, value_name = "FILE")]
    pub hf_token_file: Option<PathBuf>,

    /// Require this API key at the endpoint, read from FILE [default: the STRIX_API_KEY environment
    /// variable; neither: no key]. The router checks it (in a 0600 file on the cluster's head),
    /// once, for every service; it is never in a command line, a log or a report.
    #[arg(long, value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,

    /// The service's name: the model id its clients send, what its engine serves it as, and what
    /// stop, logs, bench and status call it [default: the name the engine serves MODEL under: its
    /// naming flag after `--`, else MODEL as given].
    #[arg(long, value_name = "NAME")]
    pub name: Option<ServiceName>,

    /// The nodes it runs on, by the cluster's names, its head first [default: every node].
    #[arg(long, value_name = "NODE,NODE,...", value_delimiter = ',')]
    pub on: Vec<String>,

    /// The toolbox to serve from [default: the engine's: vllm, or llama].
    #[arg(long, env = "TOOLBOX_NAME", value_name = "NAME")]
    pub toolbox: Option<String>,

    /// Capture CUDA graphs across nodes. By default a multi-node vLLM launch runs without graph
    /// capture (it can freeze on distributed gfx1151 nodes, vllm#32180): with
    /// `--compilation-config {"cudagraph_mode":"NONE"}` where the image's vLLM takes it (Inductor's
    /// fusion stays), else `--enforce-eager`. The report says which.
    #[arg(long)]
    pub cuda_graphs: bool,

    /// Erase vLLM's compile cache of the image first, as after a crash. Each image keeps its own
    /// cache (a relaunch on an image that ran before starts warm, the caches of images the node
    /// no longer holds go), and a stop that finds a vLLM process dead erases it by itself.
    #[arg(long)]
    pub fresh_compile_cache: bool,

    /// GiB left free on every node for another service: the plan gives the KV cache the rest of
    /// the GPU's memory (vLLM: every block of it) [default: 0].
    #[arg(long, value_name = "GIB", default_value_t = 0, value_parser = bounded::<u64>(0, MAX_RESERVE_GIB))]
    pub keep_free: u64,

    /// Register it to start on demand instead of starting it now: planned (refused at once when
    /// it can never fit its nodes) and registered with the router, which starts it when a request
    /// names it, first stopping the services started on demand that idle longest on its nodes
    /// when they cannot hold it beside what runs there (by the plan's figures; a service launched
    /// without --on-demand is never stopped for one), and stops it after --idle without a request.
    #[arg(long)]
    pub on_demand: bool,

    /// With --on-demand: stop it after this long without a request (90s, 10m, 1h) [default: only
    /// when another needs its room].
    #[arg(long, value_name = "DURATION", requires = "on_demand")]
    pub idle: Option<String>,

    /// With --on-demand: how long a request waits for its start before a 503 (the start goes on;
    /// a request after it finds it starting or serving) [default: 5m].
    #[arg(long, value_name = "DURATION", requires = "on_demand")]
    pub wait: Option<String>,

    /// More arguments for the engine's server (`vllm serve`, `llama-server`).
    #[arg(last = true, value_name = "ENGINE ARGS")]
    pub extra: Vec<String>,
}

/// Launch on `nodes` and render the report; the exit code. `recipes`: where the models' recipes
/// are kept (a cluster's launch serves by them; None: none is looked for); `ssh`: how the
/// cluster's nodes are reached (a service started on demand is reached so from the head).
pub async fn run(
    args: &LaunchArgs,
    nodes: &[&dyn Node],
    recipes: Option<PathBuf>,
    ssh: Option<&SshOptions>,
    out: &Output,
) -> Result<i32> {
    let request = LaunchRequest { recipes, on_demand: on_demand(args, ssh)?, ..request(args)? };
    out.report(&launch(nodes, &request, out.reporter().as_ref()).await?);
    Ok(0)
}

/// How long a request waits for a start on demand unless `--wait` says.
const DEFAULT_WAIT: Duration = Duration::from_secs(300);

/// What `--on-demand` asks, when given.
fn on_demand(args: &LaunchArgs, ssh: Option<&SshOptions>) -> Result<Option<OnDemandAsk>> {
    if !args.on_demand {
        return Ok(None);
    }
    let wait = args.wait.as_deref().map(|wait| parse_duration("--wait", wait)).transpose()?.unwrap_or(DEFAULT_WAIT);
    if wait.is_zero() {
        return Err(Error::Usage("--wait 0: a request must wait for its start a moment at least (30s, 5m)".into()));
    }
    Ok(Some(OnDemandAsk {
        idle: args
            .idle
            .as_deref()
            .map(|idle| parse_duration("--idle", idle))
            .transpose()?
            .filter(|idle| !idle.is_zero()),
        wait,
        ssh_config: ssh
            .and_then(|ssh| ssh.config_file.as_ref())
            .map(|file| std::path::absolute(file).unwrap_or(file.clone())),
        connect_timeout: ssh.map_or(Duration::from_secs(10), |ssh| ssh.connect_timeout),
    }))
}

fn request(args: &LaunchArgs) -> Result<LaunchRequest> {
    let env = parse_env(&args.env)?;
    let extra = EngineArgs::new(args.extra.clone());
    let engine = args.engine.or_else(|| EngineRef::claiming(&args.model, args.file.as_deref())).unwrap_or_default();
    let service = match &args.name {
        Some(name) => name.clone(),
        None => ServiceName::parse(&engine.served_name(&args.model, &extra))?,
    };
    Ok(LaunchRequest {
        engine,
        toolbox: args.toolbox.clone().unwrap_or_else(|| engine.profile().toolbox.default_toolbox.to_string()),
        service,
        on: args.on.clone(),
        model: args.model.clone(),
        source: engine.source(&args.model, args.file.as_deref())?,
        backend: args.backend,
        tp: args.tp,
        pp: args.pp,
        host: args.host,
        port: args.port,
        timeout: Duration::from_secs(args.timeout),
        replace: args.replace,
        dry_run: args.dry_run,
        extra,
        env: env.clone(),
        hf_token: hf_token(args.hf_token_file.as_deref())?,
        api_key: api_key(args.api_key_file.as_deref())?,
        // The operator's Hub settings, and those given with -e, for a pull of the model.
        hub_env: forwarded_hub_env(std::env::vars().chain(env)),
        cuda_graphs: args.cuda_graphs,
        fresh_compile_cache: args.fresh_compile_cache,
        keep_free_gib: args.keep_free,
        recipes: None,
        pinned: None,
        on_demand: None,
    })
}

impl Render for LaunchReport {
    fn render(&self, out: &Output) {
        if self.dry_run {
            out.line(&format!("{} (dry run; nothing started)", out.paint("Launch plan", Style::Bold)));
            for node in &self.nodes {
                out.line(&format!("{} ({:?}, {})", out.paint(&node.node, Style::Bold), node.role, node.link_ip));
                for command in &node.commands {
                    let mut env: Vec<String> =
                        command.env.iter().map(|(k, v)| shell_quote(&format!("{k}={v}"))).collect();
                    env.extend(command.secret_env.iter().map(|k| format!("{k}=<secret>")));
                    let argv: Vec<String> = command.argv.iter().map(|a| shell_quote(a)).collect();
                    out.line(&format!("  env {} \\\n      {}", env.join(" "), argv.join(" ")));
                }
            }
            match self.hub_model.as_ref().map(|model| (&model.repo, &model.commit)) {
                Some((repo, Some(commit))) => {
                    out.line(&format!("{repo} at {commit} is in every node's cache: {} runs offline", self.engine))
                }
                Some((repo, None)) => out.line(&format!(
                    "a node lacks {repo}: the launch pulls it first (`cluster model pull {repo}`), from the Hub once"
                )),
                None => {}
            }
            for reason in &self.why {
                out.line(&format!("chosen: {reason}"));
            }
            self.render_plan(out);
            out.line(&format!("{} would answer at {} (its engine at {})", self.service, self.endpoint, self.upstream));
            return;
        }
        if let Some(registered) = &self.on_demand {
            let idle = registered.idle_seconds.map_or("only for another's room".to_string(), |idle| {
                format!("after {} without a request", format_duration(Duration::from_secs(idle)))
            });
            out.line(&format!(
                "{} {} registered on demand at {}: it starts when a request names it (on {}; a request waits up to \
                 {} for it), and stops {idle}",
                out.paint("✓", Style::Ok),
                self.service,
                self.endpoint,
                self.on.join(", "),
                format_duration(Duration::from_secs(registered.wait_seconds)),
            ));
            for (node, planned) in self.on.iter().zip(&registered.planned_bytes) {
                if let Some(bytes) = planned {
                    out.line(&format!("  {node}: {} of its GPU memory while it serves", Bytes(*bytes)));
                }
            }
            self.render_plan(out);
            out.line(&format!("  try: {}", self.curl_example()));
            return;
        }
        if let Some(pull) = self.hub_model.as_ref().and_then(|model| model.pulled.as_ref()) {
            out.line(&format!(
                "pulled {} at {} first: {} from the Hub, {} over the cluster link",
                pull.repo,
                pull.commit.short(),
                Bytes(pull.head.downloaded_bytes),
                Bytes(pull.link_bytes)
            ));
        }
        let nodes = self.nodes.len();
        let how = match (self.tp, self.pp) {
            (Some(tp), Some(pp)) if nodes > 1 => {
                format!("{} over {}, TP {tp} × PP {pp}", self.engine, self.backend.name())
            }
            (Some(tp), _) => format!("{} tensor parallel {tp}", self.engine),
            (None, _) if nodes > 1 => format!("{}, the layers split", self.engine),
            (None, _) => self.engine.to_string(),
        };
        out.line(&format!(
            "{} serving {} at {} ({how} over {nodes} node{} ({}), its engine at {}, {:.0} s)",
            out.paint("✓", Style::Ok),
            self.service,
            self.endpoint,
            if nodes == 1 { "" } else { "s" },
            self.on.join(", "),
            self.upstream,
            self.seconds_to_serve.unwrap_or_default()
        ));
        self.render_plan(out);
        for warning in &self.warnings {
            out.line(&format!("{} {warning}", out.paint("!", Style::Warn)));
        }
        out.line(&format!("  try: {}", self.curl_example()));
    }
}

impl LaunchReport {
    /// The plan's choice and its flags, then each node's planned figures beside the engine's.
    fn render_plan(&self, out: &Output) {
        let Some(fit) = &self.fit else { return };
        if let (Some(layout), Some(chosen)) = (fit.chosen_layout(), &fit.chosen) {
            out.line(&format!("  plan: {}: {}", layout.label(), chosen.why));
        }
        if !fit.engine_args.is_empty() {
            out.line(&format!("  plan's flags: {}", fit.engine_args.join(" ")));
        }
        if !self.measured.is_empty() {
            out.line(&format!("  planned beside what {} said it allocated:", self.engine));
            render_measured(self.engine.name(), &self.measured, out);
        }
    }
}
