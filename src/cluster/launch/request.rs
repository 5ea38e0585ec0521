//! What a launch is asked (the model, the engine, its sizes, the secrets) and what it reports (the
//! plan as carried out, with every secret's value redacted).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::pinned::Pinned;
use crate::cluster::model::ModelPullReport;
use crate::model::identity::ModelIdentity;
use crate::model::repo_id::RepoId;
use crate::model::revision::Commit;
use crate::model::source::ModelSource;
use crate::secret::{shown_env, Secret};
use crate::serving::engine::{Backend, EngineRef};
use crate::serving::engine_args::EngineArgs;
use crate::serving::fit::{Fit, Measured};
use crate::serving::plan::{LaunchStep, NodePlan};
use crate::serving::service_name::ServiceName;

/// What to serve, and how.
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    pub engine: EngineRef,
    /// The toolbox it serves from (`--toolbox`).
    pub toolbox: String,
    /// The service's name (`--name`): what its clients send as `model`, what its engine is asked
    /// to serve it as, the key of its record, logs, route and stop.
    pub service: ServiceName,
    /// The nodes it runs on, as the cluster names them, its head first (`--on`; empty: every
    /// node of the cluster).
    pub on: Vec<String>,
    /// The model as the operator gave it.
    pub model: String,
    pub source: ModelSource,
    /// How vLLM spans the nodes; None: its multiprocessing executor when the image's vLLM has
    /// one across nodes, else Ray.
    pub backend: Option<Backend>,
    /// vLLM's tensor- and pipeline-parallel sizes; neither: chosen by the link.
    pub tp: Option<usize>,
    pub pp: Option<usize>,
    /// The address the endpoint (the router on the cluster's head) listens on; None: every
    /// interface, or where the running router listens.
    pub host: Option<Ipv4Addr>,
    /// The endpoint's port; None: the running router's, else 8000.
    pub port: Option<u16>,
    /// How long the engine may take to serve (loading weights takes minutes on a real node).
    pub timeout: Duration,
    /// Stop what already serves first, instead of refusing.
    pub replace: bool,
    pub dry_run: bool,
    /// Extra arguments for the engine's server (after `--`), as the operator gave them.
    pub extra: EngineArgs,
    /// The user's `-e KEY=VALUE`: they override the serving environment.
    pub env: BTreeMap<String, String>,
    pub hf_token: Option<Secret>,
    /// The endpoint's API key (`--api-key-file`, `STRIX_API_KEY`).
    pub api_key: Option<Secret>,
    /// The operator's `HF_*` settings, for a pull of the model (`model::hub_env`).
    pub hub_env: BTreeMap<String, String>,
    /// Capture CUDA graphs across nodes anyway (`--cuda-graphs`; the default leaves them off).
    pub cuda_graphs: bool,
    /// Erase the engine's compile cache for the image first (`--fresh-compile-cache`).
    pub fresh_compile_cache: bool,
    /// GiB left free on every node for another service (`--keep-free`): the plan's KV cache
    /// takes the rest.
    pub keep_free_gib: u64,
    /// Where the models' recipes are kept (`cluster plan --try`): the launch serves by the
    /// model's when the operator names no layout (None: none is looked for).
    pub recipes: Option<std::path::PathBuf>,
    /// A relaunch from a record (the watch's, the canary's): the weights and image it must serve
    /// again exactly ([`Pinned`]); None: a launch as asked.
    pub pinned: Option<Pinned>,
    /// Register it to start on demand instead of starting it (`--on-demand`): checked and planned
    /// as a dry run is, then registered with the router.
    pub on_demand: Option<OnDemandAsk>,
}

impl LaunchRequest {
    /// The launch only looks: a dry run, or a registration on demand (nothing starts, nothing
    /// is pulled or hashed; the router's start does that).
    pub fn only_looks(&self) -> bool {
        self.dry_run || self.on_demand.is_some()
    }
}

/// What `--on-demand` asks beside the launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnDemandAsk {
    /// No request for this long: stopped (None: only for another's room).
    pub idle: Option<Duration>,
    /// How long a request waits for the start before a 503.
    pub wait: Duration,
    /// How the cluster's head reaches the service's other nodes: `ssh -F FILE` (the cluster's own,
    /// at the same path on the head) and its connect timeout.
    pub ssh_config: Option<std::path::PathBuf>,
    pub connect_timeout: Duration,
}

