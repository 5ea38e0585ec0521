//! A toolbox's status: the image it runs (its identity, as every node names it, and the reference
//! a pull names it by), its RCCL, its pin and manager, read from its container's labels.

use serde::{Deserialize, Serialize};

use crate::container_engine::ContainerInfo;
use crate::labels;

/// One managed toolbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolboxStatus {
    pub name: String,
    /// The reference it was made from (`repo:channel` or `--image`).
    pub image: String,
    /// The image's id (`sha256:…`): the same on every node that has the image.
    pub image_id: String,
    /// Registry digest of that image (`sha256:…`), when it came from a registry.
    pub image_digest: Option<String>,
    /// sha256 of the RCCL baked into the image, when the image records it.
    pub rccl_sha256: Option<String>,
    pub pin: Option<String>,
    pub manager: Option<String>,
    pub running: bool,
    pub created: Option<String>,
    /// The vLLM its image holds, as the image's labels say it (none: they do not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vllm: Option<VllmLabels>,
}

/// What an image's labels say of its vLLM ([`labels::VLLM_VERSION`], [`labels::DEVICE`]), as
/// written there: the plan reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VllmLabels {
    pub version: Option<String>,
    pub device: Option<String>,
}

/// An image id as `sha256:…` whoever said it: podman's container inspect gives the bare hex,
/// docker's and the refresh's label the prefixed form.
fn with_algorithm(id: &str) -> String {
    if id.is_empty() || id.contains(':') {
        id.to_string()
    } else {
        format!("sha256:{id}")
    }
}

impl ToolboxStatus {
    /// Which image it runs, named alike on every node: the image id (the digest of the image's
    /// config), whatever the image came by: a pull by tag or by digest, the head's registry, an
    /// archive, a build. Not a registry digest: one image has several (an index's, its platform
    /// manifest's), and none when it was loaded or built, so two nodes running one image could
    /// name it differently (issue 41). What the launch, refresh and status compare.
    pub fn image_identity(&self) -> &str {
        &self.image_id
    }

    /// The image as a pull names it: the registry digest it was made from, else its id.
    pub fn image_reference(&self) -> &str {
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
            image_id: with_algorithm(&label(labels::IMAGE_ID).unwrap_or(container.image_id)),
            running: container.running,
            created: container.created,
            vllm: label(labels::VLLM_VERSION)
                .map(|version| VllmLabels { version: Some(version), device: label(labels::DEVICE) }),
            name: container.name,
        }
    }
}
