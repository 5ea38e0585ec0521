//! The whole command-line surface. Parsed once here; everything downstream reads typed options.

use std::path::PathBuf;

use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::engine::kind::EngineChoice;
use crate::manager::ManagerChoice;
use crate::serving::engine::{Backend, EngineRef, ENGINES};
use crate::serving::service_name::ServiceName;

/// Create and refresh vLLM toolboxes with a gfx1151 RCCL on AMD Strix Halo RDMA clusters.
///
/// On each node: `strix-toolbox doctor` tells what the node has and lacks,
/// `strix-toolbox refresh` pulls the image and (re)creates the toolbox with
/// /dev/kfd, /dev/dri, /dev/infiniband, the right groups and memlock,
/// and `strix-toolbox enter` gets you into it.
/// The longest wait a flag takes, in seconds: a week, the longest a refresh waits for another
/// (more means a mistake).
const MAX_SECONDS: u64 = crate::apply::lock::MAX_WAIT.as_secs();
/// The longest an idle ssh master may wait for the next cluster command: a day.
const MAX_SSH_PERSIST: u64 = 24 * 3600;
/// The most older pins `--keep` keeps.
const MAX_KEEP: u64 = 1000;
/// The largest `--tp`: one rank per node's GPU, far past any cluster's size.
const MAX_TP: u64 = 1024;
/// The most log lines `logs -n` shows of each log.
const MAX_LINES: u64 = 1_000_000;
/// The most GiB a plan keeps back on a node.
const MAX_RESERVE_GIB: u64 = 1 << 20;

/// Tokens as vLLM's `--max-model-len` takes them (`32768`, `32k`, `25.6k`, `32K`, `1T`).
fn tokens(text: &str) -> std::result::Result<u64, String> {
    crate::serving::vllm_args::human_readable_int("--max-model-len", text).map_err(|error| error.to_string())
}

/// A number from `min` to `max`: anything else is a usage error (exit 2) that says the range.
fn bounded<T>(min: u64, max: u64) -> clap::builder::RangedU64ValueParser<T>
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
    <T as TryFrom<u64>>::Error: std::error::Error + Send + Sync + 'static,
{
    clap::builder::RangedU64ValueParser::new().range(min..=max)
}

#[derive(Debug, Parser)]
#[command(name = "strix-toolbox", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalOptions,

    #[command(subcommand)]
    pub command: Command,
}

/// Options every command accepts.
#[derive(Debug, Clone, Args)]
pub struct GlobalOptions {
    /// Read the node's devices, sysfs, /etc/group and /proc from this directory instead of /.
    #[arg(long, global = true, env = "STRIX_HOST_ROOT", value_name = "DIR", default_value = "/")]
    pub host_root: PathBuf,

    /// Container engine: podman when installed or CONTAINER_HOST is set, else docker. (It was
    /// `--engine` and `STRIX_ENGINE`; `--engine` now names the serving engine.)
    #[arg(
        long,
        global = true,
        env = "STRIX_CONTAINER_ENGINE",
        value_name = "ENGINE",
        value_enum,
        default_value_t = EngineChoice::Auto
    )]
    pub container_engine: EngineChoice,

    /// Print machine-readable JSON on stdout instead of text.
    #[arg(long, global = true)]
    pub json: bool,

    /// Never use colour (also honoured: the NO_COLOR environment variable).
    #[arg(long, global = true)]
    pub no_color: bool,
}

/// The container engine's old spelling, `--engine auto|podman|docker` or `STRIX_ENGINE`, as a
/// usage error that says what it is now: `--engine` names the serving engine (vllm, llama.cpp),
/// and a leftover would otherwise read as a wrong serving engine or be silently ignored. Arguments
/// after `--` are the serving engine's own and are not looked at.
pub fn renamed_spelling(args: &[std::ffi::OsString], env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if let Some(value) = env("STRIX_ENGINE") {
        return Some(format!(
            "STRIX_ENGINE={value}: the container engine's variable is now STRIX_CONTAINER_ENGINE (and the flag \
             --container-engine); unset STRIX_ENGINE"
        ));
    }
    let words: Vec<&str> = args.iter().skip(1).map(|a| a.to_str().unwrap_or_default()).collect();
    let words = &words[..words.iter().position(|w| *w == "--").unwrap_or(words.len())];
    for (index, word) in words.iter().enumerate() {
        let value = match word.strip_prefix("--engine") {
            Some("") => words.get(index + 1).copied().unwrap_or_default(),
            Some(rest) => rest.strip_prefix('=').unwrap_or_default(),
            None => continue,
        };
        if ["auto", "podman", "docker"].contains(&value) {
            return Some(format!(
                "--engine {value}: the container engine is now chosen with --container-engine {value} (or \
                 STRIX_CONTAINER_ENGINE); --engine names the serving engine, vllm or llama.cpp"
            ));
        }
    }
    None
}

/// `--container-engine`: the domain's choice, spelled for the command line here so clap stays in
/// this module.
impl ValueEnum for EngineChoice {
    fn value_variants<'a>() -> &'a [Self] {
        &[EngineChoice::Auto, EngineChoice::Podman, EngineChoice::Docker]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            EngineChoice::Auto => PossibleValue::new("auto").help(
                "podman when installed or CONTAINER_HOST is set, else docker when installed or DOCKER_HOST is set",
            ),
            EngineChoice::Podman => PossibleValue::new("podman"),
            EngineChoice::Docker => PossibleValue::new("docker"),
        })
    }
}

/// `--engine`: the serving engine.
impl ValueEnum for EngineRef {
    fn value_variants<'a>() -> &'a [Self] {
        &ENGINES
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()).aliases(self.profile().aliases.iter().copied()).help(self.profile().about))
    }
}

