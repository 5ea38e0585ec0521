//! The serving engines, each one file: its constants in one [`EngineProfile`] (names, toolbox,
//! the programs its image must run, the ports it listens on across the cluster link, its server's
//! process, flags and variables) and what it does differently behind one trait ([`ServingEngine`]):
//! what the container needs, where each node reads the model, how it spans the nodes (its backends
//! and their parallelism), its launch plan per node, its fit, and how its API differs (the
//! tokenizer request). The launch, bench, status and the rest ask the profile and the trait; none
//! of them asks which engine it has. A new engine is one file and one line in [`ENGINES`].
//!
//! What a launch, a record, a label or a report says is "which engine": an [`EngineRef`], written
//! as the engine's name. The engine a toolbox was made for is recorded on it (the `ENGINE` label);
//! a toolbox from before engines were recorded is the default engine's (the first of [`ENGINES`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::engine_args::{EngineArgs, Flag};
use super::fit::{Fit, FitAsk, FitNodes, Measured, NodeLog, Planned};
use super::logs::LogTail;
use super::parallelism::Parallelism;
use super::plan::{LaunchPlan, NodeForPlan, PlanRequest};
use super::record::Role;
use super::state::FlagQuestion;
use crate::error::{Error, Result};
use crate::link::ports::LinkPort;
use crate::model::shape::ModelShape;
use crate::model::source::{ModelFormat, ModelSource};
use crate::spec::{ToolboxNeeds, Transport};
use crate::verify::programs::RequiredProgram;

/// Every engine strix-toolbox serves with; the first is the default (`--engine`, and what a
/// toolbox or record that names none was made for).
pub const ENGINES: [EngineRef; 2] = [super::vllm::VLLM, super::llama::LLAMA_CPP];

/// The warnings of every node whose logs (`(node, its logs)`) say `engine`'s data went over TCP
/// although the cluster `link` is RoCE; none on another link, where TCP is what it takes.
pub fn tcp_on_roce(engine: EngineRef, link: &Transport, logs: &[(String, Vec<LogTail>)]) -> Vec<String> {
    if !matches!(link, Transport::Roce { .. }) {
        return Vec::new();
    }
    logs.iter().filter_map(|(node, tails)| engine.tcp_on_roce(tails, node)).collect()
}

/// What every engine listens on across the cluster link with no authentication of its own.
pub fn link_ports() -> Vec<LinkPort> {
    ENGINES.iter().flat_map(|engine| engine.profile().link_ports.iter().copied()).collect()
}

/// What a serving engine is as constants, one `const` per engine: its names, its toolbox, the
/// programs, ports, flags and variables everything above it asks of it. What it does differently
/// is its [`ServingEngine`].
#[derive(Debug)]
pub struct EngineProfile {
    /// As the command line, labels, records and reports spell it (`vllm`, `llama.cpp`).
    pub name: &'static str,
    /// Other spellings `--engine` takes.
    pub aliases: &'static [&'static str],
    /// One line for `--engine`'s help.
    pub about: &'static str,
    /// How messages name its server ("vLLM", "llama-server").
    pub title: &'static str,
    /// Its toolbox: where the image comes from, its channels, the toolbox's default name.
    pub toolbox: ToolboxProfile,
    /// The programs its image must run, proven from inside the toolbox by `verify`.
    pub image_programs: &'static [RequiredProgram],
    /// What it listens on across the cluster link with no authentication of its own: only the
    /// cluster's nodes may reach these (`doctor` checks the firewall).
    pub link_ports: &'static [LinkPort],
    /// The port where a node's process of one service listens for the others (vLLM's
    /// rendezvous on the head, llama.cpp's `rpc-server` on each worker) when no other service
    /// holds it; another service on the node takes the next free one.
    pub node_port: u16,
    /// How it reads a model: config.json with safetensors weights, or GGUF file(s). A GGUF model
    /// (a `.gguf` path, `REPO:QUANT`, `--file`) can only be the GGUF engine's.
    pub model_format: ModelFormat,
    /// What to do when a node lacks the model's files where the launch reads them.
    pub missing_model_fix: &'static str,
    /// The process on the head that serves the endpoint (its log is `TOOLBOX.NAME.log`); the
    /// ranks elsewhere run under the same name where the engine has ranks.
    pub server: &'static str,
    /// Its processes keep a compile cache per image that a crash can leave broken
    /// (`serving::compile_cache`): a stop that finds one of them dead erases it.
    pub keeps_compile_cache: bool,
    /// The variable its server takes an API key from, so the key is never in its argv.
    pub api_key_env: &'static str,
    /// The metrics at its server's `/metrics` that say it makes progress (what the watch reads).
    pub progress: crate::watch::ProgressNames,
    /// The flag that names the model at its endpoint (vLLM's `--served-model-name`), the
    /// launch's own spelling first.
    pub name_flag: Flag,
    /// A command for the head's toolbox whose output says what its server is, as the engine's plan
    /// depends on it: whether it has a GPU of its own, its build (None: the plan depends on
    /// neither). What it printed reaches the plan as `FitNodes::head_said`, read by
    /// [`ServingEngine::head_gpu`].
    pub head_question: Option<&'static [&'static str]>,
}

