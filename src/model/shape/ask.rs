//! A plan's first question, asked of the head: the model's shape, read where the head reaches it
//! (its own files, or the Hub over its uplink with the operator's `HF_ENDPOINT`). The token
//! travels in the call, over the node's channel: never in an argv. The answer says how many bytes
//! and requests the read took.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::source::{read_shape, HubAccess, ModelSource, ReadLimits, ShapeRead};
use crate::error::Result;
use crate::secret::Secret;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapeAsk {
    pub source: ModelSource,
    /// The operator's `HF_*` settings that say how to reach the Hub (`model::hub_env`).
    #[serde(default)]
    pub hub_env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hf_token: Option<Secret>,
}

/// The shape `ask` names, read within the default bounds.
pub async fn shape_ask(ask: &ShapeAsk) -> Result<ShapeRead> {
    let hub = HubAccess::new(ask.hub_env.get("HF_ENDPOINT").map(String::as_str), ask.hf_token.clone());
    read_shape(&ask.source, &hub, ReadLimits::default()).await
}