/// `--backend`: how vLLM spans the nodes.
impl ValueEnum for Backend {
    fn value_variants<'a>() -> &'a [Self] {
        &[Backend::Mp, Backend::Ray]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        match self {
            Backend::Mp => Some(PossibleValue::new("mp").help("vLLM's multiprocessing executor: no Ray anywhere")),
            Backend::Ray => Some(PossibleValue::new("ray").help("Ray on every node, vLLM's Ray executor on the head")),
            Backend::Single | Backend::Rpc => None,
        }
    }
}

/// `--manager`: who should own the toolbox.
impl ValueEnum for ManagerChoice {
    fn value_variants<'a>() -> &'a [Self] {
        &[ManagerChoice::Auto, ManagerChoice::Toolbox, ManagerChoice::Distrobox, ManagerChoice::Native]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            ManagerChoice::Auto => PossibleValue::new("auto")
                .help("Toolbx with podman if installed, else distrobox (not as root), else native"),
            ManagerChoice::Toolbox => PossibleValue::new("toolbox").help("Toolbx (`toolbox enter NAME` keeps working)"),
            ManagerChoice::Distrobox => {
                PossibleValue::new("distrobox").help("Distrobox (`distrobox enter NAME` keeps working)")
            }
            ManagerChoice::Native => {
                PossibleValue::new("native").help("The engine directly, with the integration a toolbox gives")
            }
        })
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Report what this node has: GPU, RDMA ports, groups, memlock, kernel parameters, container flags.
    Detect,
    /// Check this node against what the cluster needs; each problem comes with its fix.
    Doctor,
    /// Pull (or build) the image and create or update the toolbox, atomically.
    Refresh(RefreshArgs),
    /// Open a shell in the toolbox, or run CMD in it and pass its output and exit code through.
    Enter(EnterArgs),
    /// Prove from inside the toolbox that it works: devices open, memlock, groups, NCCL environment,
    /// every RCCL copy carries gfx1151, and (where the image has the tools) ROCm, RDMA and torch.
    Verify(VerifyArgs),
    /// List the toolboxes strix-toolbox manages.
    List,
    /// This node's strix-toolbox version, engine and toolboxes (what `cluster status` reads).
    Status,
    /// Remove a managed toolbox.
    Rm(RmArgs),
    /// Recreate a toolbox from its previous pinned image.
    Rollback(RollbackArgs),
    /// Plan MODEL on this node without downloading it: its shape from its headers, the GPU's memory
    /// (its GTT less what is in use less a reserve), the context that fits and the engine's flags.
    Plan(PlanArgs),
    /// Serve MODEL from this node's toolbox (`vllm serve`, or `llama-server` for a GGUF), detached,
    /// as the service NAME, until it answers at the OpenAI-compatible endpoint (the router here,
    /// which sends each request to the service its `model` names; `cluster launch` serves across
    /// the cluster's nodes).
    Launch(LaunchArgs),
    /// Stop a service `launch` started here (its engine's processes; Ray when a cluster launch
    /// started it), and its route.
    Stop(StopArgs),
    /// The logs of a service `launch` started here (the engine's processes, and Ray's).
    Logs(LogsArgs),
    /// Measure what `launch` serves here as `vllm bench serve` does (TTFT, TPOT, ITL, E2EL, output
    /// tokens/s at each concurrency level), keep the result, and with --gate check its answers token
    /// for token against the model's reference; `bench history`, `bench compare A B`.
    Bench(BenchCommand),
    /// Build the image with a custom RCCL through the engine's build API.
    Build(BuildArgs),
    /// Work with RCCL artifacts.
    #[command(subcommand)]
    Rccl(RcclCommand),
    /// Models in this node's Hugging Face cache: pull one (with huggingface_hub in the toolbox,
    /// every file checked against its hash), list what is there.
    #[command(subcommand)]
    Model(ModelCommand),
    /// The whole cluster from one machine, over ssh: doctor, refresh, verify, install, launch and
    /// stop a model, its logs and status, models in every cache.
    Cluster(ClusterArgs),
    /// Print a shell completion script.
    Completions(CompletionsArgs),
    /// Answer a cluster head's calls, one JSON line each, on stdin and stdout (the head starts this
    /// over ssh on every node, once per cluster command).
    #[command(hide = true)]
    Agent,
    /// The cluster's endpoint: route each request to the service its `model` names, as the routes
    /// file in DIR says, until no route is left (a launch starts this on the cluster's head,
    /// detached).
    #[command(hide = true)]
    Router(RouterArgs),
}

/// The router's address and files.
#[derive(Debug, Clone, Args)]
pub struct RouterArgs {
    /// Where it listens.
    #[arg(long, value_name = "ADDRESS:PORT")]
    pub listen: std::net::SocketAddr,

    /// The directory of its routes file and key file (the launch that starts it names its own).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
}

/// What a refresh makes, and how: shared by `refresh` and `cluster refresh`.
#[derive(Debug, Clone, Args)]
pub struct RefreshOptions {
    /// Image channel: vLLM's latest or dev (asked on a terminal when omitted; latest otherwise);
    /// llama.cpp's are the tags of kyuz0/amd-strix-halo-toolboxes [default: vulkan-radv].
    #[arg(value_name = "CHANNEL")]
    pub channel: Option<String>,

    /// The serving engine the toolbox is for: its image, channels, devices and checks.
    #[arg(long, value_enum, value_name = "ENGINE", default_value_t = EngineRef::default())]
    pub engine: EngineRef,

    /// Image repository (the channel becomes its tag) [default: the engine's:
    /// docker.io/kyuz0/vllm-therock-gfx1151, or docker.io/kyuz0/amd-strix-halo-toolboxes].
    #[arg(long, env = "IMAGE_REPO")]
    pub image_repo: Option<String>,

    /// Full image reference; overrides --image-repo and the channel's tag.
    #[arg(long, value_name = "REF")]
    pub image: Option<String>,