/// A service registered to start on demand, as the launch reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OnDemandRegistration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_seconds: Option<u64>,
    pub wait_seconds: u64,
    /// Per node of the service: the GPU memory its plan takes there, in bytes (None: nothing).
    pub planned_bytes: Vec<Option<u64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchReport {
    /// The service's name: what its clients send as `model`.
    pub service: String,
    pub engine: EngineRef,
    pub backend: Backend,
    pub model: String,
    /// The name its engine serves it under: as `/v1/models` says, once it serves.
    pub served: String,
    /// Where clients reach it: the router on the cluster's head, `http://HEAD:PORT/v1`.
    pub endpoint: String,
    /// Where its engine answers the router: the service's head's link address (the loopback
    /// without a link) at the engine's own port.
    pub upstream: SocketAddr,
    /// The tensor-parallel size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<usize>,
    /// The pipeline-parallel size (llama.cpp's layers split over the nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pp: Option<usize>,
    /// The nodes it runs on, its head first.
    pub on: Vec<String>,
    /// What the launch chose that the operator did not say, and why (the backend, the parallelism).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub why: Vec<String>,
    /// What the launch found wrong without failing (RCCL over sockets on a RoCE link).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub nodes: Vec<NodePlan>,
    /// The order the commands start in, and what proves each step.
    pub steps: Vec<LaunchStep>,
    pub dry_run: bool,
    /// The endpoint wants an API key (the router checks it; the engines get none).
    pub api_key: bool,
    /// The service of the same name was stopped first (`--replace`).
    pub replaced: bool,
    /// The router started for this service (no other service was routed).
    #[serde(default)]
    pub router_started: bool,
    /// From the first start to serving.
    pub seconds_to_serve: Option<f64>,
    /// The model-aware plan it launched by: every layout with its figures or the rules it breaks,
    /// the one chosen and why (None: the model could not be sized; `warnings` says why).
    #[serde(rename = "plan", default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<Fit>,
    /// What each node's engine said it allocated once it served, beside the plan's figures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measured: Vec<Measured>,
    /// The model from the Hub, in the cache of every node that loads it; None for a path.
    pub hub_model: Option<HubModel>,
    /// A GGUF model by its content (llama.cpp; a Hub model's weights are `hub_model`'s commit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gguf: Option<ModelIdentity>,
    /// It was registered to start on demand, not started (`nodes` and `steps` are what a start
    /// runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_demand: Option<OnDemandRegistration>,
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
    pub(super) fn shown(mut self) -> LaunchReport {
        for command in self.nodes.iter_mut().flat_map(|node| node.commands.iter_mut()) {
            command.env = shown_env(&command.env);
        }
        self
    }

    /// The weights it serves: a GGUF by its content (a Hub GGUF's commit holds every quant);
    /// else the Hub commit every node's cache has, which the engine loads offline.
    pub fn identity(&self) -> Option<ModelIdentity> {
        self.gguf.clone().or_else(|| {
            self.hub_model.as_ref().and_then(|hub| {
                Some(ModelIdentity::Hub { repo: hub.repo.to_string(), commit: hub.commit.as_ref()?.to_string() })
            })
        })
    }

    /// A first request to try, naming the service as its clients do; the key as a variable.
    pub fn curl_example(&self) -> String {
        let key = if self.api_key { " -H \"Authorization: Bearer $STRIX_API_KEY\"" } else { "" };
        format!(
            "curl {}/chat/completions -H 'Content-Type: application/json'{key} -d '{{\"model\": \"{}\", \"messages\": \
             [{{\"role\": \"user\", \"content\": \"Hello\"}}]}}'",
            self.endpoint, self.service
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::parallelism::Parallelism;
    use crate::serving::plan::{NodeForPlan, PlanRequest};

    #[test]
    fn a_secret_given_with_e_reaches_the_nodes_and_no_report() {
        let nodes = [NodeForPlan {
            node: "node1".into(),
            link_ip: Ipv4Addr::new(192, 168, 2, 1),
            transport: crate::spec::Transport::ThunderboltTcp { netdev: "thunderbolt0".into() },
            hub_cache: None,
            programs: vec!["vllm".into()],
            listen_port: 29501,
        }];
        let asked = PlanRequest {
            model: "/models/tiny".into(),
            served: "/models/tiny".into(),
            split: Parallelism::of(1, 1, ""),
            host: "0.0.0.0".into(),
            port: 8000,
            extra: EngineArgs::default(),
            hub_commit: None,
            env: [("HF_TOKEN", "hf_s3cret"), ("TOKENIZERS_PARALLELISM", "false")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
            secrets: Vec::new(),
            image_flags: None,
            cuda_graphs: false,
        };
        let plan = crate::serving::vllm::VLLM.plan(&nodes, &asked, Backend::Single);
        assert_eq!(plan.nodes[0].commands[0].env["HF_TOKEN"], "hf_s3cret", "the node gets it");
        let report = LaunchReport {
            service: asked.served.clone(),
            engine: plan.engine,
            backend: plan.backend,
            model: asked.model.clone(),
            served: asked.served.clone(),
            endpoint: "http://192.168.2.1:8000/v1".into(),
            upstream: "192.168.2.1:8001".parse().unwrap(),
            tp: Some(1),
            pp: None,
            on: vec!["node1".into()],
            why: Vec::new(),
            warnings: Vec::new(),
            nodes: plan.nodes,
            steps: plan.steps,
            dry_run: true,
            api_key: false,
            replaced: false,
            router_started: false,
            seconds_to_serve: None,
            fit: None,
            measured: Vec::new(),
            hub_model: None,
            gguf: None,
            on_demand: None,
        };
        let shown = report.shown();
        let json = serde_json::to_string(&shown).unwrap();
        assert!(!json.contains("hf_s3cret") && !format!("{shown:?}").contains("hf_s3cret"), "{json}");
        assert_eq!(shown.nodes[0].commands[0].env["HF_TOKEN"], crate::secret::REDACTED);
        assert_eq!(shown.nodes[0].commands[0].env["TOKENIZERS_PARALLELISM"], "false");
    }
}