/// What a serving engine does, where engines differ; what it is, the same way for each, is its
/// [`EngineProfile`].
pub trait ServingEngine: Send + Sync + 'static {
    /// Its constants.
    fn profile(&self) -> &'static EngineProfile;

    /// What its toolbox from `image_ref` needs of the node (ROCm's /dev/kfd, the RDMA devices).
    fn needs(&self, image_ref: &str) -> ToolboxNeeds;

    /// Where MODEL comes from when this engine serves it.
    fn source(&self, model: &str, file: Option<&str>) -> Result<ModelSource>;
    /// The files of a model given by its path that a node in `role` reads.
    fn model_paths(&self, source: &ModelSource, role: Role) -> Result<Vec<String>>;
    /// The file whose content names the weights it serves, hashed on the node in `role` (none:
    /// the weights are named by the Hub commit, or not at all).
    fn identity_file(&self, source: &ModelSource, role: Role) -> Option<String>;

    /// The backends it may span `nodes` nodes with, the preferred first: more than one when the
    /// image decides ([`ServingEngine::settle_backend`]). `asked` is `--backend`.
    fn backends(&self, asked: Option<Backend>, nodes: usize) -> Result<Vec<Backend>>;
    /// What to ask the head's image before planning over `candidates` (which backend it can span
    /// the nodes with, what its server can do): flags its help may name.
    fn image_question(&self, candidates: &[Backend]) -> Option<FlagQuestion>;
    /// The backend the image settles on, of `candidates`, from the flags its help named (none:
    /// not asked), and why.
    fn settle_backend(&self, candidates: &[Backend], flags: Option<&[String]>) -> (Backend, Vec<String>);
    /// `--tp`/`--pp` as asked, checked for `nodes` (None: neither asked).
    fn parallelism_asked(&self, tp: Option<usize>, pp: Option<usize>, nodes: usize) -> Result<Option<Parallelism>>;
    /// How it splits the model over `nodes` when nobody said, on the cluster link's `transport`.
    fn parallelism(&self, nodes: usize, transport: &Transport) -> Parallelism;
    /// The programs a node's toolbox needs in `role` over `backend`, each a list of names any one
    /// of which will do.
    fn programs(&self, backend: Backend, role: Role) -> Vec<&'static [&'static str]>;
    /// What each node runs, in steps, and what proves each step.
    fn plan(&self, nodes: &[NodeForPlan], request: &PlanRequest, backend: Backend) -> LaunchPlan;

    /// A warning when what its processes logged on `node` (`logs`, each file's last lines) says
    /// its data went over TCP between the nodes although the cluster link is RoCE (asked only
    /// then): RCCL's `via NET/Socket`, llama.cpp's RPC without `RDMA activated`.
    fn tcp_on_roce(&self, logs: &[LogTail], node: &str) -> Option<String>;

    /// The body of its `POST /tokenize` for `text` (both answer `{"tokens": […]}`).
    fn tokenize_request(&self, model: &str, text: &str, add_special: bool) -> serde_json::Value;

    /// What its own arguments (after `--`) and environment (`-e`) ask of a plan: the context,
    /// the cache's dtype, what else changes its memory; an error names what it would refuse.
    fn fit_asked(&self, extra: &EngineArgs, env: &BTreeMap<String, String>) -> Result<FitAsk>;
    /// Whether the output of its [`EngineProfile::head_question`] names a GPU (None: it says neither).
    fn head_gpu(&self, said: &str) -> Option<bool>;
    /// Every layout of `shape` over `nodes` by its own rules, each with its figures or the rules
    /// it breaks, the one chosen and why, and its flags for that layout.
    fn fit(&self, shape: &ModelShape, nodes: &FitNodes, asked: &FitAsk) -> Result<Fit>;
    /// What it said after loading (its weights, its KV cache, its context), read from every
    /// node's logs, beside what the plan put on each node.
    fn measured(&self, planned: &[Planned], logs: &[NodeLog]) -> Vec<Measured>;
    /// How it splits the model as the plan chose (None: as it always does, whatever the plan).
    fn planned_split(&self, fit: &Fit) -> Option<Parallelism>;
    /// The plan's flags the launch adds to the engine's own (the context, the memory, the split of
    /// the layers), but those the operator gave among `extra`, by any spelling: theirs win.
    fn planned_args(&self, fit: &Fit, extra: &EngineArgs) -> Vec<String>;
}