    /// Toolbox name [default: vllm for latest, vllm-dev for dev; llama for vulkan-radv,
    /// llama-CHANNEL for another channel].
    #[arg(long, env = "TOOLBOX_NAME")]
    pub name: Option<String>,

    /// Who owns the toolbox.
    #[arg(long, value_enum, default_value_t = ManagerChoice::Auto)]
    pub manager: ManagerChoice,

    /// How many older pinned images of this repository to keep for rollback.
    #[arg(long, default_value_t = 2, value_parser = bounded::<usize>(0, MAX_KEEP))]
    pub keep: usize,

    /// Recreate even when the image and the container spec are unchanged.
    #[arg(long)]
    pub force: bool,

    /// Print the plan and the equivalent commands; change nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Extra environment for the toolbox, KEY=VALUE (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,

    /// Swap the new toolbox in without first verifying it from the inside.
    #[arg(long)]
    pub no_verify: bool,
}

#[derive(Debug, Clone, Args)]
pub struct RefreshArgs {
    #[command(flatten)]
    pub options: RefreshOptions,

    /// Build the image locally with this RCCL artifact, then refresh from it.
    #[arg(long, value_name = "FILE")]
    pub rccl: Option<PathBuf>,

    /// When another refresh of this toolbox is running, fail at once instead of waiting for it.
    #[arg(long)]
    pub no_wait: bool,

    /// How long to wait for another refresh of this toolbox to finish (`cluster refresh` never
    /// waits: a busy node fails it at once, before any node changes).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = crate::apply::lock::DEFAULT_WAIT.as_secs(),
        conflicts_with = "no_wait",
        value_parser = bounded::<u64>(0, MAX_SECONDS)
    )]
    pub wait: u64,
}

/// `cluster refresh`: what a refresh makes, and how the image reaches the nodes.
#[derive(Debug, Clone, Args)]
pub struct ClusterRefreshArgs {
    #[command(flatten)]
    pub options: RefreshOptions,

    /// Spread the image: the head fetches it from upstream once into a registry it runs on the
    /// cluster link, and every node pulls it from there (on for 2+ nodes). off: every node pulls
    /// from upstream itself.
    #[arg(long, value_enum, value_name = "on|off", default_value_t = SpreadMode::On)]
    pub spread: SpreadMode,

    /// The port of the head's registry, on its cluster-link address.
    #[arg(
        long,
        env = "STRIX_SPREAD_PORT",
        value_name = "PORT",
        default_value_t = crate::cluster::spread::DEFAULT_PORT,
        value_parser = bounded::<u16>(1, 65535)
    )]
    pub spread_port: u16,

    /// The port of the head's relay, on the same address: the nodes pull from it while the head
    /// is still fetching the image.
    #[arg(
        long,
        env = "STRIX_SPREAD_RELAY_PORT",
        value_name = "PORT",
        default_value_t = crate::cluster::spread::DEFAULT_RELAY_PORT,
        value_parser = bounded::<u16>(1, 65535)
    )]
    pub spread_relay_port: u16,

    /// The registry image the head runs (the CNCF distribution registry).
    #[arg(
        long,
        env = "STRIX_SPREAD_REGISTRY_IMAGE",
        value_name = "REF",
        default_value = crate::cluster::spread::DEFAULT_REGISTRY_IMAGE
    )]
    pub spread_registry_image: String,

    /// Prove the new image before keeping it: after the swap, launch MODEL on every node, run the
    /// gate and a short bench; keep the image only if the gate passes and output tokens/s is at
    /// least --min-ratio of the last accepted result on the previous image, else every node goes
    /// back to the previous image and what served before serves again [default: the cluster
    /// file's `canary.model`].
    #[arg(long, value_name = "MODEL")]
    pub canary: Option<String>,

    /// The canary's least output tokens/s, as a share of the previous image's [default: for the
    /// cluster file's canary, its `min_ratio`; else 0.9].
    #[arg(long, value_name = "RATIO")]
    pub min_ratio: Option<f64>,

    /// The endpoint's port on the cluster's head, the canary's model served there [default: the
    /// running router's, else 8000].
    #[arg(long, value_name = "PORT", value_parser = bounded::<u16>(1, 65535))]
    pub canary_port: Option<u16>,

    /// Seconds the canary's model may take to serve.
    #[arg(long, value_name = "SECONDS", default_value_t = 1800, value_parser = bounded::<u64>(1, MAX_SECONDS))]
    pub canary_timeout: u64,
}

/// `--spread`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SpreadMode {
    On,
    Off,
}

