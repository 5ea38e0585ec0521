//! `detect`: what this node has, and the container flags that follow — without asking the engine,
//! so it stays millisecond-fast.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engine::argv::spec_flags;
use crate::engine::EngineKind;
use crate::engine_probe::guess_spec_options;
use crate::error::Result;
use crate::host::{GpuFacts, HostFacts, HostRoot, Memlock, RdmaFacts};
use crate::settings::Settings;
use crate::spec::ToolboxSpec;

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
    pub engine: EngineKind,
    pub container_args: Vec<String>,
    pub warnings: Vec<String>,
}

pub fn detect(settings: &Settings) -> Result<DetectReport> {
    let root = HostRoot::open(&settings.host_root)?;
    let facts = HostFacts::read(&root)?;
    let spec = ToolboxSpec::new(&root, &facts, &guess_spec_options(settings.engine));
    Ok(DetectReport {
        container_args: spec_flags(settings.engine, &spec),
        engine: settings.engine,
        gpu: facts.gpu,
        rdma: facts.rdma,
        groups: facts.groups.gids,
        user: facts.groups.user,
        user_groups: facts.groups.member,
        memlock: facts.memlock,
        kernel_params: facts.kernel_params,
        warnings: facts.warnings,
    })
}
