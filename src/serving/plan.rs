//! A launch's plan: what each node runs, in which steps, and what proves each step before the
//! next starts. Pure data, made by the engine ([`super::vllm::plan`], [`super::llama::plan`]) from
//! what every node's check found; `--dry-run` prints it, and `cluster::launch` carries it out the
//! same way for every engine: start a step's commands at once, prove it, go on; stop everything
//! on every node on any failure.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};

use serde::{Deserialize, Serialize};

use crate::serving::engine::{Backend, EngineRef};
use crate::serving::engine_args::EngineArgs;
use crate::serving::parallelism::Parallelism;
use crate::serving::ray::RayRole;
use crate::serving::record::Role;
use crate::spec::Transport;

/// What the engine's plan is made from, per node, in the cluster's order (the head first).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeForPlan {
    pub node: String,
    /// Its cluster-link address (the loopback for one node without a link).
    pub link_ip: Ipv4Addr,
    pub transport: Transport,
    /// Where its Hugging Face cache is, when the model comes from it.
    pub hub_cache: Option<String>,
    /// The programs its toolbox has, of those the engine asked about.
    pub programs: Vec<String>,
    /// Where its process listens for the others, if it has one ([`EngineProfile::node_port`],
    /// or the next free one when another service holds it).
    ///
    /// [`EngineProfile::node_port`]: crate::serving::engine::EngineProfile::node_port
    pub listen_port: u16,
}

/// What the operator asked for, as every engine's plan reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRequest {
    /// The model as the engine's server takes it (a Hub id, a directory, a GGUF file's path).
    pub model: String,
    /// What the engine is asked to call it: the service's name (the engine's own naming flag
    /// among `extra` says the same, when the operator gave one).
    pub served: String,
    /// How the model is split over the nodes (for the engines that take it).
    pub split: Parallelism,
    /// The address the engine's server listens on (the head's link address, else the
    /// loopback: the router on the cluster's head reaches it there) and its port.
    pub host: String,
    pub port: u16,
    /// The engine's own arguments (after `--`).
    pub extra: EngineArgs,
    /// The Hub commit every node that loads the model has in its cache.
    pub hub_commit: Option<String>,
    /// The operator's `-e KEY=VALUE`: the last word on every node's environment.
    pub env: BTreeMap<String, String>,
    /// Secrets the launch has, by the variable that carries them (values are never in a plan).
    pub secrets: Vec<String>,
    /// Of the flags the engine asked the head's image about (`ServingEngine::image_question`),
    /// those its help names; None: not asked (a dry run of a stopped toolbox).
    pub image_flags: Option<Vec<String>>,
    /// The operator takes the risk of CUDA graph capture across nodes (`--cuda-graphs`).
    pub cuda_graphs: bool,
}

/// One command a node runs, with its environment and how it starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedCommand {
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// Variables set from secrets (their values are in no plan, report or log).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_env: Vec<String>,
    pub start: StartKind,
    /// It runs with the engine's compile cache of its image (vLLM's: `serving::compile_cache`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub uses_compile_cache: bool,
}

/// How a command starts, and so how it is stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum StartKind {
    /// `ray start`: it returns once Ray's daemons run; `ray stop` ends them.
    Ray {
        #[serde(flatten)]
        role: RayRole,
    },
    /// A long-lived process, detached, its pid recorded (stopped by TERM, then KILL).
    Process {
        name: String,
        /// Where it listens for the other nodes (recorded, and proven reachable).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        listens: Option<SocketAddr>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePlan {
    pub node: String,
    pub role: Role,
    pub link_ip: Ipv4Addr,
    /// What it runs, in order.
    pub commands: Vec<PlannedCommand>,
}

/// Commands started at once, then what proves they did their part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchStep {
    /// (node index, command index) in [`LaunchPlan::nodes`].
    pub starts: Vec<(usize, usize)>,
    pub proofs: Vec<Proof>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "proof", rename_all = "kebab-case")]
pub enum Proof {
    /// Ray's own node table lists every node alive with its GPU, on its link address.
    RayJoined,
    /// Every node's rank says (its RCCL start-up, `NCCL_DEBUG=INFO`) it joined the others, who
    /// met at the head's `rendezvous`; what transport RCCL took is read from the same lines.
    RanksJoined { rendezvous: SocketAddr },
    /// Each of these (node index, address) answers a TCP connection from the head.
    Reachable { listeners: Vec<(usize, SocketAddr)> },
    /// `/health` answers 200 and `/v1/models` lists the model.
    Endpoint,
    /// The head server's log has, for each (node index, text), a line naming that text: the
    /// workers it says it uses (llama-server's `using device RPC… (ADDRESS)`).
    HeadLog { prefix: String, mentions: Vec<(usize, String)> },
}

/// The whole plan, as `--dry-run` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchPlan {
    pub engine: EngineRef,
    pub backend: Backend,
    pub nodes: Vec<NodePlan>,
    pub steps: Vec<LaunchStep>,
    /// What the engine chose that the operator did not say, and why (the report's `why`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl PlannedCommand {
    /// A detached process named `name`.
    pub fn process(name: &str, argv: Vec<String>, env: BTreeMap<String, String>) -> PlannedCommand {
        PlannedCommand {
            argv,
            env,
            secret_env: Vec::new(),
            start: StartKind::Process { name: name.to_string(), listens: None },
            uses_compile_cache: false,
        }
    }

    /// It gets the secrets among `names` the launch has (`request.secrets`).
    pub fn with_secrets(mut self, names: &[&str], request: &PlanRequest) -> PlannedCommand {
        self.secret_env =
            names.iter().filter(|n| request.secrets.iter().any(|s| s == *n)).map(|n| n.to_string()).collect();
        self
    }

    pub fn listening(mut self, address: SocketAddr) -> PlannedCommand {
        if let StartKind::Process { listens, .. } = &mut self.start {
            *listens = Some(address);
        }
        self
    }
}

/// `env` for a node: what the engine sets, with the operator's `-e` over it.
pub fn with_overrides(mut env: BTreeMap<String, String>, request: &PlanRequest) -> BTreeMap<String, String> {
    env.extend(request.env.clone());
    env
}