/// Which nodes, and how ssh reaches them.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// The nodes, head first: ssh destinations (host, user@host, or a ~/.ssh/config alias).
    #[arg(long, global = true, value_name = "NODE,NODE,...")]
    pub nodes: Option<String>,

    /// The cluster file [default: $XDG_CONFIG_HOME/strix-toolbox/cluster.toml].
    #[arg(long, global = true, env = "STRIX_CLUSTER", value_name = "FILE")]
    pub cluster: Option<PathBuf>,

    /// An ssh config file to use instead of ~/.ssh/config (like `ssh -F`).
    #[arg(long, global = true, value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,

    /// Seconds to wait for each node's ssh connection.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 10, value_parser = bounded::<u64>(1, 3600))]
    pub connect_timeout: u64,

    /// Seconds each node's ssh connection stays up after the command, for the next cluster
    /// command to reuse without a new ssh login (checked first: a node that rebooted or changed
    /// its host key gets a new connection); 0 closes them when the command ends. `cluster
    /// disconnect` closes them now [default: the cluster file's `ssh_persist`, else 60].
    #[arg(
        long,
        global = true,
        env = "STRIX_SSH_PERSIST",
        value_name = "SECONDS",
        value_parser = bounded::<u64>(0, MAX_SSH_PERSIST)
    )]
    pub ssh_persist: Option<u64>,

    #[command(subcommand)]
    pub command: ClusterCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ClusterCommand {
    /// Write the cluster file from --nodes (and --ssh-config).
    Init,
    /// `doctor` on every node, plus what only a cluster can check: RoCE ports, one subnet, one MTU,
    /// jumbo frames end to end, the same kernel parameters, image and RCCL everywhere.
    Doctor(ToolboxArgs),
    /// Refresh every node to one image digest, all or nothing; with 2+ nodes the head fetches the
    /// image from upstream once and the other nodes get it from the head over the cluster link.
    Refresh(ClusterRefreshArgs),
    /// Per node: reachable, strix-toolbox version, toolbox, pin, image digest and RCCL; every
    /// service (its engine and model, nodes, layout, since when, its health at its engine and
    /// through the router); the router (its address, pid and routes).
    Status(StatusArgs),
    /// `verify` on every node, then proof between every pair that the data plane uses RDMA:
    /// perftest latency and bandwidth, and an RCCL all-reduce whose log says RoCE or sockets.
    Verify(ToolboxArgs),
    /// Copy this strix-toolbox to ~/.local/bin on every node that lacks it or runs another version.
    Install,
    /// Close the ssh connections earlier cluster commands left up for reuse (--ssh-persist), one
    /// per node; nothing to close is no failure.
    Disconnect,
    /// Plan MODEL across every node without downloading it: its shape read on the head (from the
    /// Hub by range reads, or its files), each node's GPU memory, every layout with its weights,
    /// KV cache and longest context per node or the rule it breaks, the one chosen and why.
    Plan(PlanArgs),
    /// Serve MODEL as the service NAME across every node (or those `--on` names), all or nothing:
    /// vLLM (its own executor, or Ray's; tensor parallel over RoCE, pipeline parallel over TCP),
    /// or llama.cpp with the layers split over rpc-server on every worker (a GGUF); every process
    /// on the cluster link; routed by the cluster's one OpenAI-compatible endpoint (the router on
    /// the cluster's head) once it answers. Several services share the cluster, each by its name.
    Launch(LaunchArgs),
    /// Stop a service (its engine's server, then everything else its launch started) on every node
    /// and drop its route; the others keep serving (an unreachable node is named; the others
    /// still stop).
    Stop(StopArgs),
    /// The logs of a service on every node, each line with its node.
    Logs(ClusterLogsArgs),
    /// Models in the nodes' Hugging Face caches: pull one onto every node (from the Hub once, by
    /// the head; the others get it over the cluster link), list what each node holds.
    #[command(subcommand)]
    Model(ModelCommand),
    /// `bench` against a service of the cluster, through its endpoint, the requests sent from the
    /// cluster's head (which reaches it on the cluster link); the result is kept on this machine.
    Bench(BenchArgs),
    /// Keep the services serving: every --interval, a one-token completion at each service's
    /// engine, its progress counters, each rank's process, each node's reachability and boot id;
    /// a service stalled (requests running, no token for --stall), failing (--failures probes in
    /// a row), with a rank gone or a node rebooted is relaunched whole from its record (its
    /// nodes' logs saved first, their memory free), at most --max-restarts in --window, then
    /// given up (`cluster status` says why) and --on-give-up run. In the foreground until Ctrl-C
    /// (exit 130), or --install as a systemd user service. Never starts what has no record; a
    /// `cluster stop` or `launch --replace` is no failure.
    Watch(WatchArgs),
    /// The cluster's metrics in Prometheus's text format: every node's GPU memory, busy share,
    /// power, temperature and RDMA port counters, and every service's engine `/metrics` (scraped
    /// by its node), labelled with `node`, `service` and `model`; what could not be read is said
    /// (`strix_node_up`/`strix_engine_up` 0, `strix_scrape_error` with why). Printed once, or
    /// served with --listen.
    Metrics(ClusterMetricsArgs),
    /// Keys per user at the cluster's endpoint: each with the models it may use and its requests
    /// and tokens a minute. The router answers 401 to no key or an unknown one, 403 to a model
    /// the key may not use, 429 (with Retry-After) past its rates; a change counts from the next
    /// second, without a restart. The endpoint's own key (--api-key-file) keeps every model.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// A live view of the cluster, refreshed every --interval: per node its GPU memory, busy share,
    /// power, temperature and RDMA link bytes per second; per service its tokens per second,
    /// requests running and waiting, and KV cache in use. Ctrl-C ends it.
    Top(TopArgs),
}

/// `cluster keys`.
#[derive(Debug, Clone, Subcommand)]
pub enum KeysCommand {
    /// Make a key named NAME and print it, once: only its SHA-256 is kept, on the cluster's head.
    Add(KeysAddArgs),
    /// Every key by name, with its models and rates (never a key).
    List,
    /// Remove the key NAME: refused from the next second on.
    Rm(KeysRmArgs),
}

/// `cluster keys add NAME`.
#[derive(Debug, Clone, Args)]
pub struct KeysAddArgs {
    /// Its name (letters, digits, `.`, `_`, `-`): in `keys list`, the router's metrics and refusals.
    #[arg(value_name = "NAME")]
    pub name: String,

    /// The services it may use, by name [default: every one].
    #[arg(long, value_name = "A,B,...", value_delimiter = ',')]
    pub models: Vec<String>,

    /// Requests a minute it may send [default: no limit].
    #[arg(long, value_name = "N", value_parser = bounded::<u64>(1, u32::MAX as u64))]
    pub rpm: Option<u64>,

    /// Tokens a minute its answers may count (the engines' usage, prompt and completion) [default:
    /// no limit].
    #[arg(long, value_name = "N", value_parser = bounded::<u64>(1, u64::MAX >> 1))]
    pub tpm: Option<u64>,
}