/// An engine's toolbox.
#[derive(Debug)]
pub struct ToolboxProfile {
    /// The image repository; the channels are its tags.
    pub image_repo: &'static str,
    /// The channels it is refreshed from, the default first.
    pub channels: &'static [&'static str],
    /// The toolbox a launch or refresh of the default channel uses when no `--name` is given.
    pub default_toolbox: &'static str,
    /// Whether a refresh on a terminal asks which channel (when the choice matters to most users).
    pub ask_channel: bool,
}

/// How an engine's processes make one server out of several nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// One node: the server alone.
    #[default]
    Single,
    /// vLLM's Ray executor: Ray on every node, `vllm serve` on the head.
    Ray,
    /// vLLM's multiprocessing executor across nodes: `vllm serve --nnodes N --node-rank 0` on the
    /// head (the API, and the rendezvous on its link address), `--headless` ranks on the others.
    Mp,
    /// llama.cpp's RPC backend: `rpc-server` on every other node, `llama-server` on the head.
    Rpc,
}

impl Backend {
    /// As the command line and the report spell it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Single => "single",
            Backend::Ray => "ray",
            Backend::Mp => "mp",
            Backend::Rpc => "rpc",
        }
    }

    /// Ray runs in the toolbox: started by `ray start`, stopped by `ray stop`.
    pub fn runs_ray(self) -> bool {
        self == Backend::Ray
    }

    /// The part of node `index` (the head first) in a launch over this backend.
    pub fn role_of(self, index: usize) -> Role {
        match (self, index) {
            (Backend::Single, _) => Role::Single,
            (_, 0) => Role::Head,
            _ => Role::Worker,
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which engine: one of [`ENGINES`], compared, stored and written by its name.
#[derive(Clone, Copy)]
pub struct EngineRef(&'static dyn ServingEngine);

impl EngineRef {
    /// As the command line, labels, records and reports spell it: its profile's name, by which
    /// engines are compared, stored and written.
    pub fn name(self) -> &'static str {
        self.profile().name
    }

    /// For an engine's own file: its `const`.
    pub const fn of(engine: &'static dyn ServingEngine) -> EngineRef {
        EngineRef(engine)
    }

    /// The engine named `name` (or one of its aliases).
    pub fn named(name: &str) -> Option<EngineRef> {
        ENGINES.into_iter().find(|engine| engine.name() == name || engine.profile().aliases.contains(&name))
    }

    /// The engine a toolbox label names; none (a toolbox made before engines were recorded), or
    /// one this version does not know, is the default engine.
    pub fn of_label(label: Option<&str>) -> EngineRef {
        label.and_then(EngineRef::named).unwrap_or_default()
    }

    /// The engine MODEL (and `--file`) can only be served by, if any: a GGUF is the engine's that
    /// reads GGUF.
    pub fn claiming(model: &str, file: Option<&str>) -> Option<EngineRef> {
        let format = ModelSource::names_gguf(model, file).then_some(ModelFormat::Gguf)?;
        ENGINES.into_iter().find(|engine| engine.profile().model_format == format)
    }

    /// The engine `asked` (`--engine`), else the one MODEL can only be served by, else the default.
    pub fn for_model(asked: Option<EngineRef>, model: &str, file: Option<&str>) -> EngineRef {
        asked.or_else(|| EngineRef::claiming(model, file)).unwrap_or_default()
    }

    /// `channel` if it is one of its channels.
    pub fn parse_channel(self, channel: &str) -> Result<&'static str> {
        let channels = self.profile().toolbox.channels;
        channels.iter().copied().find(|c| *c == channel).ok_or_else(|| {
            Error::Usage(format!("unknown channel {channel:?} for {self}: expected one of {}", channels.join(", ")))
        })
    }

    /// The toolbox a refresh of `channel` makes when no `--name` is given: the default channel's
    /// is the engine's toolbox, another channel's carries its name.
    pub fn toolbox_for(self, channel: &str) -> String {
        let toolbox = &self.profile().toolbox;
        if toolbox.channels.first() == Some(&channel) {
            toolbox.default_toolbox.to_string()
        } else {
            format!("{}-{channel}", toolbox.default_toolbox)
        }
    }

    /// The name its endpoint serves the model under: the operator's own (the engine's naming
    /// flag among `extra`), else the model as given.
    pub fn served_name(self, model: &str, extra: &EngineArgs) -> String {
        extra.value(self.profile().name_flag).unwrap_or(model).to_string()
    }
}

impl Default for EngineRef {
    fn default() -> EngineRef {
        ENGINES[0]
    }
}

impl std::ops::Deref for EngineRef {
    type Target = dyn ServingEngine;

    fn deref(&self) -> &Self::Target {
        self.0
    }
}

impl PartialEq for EngineRef {
    fn eq(&self, other: &EngineRef) -> bool {
        self.name() == other.name()
    }
}

impl Eq for EngineRef {}

impl std::hash::Hash for EngineRef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name().hash(state);
    }
}

