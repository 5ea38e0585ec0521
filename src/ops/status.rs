//! `list` / `status`: the toolboxes strix-toolbox manages on this node, with what they run.

use serde::{Deserialize, Serialize};

use crate::engine::{ContainerInfo, Engine, EngineKind};
use crate::error::Result;
use crate::labels;
use crate::settings::Settings;

/// One managed toolbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolboxStatus {
    pub name: String,
    /// The reference it was made from (`repo:channel` or `--image`).
    pub image: String,
    pub image_id: String,
    /// Registry digest of that image (`sha256:…`), when it came from a registry.
    pub image_digest: Option<String>,
    /// sha256 of the RCCL baked into the image, when the image records it.
    pub rccl_sha256: Option<String>,
    pub pin: Option<String>,
    pub manager: Option<String>,
    pub running: bool,
    pub created: Option<String>,
}

impl ToolboxStatus {
    /// What says which image it runs, the same on every node: the registry digest, else (a local
    /// build) the image id.
    pub fn image_identity(&self) -> &str {
        self.image_digest.as_deref().unwrap_or(&self.image_id)
    }

    pub fn of(container: ContainerInfo) -> ToolboxStatus {
        let label = |key: &str| container.labels.get(key).cloned();
        ToolboxStatus {
            image: label(labels::IMAGE_REF).unwrap_or_else(|| container.image.clone()),
            image_digest: label(labels::IMAGE_DIGEST),
            rccl_sha256: label(labels::RCCL_SHA256),
            pin: label(labels::PIN),
            manager: label(labels::MANAGER),
            image_id: container.image_id,
            running: container.running,
            created: container.created,
            name: container.name,
        }
    }
}

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
pub async fn list_toolboxes(engine: &dyn Engine) -> Result<Vec<ToolboxStatus>> {
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