/// `cluster keys rm NAME`.
#[derive(Debug, Clone, Args)]
pub struct KeysRmArgs {
    #[arg(value_name = "NAME")]
    pub name: String,
}

/// `cluster watch`: what to watch, how often and how patiently, and what to do at the end.
#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// The services to watch [default: every service recorded on the cluster, as it finds them].
    #[arg(value_name = "SERVICE")]
    pub services: Vec<ServiceName>,

    /// Between two looks: seconds (90) or with a unit (90s, 5m, 6h).
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub interval: String,

    /// Requests running (or the probe unanswered) and no token generated this long: stalled.
    #[arg(long, value_name = "DURATION", default_value = "60s")]
    pub stall: String,

    /// The probe failing this many times in a row: failing.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = bounded::<u32>(1, 1000))]
    pub failures: u32,

    /// After each start, how long the model has to load before its silence counts.
    #[arg(long, value_name = "DURATION", default_value = "30m")]
    pub grace: String,

    /// At most this many relaunches of a service within --window; the next fault gives up.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = bounded::<u32>(0, 1000))]
    pub max_restarts: u32,

    /// The window --max-restarts counts in.
    #[arg(long, value_name = "DURATION", default_value = "6h")]
    pub window: String,

    /// The longest wait, before a relaunch, for the nodes' GPU memory to come free, or for a GPU
    /// reset the kernel began to end; then give up.
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    pub memory_wait: String,

    /// Run CMD (by `sh -c CMD`, as given) when a service is given up, with STRIX_WATCH_SERVICE
    /// and STRIX_WATCH_REASON in its environment (a page, a mail).
    #[arg(long, value_name = "CMD")]
    pub on_give_up: Option<String>,

    /// The endpoint's API key for a relaunch, read from FILE [default: the STRIX_API_KEY
    /// environment variable, as `launch` reads it].
    #[arg(long, value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,

    /// Pause the running watch (maintenance): it looks and restarts nothing until --resume.
    #[arg(long, conflicts_with_all = ["resume", "install", "uninstall"])]
    pub pause: bool,

    /// Resume a paused watch; it starts afresh (whatever was restarted meanwhile is loading).
    #[arg(long, conflicts_with_all = ["install", "uninstall"])]
    pub resume: bool,

    /// Install the watch, with these flags, as a systemd user service on this machine and start it
    /// (`systemctl --user status strix-toolbox-watch-NAME` shows it).
    #[arg(long, conflicts_with = "uninstall")]
    pub install: bool,

    /// Stop and remove the systemd user service --install made.
    #[arg(long)]
    pub uninstall: bool,

    /// Serve the cluster's metrics at ADDR:PORT (or PORT, on 127.0.0.1; --metrics alone:
    /// 127.0.0.1:9464) while it watches: what `cluster metrics` serves, and the watch's own
    /// (`strix_watch_probes_total`, `strix_watch_probe_failures_total`,
    /// `strix_watch_restarts_total`, `strix_watch_state`) per service.
    #[arg(long, value_name = "ADDR:PORT", num_args = 0..=1, default_missing_value = "9464")]
    pub metrics: Option<String>,
}

/// How `cluster metrics` reads and shows the cluster.
#[derive(Debug, Clone, Args)]
pub struct ClusterMetricsArgs {
    /// Serve the metrics at ADDR:PORT (or PORT, on 127.0.0.1; --listen alone: 127.0.0.1:9464),
    /// `GET /metrics` only, the cluster read anew at each scrape, at most 8 connections at once,
    /// until Ctrl-C. Without it they are printed once.
    #[arg(long, value_name = "ADDR:PORT", num_args = 0..=1, default_missing_value = "9464")]
    pub listen: Option<String>,

    /// Each engine's scrape deadline: seconds, or a number with its unit (5, 5s, 1m).
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub scrape_timeout: String,
}

/// How `cluster top` shows the cluster.
#[derive(Debug, Clone, Args)]
pub struct TopArgs {
    /// Between two frames, and between the two readings a rate needs: seconds, or a number with
    /// its unit (2, 2s, 1m).
    #[arg(long, value_name = "DURATION", default_value = "2s")]
    pub interval: String,

    /// Print one frame and exit: two readings --interval apart, so its rates are known. With
    /// --json the frame is printed as JSON (always one frame).
    #[arg(long)]
    pub once: bool,

    /// Each engine's scrape deadline: seconds, or a number with its unit (5, 5s, 1m).
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub scrape_timeout: String,
}

#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchCommand {
    #[command(subcommand)]
    pub command: Option<BenchSubcommand>,

    #[command(flatten)]
    pub run: BenchArgs,
}

#[derive(Debug, Clone, Subcommand)]
pub enum BenchSubcommand {
    /// The kept results, newest first (`$XDG_STATE_HOME/strix-toolbox/bench/`).
    History(BenchHistoryArgs),
    /// Each figure of result B as a ratio of result A's, level by level, and what differs between them.
    Compare(BenchCompareArgs),
}

