//! Services started on demand, the cluster's side: what a registration keeps of the launch it
//! stands for ([`OnDemandLaunch`], the router keeps it as it came and hands it back), and what
//! the router on the cluster's head starts and stops them with ([`starter::ClusterStarter`]: the
//! same launch, proof and stop as `cluster launch` and `cluster stop`, run from the head).

pub mod starter;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cluster::launch::{LaunchRequest, OnDemandAsk};
use crate::error::{Error, Result};
use crate::model::gguf_pick::GgufPick;
use crate::model::source::ModelSource;
use crate::secret::Secret;
use crate::serving::engine::{Backend, EngineRef};
use crate::serving::engine_args::EngineArgs;
use crate::serving::record::recorded_env;
use crate::serving::service_name::ServiceName;

/// What a start launches: the launch as its operator asked it, less its secrets (the endpoint's
/// key is the router's own; the Hub's token, the head's), and how the head reaches the nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OnDemandLaunch {
    pub engine: EngineRef,
    pub toolbox: String,
    /// The service's nodes as the cluster names them, its head first.
    pub on: Vec<String>,
    pub model: String,
    /// A Hub repository's GGUF by its path (`--file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<Backend>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pp: Option<usize>,
    /// How long the engine may take to serve.
    pub timeout_seconds: u64,
    #[serde(default, skip_serializing_if = "EngineArgs::is_empty")]
    pub extra: EngineArgs,
    /// The operator's `-e` settings whose names say no secret.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cuda_graphs: bool,
    /// GiB the plan leaves free on every node (`--keep-free`).
    #[serde(default)]
    pub keep_free_gib: u64,
    /// The cluster's head (where the router runs), as the cluster names it.
    pub head: String,
    /// The ssh config the head reaches the service's other nodes with (`ssh -F`; None: its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_config: Option<PathBuf>,
    pub connect_timeout_seconds: u64,
}

impl OnDemandLaunch {
    /// What `request` (its service on `on`, the cluster's head `head`) keeps for its starts.
    pub fn of(request: &LaunchRequest, on: Vec<String>, head: &str, ask: &OnDemandAsk) -> OnDemandLaunch {
        OnDemandLaunch {
            engine: request.engine,
            toolbox: request.toolbox.clone(),
            on,
            model: request.model.clone(),
            file: match &request.source {
                ModelSource::HubGguf { pick: GgufPick::File(name), .. } => Some(name.clone()),
                _ => None,
            },
            backend: request.backend,
            tp: request.tp,
            pp: request.pp,
            timeout_seconds: request.timeout.as_secs(),
            extra: request.extra.clone(),
            env: recorded_env(&request.env),
            cuda_graphs: request.cuda_graphs,
            keep_free_gib: request.keep_free_gib,
            head: head.to_string(),
            ssh_config: ask.ssh_config.clone(),
            connect_timeout_seconds: ask.connect_timeout.as_secs().max(1),
        }
    }

    /// The launch a start runs for `service`, with the router's key, and the head's Hub token and
    /// settings: what runs there already under that name is stopped first (`--replace`).
    pub fn request(
        &self,
        service: &str,
        api_key: Option<Secret>,
        hf_token: Option<Secret>,
        hub_env: BTreeMap<String, String>,
    ) -> Result<LaunchRequest> {
        Ok(LaunchRequest {
            engine: self.engine,
            toolbox: self.toolbox.clone(),
            service: ServiceName::parse(service)?,
            on: self.on.clone(),
            model: self.model.clone(),
            source: self.engine.source(&self.model, self.file.as_deref())?,
            backend: self.backend,
            tp: self.tp,
            pp: self.pp,
            host: None,
            port: None,
            timeout: Duration::from_secs(self.timeout_seconds),
            replace: true,
            dry_run: false,
            extra: self.extra.clone(),
            env: self.env.clone(),
            hf_token,
            api_key,
            hub_env,
            cuda_graphs: self.cuda_graphs,
            keep_free_gib: self.keep_free_gib,
            fresh_compile_cache: false,
            recipes: None,
            pinned: None,
            on_demand: None,
        })
    }

    /// The launch a registration keeps, read back (`registered.launch`).
    pub fn read(value: &serde_json::Value, service: &str) -> Result<OnDemandLaunch> {
        serde_json::from_value(value.clone()).map_err(|error| {
            Error::toolbox(
                service,
                format!("its registration does not say how to launch it ({error})"),
                format!("register it again: `strix-toolbox cluster launch MODEL --name {service} --on-demand`"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::canary::tests::llama_launch;

    #[test]
    fn a_start_launches_what_was_asked_less_its_secrets() {
        let mut asked = llama_launch("/models/tiny.gguf");
        asked.env = [("WANDB_API_KEY", "s3cret"), ("LLAMA_ARG_THREADS", "1")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        asked.extra = EngineArgs::new(vec!["--threads".into(), "1".into()]);
        asked.hf_token = Some(Secret::new("hf_secret".into()));
        let ask = OnDemandAsk {
            idle: Some(Duration::from_secs(60)),
            wait: Duration::from_secs(30),
            ssh_config: Some("/etc/strix/ssh_config".into()),
            connect_timeout: Duration::from_secs(3),
        };
        let kept = OnDemandLaunch::of(&asked, vec!["node1".into()], "node1", &ask);
        let value = serde_json::to_value(&kept).unwrap();
        assert!(!value.to_string().contains("s3cret") && !value.to_string().contains("hf_secret"), "{value}");
        let back = OnDemandLaunch::read(&value, "tiny").unwrap();
        assert_eq!(back, kept);
        let start = back.request("tiny", None, None, BTreeMap::new()).unwrap();
        assert_eq!((start.replace, start.dry_run, start.on_demand.is_none()), (true, false, true));
        assert_eq!((start.extra, start.on, start.model), (asked.extra, vec!["node1".to_string()], asked.model));
        assert_eq!(start.env.get("LLAMA_ARG_THREADS").map(String::as_str), Some("1"));
        assert!(OnDemandLaunch::read(&serde_json::json!({"model": 1}), "tiny")
            .unwrap_err()
            .to_string()
            .contains("register it again"));
    }
}
