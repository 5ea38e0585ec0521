//! `list` / `status`: the toolboxes strix-toolbox manages on this node, with what they run.

use serde::{Deserialize, Serialize};

use crate::container_engine::{ContainerEngine, EngineKind};
use crate::error::Result;
use crate::labels;
use crate::settings::Settings;
pub use crate::toolbox::status::ToolboxStatus;

/// This node as `status --json` (and `cluster status`) reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusReport {
    /// This strix-toolbox's version.
    pub version: String,
    pub engine: EngineKind,
    /// Where the engine answered.
    pub endpoint: String,
    pub toolboxes: Vec<ToolboxStatus>,
}

/// Every managed toolbox, by name.
pub async fn list_toolboxes(engine: &dyn ContainerEngine) -> Result<Vec<ToolboxStatus>> {
    let mut containers = engine.container_list(&format!("{}=true", labels::MANAGED)).await?;
    containers.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(containers.into_iter().map(ToolboxStatus::of).collect())
}

pub async fn status(settings: &Settings) -> Result<StatusReport> {
    let connection = settings.connect().await?;
    let engine = connection.engine();
    Ok(StatusReport {
        version: env!("CARGO_PKG_VERSION").to_string(),
        engine: engine.kind(),
        endpoint: engine.endpoint().to_string(),
        toolboxes: list_toolboxes(engine).await?,
    })
}
