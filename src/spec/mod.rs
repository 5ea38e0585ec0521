//! The toolbox spec: a pure function of (host facts, engine, options) → what the container needs.
//!
//! Rules, from what the stack needs on a Strix Halo node:
//! - always /dev/dri and `seccomp=unconfined` (ROCm's KFD ioctls and RCCL's process_vm_readv
//!   are blocked by default profiles); /dev/kfd for ROCm (vLLM; llama.cpp's ROCm tags, not its
//!   Vulkan ones); never `--privileged`;
//! - RDMA devices present → /dev/infiniband and memlock unlimited (verbs pin memory); else neither.
//!   Both engines' toolboxes carry them: RCCL's transport, and llama.cpp's RPC, which upgrades its
//!   connections to RDMA when built with `-DGGML_RPC_RDMA=ON` (ggml-rpc's transport.cpp);
//! - NCCL's and Gloo's transport environment for the engines that run them (vLLM), not llama.cpp;
//! - groups: rootless podman on crun keeps the user's host groups (crun's
//!   `run.oci.keep_original_groups=1`); elsewhere a named `--group-add rdma` would resolve inside
//!   the image (and fail where the image lacks it), so the host's numeric gids are added instead;
//! - the [`Transport`]: an active RoCE v2 port → NCCL/Gloo use its netdev, NCCL its HCA, port
//!   and RoCE v2 GID index; else `thunderbolt0` up → NCCL/Gloo use it with RDMA off.

mod create;
pub mod transport;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::container_engine::{EngineInfo, EngineKind, Ulimit};
use crate::error::{Error, Result};
use crate::host::{HostFacts, HostRoot};
pub use transport::Transport;

/// crun's annotation behind podman's `--group-add keep-groups`.
pub const KEEP_GROUPS_ANNOTATION: &str = "run.oci.keep_original_groups";

/// What the spec depends on besides the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecOptions {
    pub engine: EngineKind,
    /// Rootless podman (or rootless docker).
    pub rootless: bool,
    /// The OCI runtime: keep-groups only works on crun.
    pub runtime: String,
    /// Extra environment from the user (`--env`), applied last.
    pub extra_env: BTreeMap<String, String>,
    /// What the serving engine the toolbox is for needs of the node.
    pub needs: ToolboxNeeds,
}

/// What a serving engine's toolbox needs of the node beyond /dev/dri (each engine says its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolboxNeeds {
    /// ROCm's /dev/kfd (not for a Vulkan llama.cpp image).
    pub kfd: bool,
    /// The node's RDMA devices and an unlimited memlock, where the node has RDMA (RCCL over RoCE,
    /// llama.cpp's RPC over RDMA).
    pub rdma: bool,
    /// NCCL's and Gloo's transport environment (`NCCL_SOCKET_IFNAME`, `NCCL_IB_HCA`, ...): for
    /// the engines that run RCCL.
    pub nccl: bool,
}

impl SpecOptions {
    /// The options of a toolbox that `needs` this of the node, on the engine `info` describes:
    /// the one way refresh makes a spec and verify and detect expect it.
    pub fn new(info: &EngineInfo, needs: ToolboxNeeds, extra_env: BTreeMap<String, String>) -> Self {
        SpecOptions { engine: info.kind, rootless: info.rootless, runtime: info.runtime.clone(), extra_env, needs }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceMapping {
    /// Where the node is on this machine (under --host-root in tests).
    pub host: PathBuf,
    /// Where the container sees it.
    pub container: PathBuf,
}

/// What the toolbox container needs from this node; the engine turns it into a create request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolboxSpec {
    pub devices: Vec<DeviceMapping>,
    /// Numeric gids for --group-add (empty when host groups are kept).
    pub group_add: Vec<String>,
    pub annotations: BTreeMap<String, String>,
    pub ulimits: Vec<Ulimit>,
    pub security_opt: Vec<String>,
    pub env: BTreeMap<String, String>,
}

impl ToolboxSpec {
    pub fn new(root: &HostRoot, facts: &HostFacts, options: &SpecOptions) -> ToolboxSpec {
        let mut spec = ToolboxSpec { security_opt: vec!["seccomp=unconfined".to_string()], ..Default::default() };

        let mut device_dirs = Vec::new();
        if options.needs.kfd && facts.gpu.kfd.is_some() {
            device_dirs.push("/dev/kfd");
        }
        if !facts.gpu.dri.is_empty() {
            device_dirs.push("/dev/dri");
        }
        let rdma = options.needs.rdma && facts.rdma.present();
        if rdma {
            device_dirs.push("/dev/infiniband");
            spec.ulimits.push(Ulimit { name: "memlock".into(), soft: None, hard: None });
        }
        spec.devices = device_dirs
            .into_iter()
            .map(|node| DeviceMapping { host: root.path(node), container: PathBuf::from(node) })
            .collect();

        if keeps_host_groups(options) {
            spec.annotations.insert(KEEP_GROUPS_ANNOTATION.into(), "1".into());
        } else {
            let wanted: &[&str] = if rdma { &["video", "render", "rdma"] } else { &["video", "render"] };
            spec.group_add =
                wanted.iter().filter_map(|name| facts.groups.gids.get(*name)).map(|gid| gid.to_string()).collect();
        }

        if options.needs.nccl {
            spec.env = Transport::of(facts).env();
        }
        spec.env.extend(options.extra_env.clone());
        spec
    }
}

/// keep-groups only where crun honours it: rootless podman on crun.
fn keeps_host_groups(options: &SpecOptions) -> bool {
    options.engine == EngineKind::Podman && options.rootless && options.runtime == "crun"
}

/// Parse `KEY=VALUE` pairs from `--env`; a pair without `=` is a usage error.
pub fn parse_env(pairs: &[String]) -> Result<BTreeMap<String, String>> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
            _ => Err(Error::Usage(format!("--env {pair:?}: expected KEY=VALUE"))),
        })
        .collect()
}

#[cfg(test)]
mod tests;