/// What `bench` and `cluster bench` measure, and how.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Concurrency levels: at most this many requests in flight (vLLM's --max-concurrency).
    #[arg(long, value_name = "N,N,...", value_delimiter = ',', default_value = "1,4,16")]
    pub concurrency: Vec<u32>,

    /// Requests per concurrency level.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub requests: u32,

    /// Prompt tokens per request, exactly (token ids from the server's own tokenizer).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub input_len: u32,

    /// Tokens generated per request, exactly (`ignore_eos`).
    #[arg(long, value_name = "N", default_value_t = 128)]
    pub output_len: u32,

    /// First check the answers: a fixed prompt set at temperature 0, token for token against the
    /// model's reference (its first accepted run); a mismatch fails (exit 1) and stops the bench.
    #[arg(long)]
    pub gate: bool,

    /// The gate only, no load.
    #[arg(long, conflicts_with = "gate")]
    pub gate_only: bool,

    /// What the gate holds the answers against: the model's stored reference, or one node
    /// serving it alone (at --single-node-endpoint, launched by you).
    #[arg(long, value_enum, default_value_t = GateReferenceArg::Stored)]
    pub reference: GateReferenceArg,

    /// The endpoint of one node serving the same model alone (with --reference single-node).
    #[arg(long, value_name = "URL", required_if_eq("reference", "single-node"))]
    pub single_node_endpoint: Option<String>,

    /// How far a token's log-probability may move from the reference's, in nats.
    #[arg(long, value_name = "NATS", default_value_t = 0.1)]
    pub logprob_tolerance: f64,

    /// Also draw output tokens/s against concurrency and the TTFT percentiles, this result beside
    /// the kept results of the same setup on other images, into FILE (SVG).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,

    /// Read the endpoint's API key from FILE [default: the STRIX_API_KEY environment variable, as
    /// `launch` and `status` read it].
    /// It travels only in the Authorization header, never a command line, a log or a report.
    #[arg(long, value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,

    /// The service measured (its name, as clients send it) [default: the one that serves; with
    /// several, name one].
    #[arg(long, value_name = "NAME")]
    pub model: Option<ServiceName>,

    /// Measure this endpoint instead of what `launch` serves (one that strix-toolbox did not
    /// start): needs --server and the model's identity (--gguf or --hub-model).
    #[arg(long, value_name = "URL", requires = "server")]
    pub endpoint: Option<String>,

    /// The engine behind --endpoint.
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub server: Option<EngineRef>,

    /// The GGUF file --endpoint serves (its sha256 names the model).
    #[arg(long, value_name = "FILE", conflicts_with = "hub_model")]
    pub gguf: Option<PathBuf>,

    /// The Hub model --endpoint serves, at its commit: ORG/NAME@COMMIT.
    #[arg(long, value_name = "ORG/NAME@COMMIT")]
    pub hub_model: Option<String>,

    /// The image behind --endpoint, as results are keyed [default: none].
    #[arg(long, value_name = "REF")]
    pub image: Option<String>,

    /// The model name to send to --endpoint [default: the first /v1/models lists].
    #[arg(long, value_name = "NAME")]
    pub served_model: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GateReferenceArg {
    Stored,
    SingleNode,
}

#[derive(Debug, Clone, Args)]
pub struct BenchHistoryArgs {
    /// Only results on images whose reference or digest contains this.
    #[arg(long, value_name = "TEXT")]
    pub image: Option<String>,

    /// Only results of this engine.
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub server: Option<EngineRef>,

    /// Only results of models whose identity contains this (`org/name`, `file.gguf`).
    #[arg(long, value_name = "TEXT")]
    pub model: Option<String>,

    /// Only results with this concurrency level.
    #[arg(long, value_name = "N")]
    pub concurrency: Option<u32>,

    /// Only accepted results (not those a canary rejected).
    #[arg(long)]
    pub accepted: bool,

    /// At most N results.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,

    /// Draw the listed results into FILE (SVG).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct BenchCompareArgs {
    /// The result to compare against (an id `bench history` shows, or 4+ of its first digits).
    #[arg(value_name = "A")]
    pub a: String,

    /// The result compared.
    #[arg(value_name = "B")]
    pub b: String,

    /// Draw both into FILE (SVG).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ModelCommand {
    /// Download MODEL into the Hugging Face cache with huggingface_hub in the toolbox (in a
    /// cluster, the head's) and check every file against its hash; in a cluster every other node
    /// then gets the same snapshot over the cluster link (only the files it lacks or holds wrong).
    Pull(ModelPullArgs),
    /// The cached models (in a cluster, each node's): revisions and refs, commit, files, size,
    /// complete or not (`--verify`: every file hashed).
    List(ModelListArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ModelPullArgs {
    /// The model's Hugging Face id (`org/name`); `org/name:QUANT` pulls only that GGUF's file(s),
    /// picked as `llama-server -hf` picks them.
    #[arg(value_name = "MODEL")]
    pub model: String,

    /// Only this GGUF file of the repository (its path there; of a split model, the first part).
    #[arg(long, value_name = "NAME.gguf")]
    pub file: Option<String>,

    /// A branch, tag or commit [default: main].
    #[arg(long, value_name = "REVISION")]
    pub revision: Option<String>,

    /// Read the Hugging Face token from FILE [default: the HF_TOKEN environment variable]. It
    /// reaches huggingface_hub through its environment, never a command line, a log or a report.
    #[arg(long, value_name = "FILE")]
    pub hf_token_file: Option<PathBuf>,

    /// The toolbox whose huggingface_hub downloads.
    #[arg(long, env = "TOOLBOX_NAME", default_value = "vllm")]
    pub name: String,
}

#[derive(Debug, Clone, Args)]
pub struct ModelListArgs {
    /// Only this model.
    #[arg(value_name = "MODEL")]
    pub model: Option<String>,

    /// Hash every file against its name (reads every byte: minutes for a large model).
    #[arg(long)]
    pub verify: bool,
}

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

/// A model to plan, and what is asked of the plan.
#[derive(Debug, Clone, Args)]
pub struct PlanArgs {
    /// The model: a Hugging Face repository (`org/name`), a directory on the head (vLLM), a GGUF
    /// file on the head (llama.cpp; of a split model, the first part), or a Hub repository's GGUF
    /// by its quant (`org/name:Q4_K_M`). Only its headers are read.
    #[arg(value_name = "MODEL", required_unless_present = "recipes")]
    pub model: Option<String>,

    /// The GGUF file of the Hub repository MODEL, by its path in the repository (llama.cpp).
    #[arg(long, value_name = "NAME.gguf")]
    pub file: Option<String>,

    /// The serving engine whose rules plan it [default: as launch chooses: llama.cpp for a GGUF,
    /// else vllm].
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub engine: Option<EngineRef>,

    /// vLLM's tensor-parallel size: only that layout, refused when the model does not allow it.
    #[arg(long, value_name = "N", value_parser = bounded::<usize>(1, MAX_TP))]
    pub tp: Option<usize>,

    /// vLLM's pipeline-parallel size.
    #[arg(long, value_name = "N", value_parser = bounded::<usize>(1, MAX_TP))]
    pub pp: Option<usize>,

    /// GiB kept back on every node for the OS and the container, off the GPU's GTT.
    #[arg(long, value_name = "GIB", default_value_t = crate::serving::fit::memory::DEFAULT_RESERVE_GIB,
          value_parser = bounded::<u64>(0, MAX_RESERVE_GIB))]
    pub reserve: u64,

