//! `detect`: what this node has, and the container flags that follow — without asking the engine,
//! so it stays millisecond-fast.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::container_engine::probe::guessed_info;
use crate::container_engine::EngineKind;
use crate::error::Result;
use crate::host::{FirewalldFacts, GpuFacts, HostFacts, Memlock, Netdev, OsFacts, RdmaFacts};
use crate::serving::engine::EngineRef;
use crate::settings::Settings;
use crate::spec::{SpecOptions, ToolboxSpec, Transport};

/// The node's facts and the flags a toolbox would get: the `--json` shape scripts rely on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetectReport {
    pub gpu: GpuFacts,
    pub rdma: RdmaFacts,
    /// Group name → gid.
    pub groups: BTreeMap<String, u32>,
    pub user: Option<String>,
    /// Group name → whether the user is a member.
    pub user_groups: BTreeMap<String, bool>,
    pub memlock: Option<Memlock>,
    pub kernel_params: BTreeMap<String, String>,
    /// The RDMA ports' netdevs and thunderbolt0: state, MTU, IPv4, driver and firmware.
    #[serde(default)]
    pub interfaces: Vec<Netdev>,
    /// The link RCCL and Gloo will use between nodes.
    #[serde(default)]
    pub transport: Transport,
    /// None when the node has no firewalld configuration.
    #[serde(default)]
    pub firewalld: Option<FirewalldFacts>,
    #[serde(default)]
    pub os: OsFacts,
    pub engine: EngineKind,
    pub container_args: Vec<String>,
    pub warnings: Vec<String>,
}

/// Spec options guessed without asking the engine, so detect stays millisecond-fast.
fn guess_spec_options(engine: EngineKind) -> SpecOptions {
    SpecOptions::new(&guessed_info(engine), EngineRef::default().needs(""), Default::default())
}

pub fn detect(settings: &Settings) -> Result<DetectReport> {
    let root = settings.open_host_root()?;
    let facts = HostFacts::read(&root)?;
    let spec = ToolboxSpec::new(&root, &facts, &guess_spec_options(settings.engine));
    Ok(DetectReport {
        transport: Transport::of(&facts),
        container_args: spec.engine_flags(settings.engine),
        engine: settings.engine,
        gpu: facts.gpu,
        rdma: facts.rdma,
        groups: facts.groups.gids,
        user: facts.groups.user,
        user_groups: facts.groups.member,
        memlock: facts.memlock,
        kernel_params: facts.kernel_params,
        interfaces: facts.interfaces,
        firewalld: facts.firewalld,
        os: facts.os,
        warnings: facts.warnings,
    })
}