impl PartialOrd for EngineRef {
    fn partial_cmp(&self, other: &EngineRef) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for EngineRef {
    fn cmp(&self, other: &EngineRef) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

impl std::fmt::Display for EngineRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::fmt::Debug for EngineRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for EngineRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for EngineRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<EngineRef, D::Error> {
        let name = String::deserialize(deserializer)?;
        EngineRef::named(&name).ok_or_else(|| {
            let known = ENGINES.map(|engine| engine.name()).join(", ");
            serde::de::Error::custom(format!("unknown serving engine {name:?} (this strix-toolbox knows {known})"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::llama::LLAMA_CPP;
    use crate::serving::vllm::VLLM;

    #[test]
    fn engines_are_found_by_name_or_alias() {
        for engine in ENGINES {
            assert_eq!(EngineRef::named(engine.name()), Some(engine));
            assert_eq!(EngineRef::of_label(Some(engine.name())), engine);
            for alias in engine.profile().aliases {
                assert_eq!(EngineRef::named(alias), Some(engine));
            }
        }
        assert_eq!(EngineRef::named("tgi"), None);
        assert_eq!(EngineRef::of_label(None), VLLM, "a toolbox from before profiles");
        assert_eq!(serde_json::to_string(&LLAMA_CPP).unwrap(), "\"llama.cpp\"");
    }

    #[test]
    fn engines_are_named_as_their_projects_name_them() {
        assert_eq!(serde_json::to_value(LLAMA_CPP).unwrap(), "llama.cpp");
        assert_eq!(serde_json::from_str::<EngineRef>("\"vllm\"").unwrap(), VLLM);
        let unknown = serde_json::from_str::<EngineRef>("\"tgi\"").unwrap_err().to_string();
        assert!(unknown.contains("unknown serving engine \"tgi\"") && unknown.contains("llama.cpp"), "{unknown}");
        assert_eq!(EngineRef::default(), VLLM);
    }

    #[test]
    fn every_engine_has_a_toolbox_with_channels_and_a_server() {
        for engine in ENGINES {
            let profile = engine.profile();
            assert!(!profile.toolbox.channels.is_empty() && !profile.toolbox.default_toolbox.is_empty(), "{engine}");
            assert_eq!(engine.toolbox_for(profile.toolbox.channels[0]), profile.toolbox.default_toolbox);
            assert!(!profile.server.is_empty() && !profile.api_key_env.is_empty(), "{engine}");
            assert!(!engine.backends(None, 3).unwrap().is_empty(), "{engine} spans nodes somehow");
            assert_eq!(engine.backends(None, 1).unwrap(), [Backend::Single], "{engine} alone on one node");
        }
        assert_eq!(VLLM.toolbox_for("dev"), "vllm-dev");
    }

    #[test]
    fn backends_are_named_as_the_command_line_names_them() {
        for backend in [Backend::Single, Backend::Ray, Backend::Mp, Backend::Rpc] {
            assert_eq!(serde_json::to_value(backend).unwrap(), backend.name());
        }
        assert_eq!((Backend::Mp.role_of(0), Backend::Mp.role_of(2)), (Role::Head, Role::Worker));
        assert_eq!(Backend::Single.role_of(0), Role::Single);
    }
}