    /// GiB more left free on every node for another service; the KV cache takes the rest of the
    /// memory (vLLM: every block of it) [default: 0].
    #[arg(long, value_name = "GIB", default_value_t = 0, value_parser = bounded::<u64>(0, MAX_RESERVE_GIB))]
    pub keep_free: u64,

    /// The engine's environment, KEY=VALUE (repeatable), as `launch -e` gives it: the plan reads
    /// what changes the engine's memory (vLLM's VLLM_PP_LAYER_PARTITION, VLLM_MLA_DISABLE).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,

    /// The longest request in tokens (vLLM's forms: 32768, 32k, 25.6k, 32K): every layout must
    /// hold it [default: the longest that leaves room for one request, up to the model's own].
    #[arg(long, value_name = "TOKENS", value_parser = tokens)]
    pub max_model_len: Option<u64>,

    /// The KV cache's dtype (vLLM's names: auto, bfloat16, fp8...; llama.cpp's: f16, q8_0...)
    /// [default: the engine's: the model's dtype for vLLM, f16 for llama.cpp].
    #[arg(long, value_name = "DTYPE")]
    pub kv_cache_dtype: Option<String>,

    /// A Hub branch, tag or commit [default: main].
    #[arg(long, value_name = "REVISION")]
    pub revision: Option<String>,

    /// Read the Hugging Face token from FILE [default: the HF_TOKEN environment variable]; the
    /// head sends it to the Hub in a header, never a command line, a log or a report.
    #[arg(long, value_name = "FILE")]
    pub hf_token_file: Option<PathBuf>,

    /// The toolbox asked which GPUs the head's server sees (llama.cpp) [default: the engine's].
    #[arg(long, value_name = "NAME")]
    pub toolbox: Option<String>,

    /// Launch each feasible layout in turn (`cluster plan` only), hold it to the gate and a short
    /// bench, and keep the fastest that answers right as the model's recipe: `cluster launch
    /// MODEL` then serves that way while the image and the model are the same.
    #[arg(long = "try", conflicts_with_all = ["recipes", "tp", "pp"])]
    pub try_layouts: bool,

    /// List the recipes `--try` kept (`cluster plan` only).
    #[arg(long, conflicts_with = "model")]
    pub recipes: bool,

    /// With --try: the endpoint's port [default: the running router's, else 8000].
    #[arg(long, value_parser = bounded::<u16>(1, 65535), requires = "try_layouts")]
    pub port: Option<u16>,

    /// With --try: seconds each layout's engine may take to serve.
    #[arg(long, value_name = "SECONDS", default_value_t = 1800, value_parser = bounded::<u64>(1, MAX_SECONDS))]
    pub timeout: u64,

    /// With --try: the endpoint's API key, read from FILE [default: the STRIX_API_KEY environment
    /// variable], as `cluster launch` takes it.
    #[arg(long, value_name = "FILE", requires = "try_layouts")]
    pub api_key_file: Option<PathBuf>,

    /// With --try: more arguments for the engine's server, kept in the recipe.
    #[arg(last = true, value_name = "ENGINE ARGS", requires = "try_layouts")]
    pub extra: Vec<String>,
}

/// Which toolbox: `--name`, else the engine's.
#[derive(Debug, Clone, Args)]
pub struct ToolboxArgs {
    /// The toolbox [default: the engine's: vllm, or llama].
    #[arg(long, env = "TOOLBOX_NAME")]
    pub name: Option<String>,

    /// The serving engine whose toolbox it is.
    #[arg(long, value_enum, value_name = "ENGINE", default_value_t = EngineRef::default())]
    pub engine: EngineRef,
}

impl ToolboxArgs {
    pub fn toolbox(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.engine.profile().toolbox.default_toolbox.to_string())
    }
}

/// Whose toolbox `cluster status` shows per node.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// The toolbox [default: the services', else the default engine's].
    #[arg(long, env = "TOOLBOX_NAME")]
    pub name: Option<String>,

    /// The serving engine whose toolbox it is [default: the services'].
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub engine: Option<EngineRef>,
}

impl StatusArgs {
    /// The toolbox asked for, if one was.
    pub fn toolbox(&self) -> Option<String> {
        self.name.clone().or_else(|| self.engine.map(|engine| engine.profile().toolbox.default_toolbox.to_string()))
    }
}

/// Which services a stop means.
#[derive(Debug, Clone, Args)]
pub struct StopArgs {
    /// The service [default: the one that serves; with several, name one].
    #[arg(value_name = "NAME")]
    pub name: Option<ServiceName>,

    /// Every service, and the router.
    #[arg(long, conflicts_with = "name")]
    pub all: bool,
}

#[derive(Debug, Clone, Args)]
pub struct LogsArgs {
    /// The service [default: the one recorded; with several, name one].
    #[arg(value_name = "NAME")]
    pub name: Option<ServiceName>,

    /// Keep printing what is added (until Ctrl-C).
    #[arg(long, short)]
    pub follow: bool,

    /// How many of each log's last lines.
    #[arg(long, short = 'n', default_value_t = 50, value_parser = bounded::<usize>(0, MAX_LINES))]
    pub lines: usize,
}

#[derive(Debug, Clone, Args)]
pub struct ClusterLogsArgs {
    #[command(flatten)]
    pub logs: LogsArgs,

    /// Only this node's logs.
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct EnterArgs {
    /// Toolbox name (default: vllm).
    #[arg(env = "TOOLBOX_NAME")]
    pub name: Option<String>,

    /// Command to run instead of an interactive shell.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// Toolbox name (default: vllm).
    #[arg(env = "TOOLBOX_NAME")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct RmArgs {
    /// Toolbox name.
    pub name: String,

    /// Remove it even when it is running.
    #[arg(long, short)]
    pub force: bool,
}

#[derive(Debug, Clone, Args)]
pub struct RollbackArgs {
    /// Toolbox name (default: vllm).
    #[arg(env = "TOOLBOX_NAME")]
    pub name: Option<String>,

    /// Print the plan; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, Args)]
pub struct BuildArgs {
    /// The RCCL artifact: librccl.so.1, librccl.so.1.gz, or the workflow's .zip.
    #[arg(long, value_name = "FILE")]
    pub rccl: PathBuf,

    /// Base image to overlay.
    #[arg(long, value_name = "IMAGE", default_value = crate::DEFAULT_BASE_IMAGE)]
    pub base: String,

    /// Tag for the built image.
    #[arg(long, value_name = "REF", default_value = crate::DEFAULT_BUILD_TAG)]
    pub tag: String,

    /// Extra tags for the same image (repeatable).
    #[arg(long = "also-tag", value_name = "REF")]
    pub also_tag: Vec<String>,

    /// Push every tag after building.
    #[arg(long)]
    pub push: bool,

    /// Where the RCCL came from (a URL or a workflow run), recorded in the image labels.
    #[arg(long, env = "RCCL_SOURCE", value_name = "TEXT")]
    pub rccl_source: Option<String>,

    /// OCI source label (org.opencontainers.image.source).
    #[arg(long, env = "IMAGE_SOURCE", value_name = "URL")]
    pub source: Option<String>,

    /// OCI revision label (org.opencontainers.image.revision).
    #[arg(long, env = "IMAGE_REVISION", value_name = "SHA")]
    pub revision: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum RcclCommand {
    /// Verify an RCCL artifact carries gfx1151 code objects; report targets, sha256 and size.
    Inspect(RcclInspectArgs),
    /// Judge an RCCL (or NCCL) log: did the data go over RDMA or TCP, or did RCCL fail, and why.
    ///
    /// Reads FILE, or standard input when FILE is `-` or missing: a rank's log (`strix-toolbox
    /// logs`), or the output of any program run with NCCL_DEBUG=INFO (best with
    /// NCCL_DEBUG_SUBSYS=INIT,NET,ENV, as strix-toolbox sets). Several ranks' logs may be judged
    /// together: each line names its host and process. Lines longer than 4096 bytes are read in
    /// part; a binary file is judged unknown.
    ///
    /// Verdicts, each with the lines that decided it:
    ///   rdma     the communicators took IB verbs (NET/IB: RoCE or InfiniBand), and nothing failed
    ///   tcp      a communicator took TCP sockets (NET/Socket), with why IB did not start
    ///   failed   a communicator never formed (e.g. "Failed to initialize any NET plugin": no
    ///            network could start), or RCCL failed once it had formed
    ///   unknown  the log does not say (no NCCL lines, or none about the network yet)
    ///
    /// Exit status: 0 on rdma, and on tcp where the log did not ask for IB (NCCL_IB_DISABLE=1, or
    /// NCCL_NET left IB out); 1 on tcp where IB was asked (a fall-back), on failed and on unknown,
    /// and when the file cannot be read; 2 on a usage error.
    #[command(verbatim_doc_comment)]
    Log(RcclLogArgs),
}

#[derive(Debug, Clone, Args)]
pub struct RcclLogArgs {
    /// The log; `-` or nothing reads standard input.
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct RcclInspectArgs {
    /// librccl.so.1, librccl.so.1.gz, or the GitHub artifact .zip holding either.
    pub file: PathBuf,

    /// Also check it would load in IMAGE: SONAME, every nccl*/rccl* symbol the image's RCCL and its
    /// consumers (libtorch_hip.so…) use, and its DT_NEEDED libraries (pulled when not present).
    #[arg(long, value_name = "IMAGE")]
    pub against: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell to generate completions for.
    pub shell: clap_complete::Shell,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(args: &[&str], env: &[(&str, &str)]) -> Option<String> {
        let args: Vec<std::ffi::OsString> =
            std::iter::once("strix-toolbox").chain(args.iter().copied()).map(Into::into).collect();
        renamed_spelling(&args, &|name| env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn the_container_engines_old_spelling_says_what_it_is_now() {
        assert!(said(&["--engine", "docker", "detect"], &[]).unwrap().contains("--container-engine docker"));
        assert!(said(&["refresh", "--engine=podman"], &[]).unwrap().contains("--container-engine podman"));
        assert!(said(&["list"], &[("STRIX_ENGINE", "docker")]).unwrap().contains("STRIX_CONTAINER_ENGINE"));
        assert_eq!(said(&["launch", "m.gguf", "--engine", "llama.cpp"], &[]), None);
        assert_eq!(said(&["launch", "m", "--", "--engine", "docker"], &[]), None, "vLLM's own arguments");
        assert_eq!(said(&["--container-engine", "docker", "list"], &[]), None);
    }
}
