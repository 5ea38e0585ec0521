//! What a plan is asked (the model, the engine, what the operator asks of the layout and the
//! cache, the reserve, the Hub's token) and what it reports (what was read of the model and how
//! much, the nodes' memory, every layout with its figures or the rules it breaks, the choice).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::shape::source::ShapeRead;
use crate::model::source::ModelSource;
use crate::secret::Secret;
use crate::serving::engine::EngineRef;
use crate::serving::fit::{Fit, FitAsk};

/// What to plan, and how.
#[derive(Debug, Clone)]
pub struct FitRequest {
    pub engine: EngineRef,
    /// The model as the operator gave it.
    pub model: String,
    pub source: ModelSource,
    /// The toolbox asked which GPUs the head's server sees, when the engine's plan depends on it.
    pub toolbox: String,
    /// A Hub branch, tag or commit [None: main].
    pub revision: Option<String>,
    /// `--tp`/`--pp` as given: checked against the nodes, then asked of the plan.
    pub tp: Option<usize>,
    pub pp: Option<usize>,
    /// The context and the cache's dtype, as the plan's flags and the engine's own arguments ask.
    pub asked: FitAsk,
    /// GiB kept back on every node.
    pub reserve_gib: u64,
    /// GiB more kept free on every node for another service.
    pub keep_free_gib: u64,
    pub hf_token: Option<Secret>,
    /// The operator's `HF_*` settings that say how to reach the Hub.
    pub hub_env: BTreeMap<String, String>,
    /// Ask the head's toolbox which GPUs its server sees (it starts the toolbox when stopped).
    pub ask_devices: bool,
    /// Count the GTT in use now against what the nodes have (a launch); false: plan each node as
    /// if nothing held its GTT (a service registered on demand, for which what runs there now
    /// may be stopped: refused only when it could never fit).
    pub count_in_use: bool,
}

/// A plan as the operator reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FitReport {
    pub engine: EngineRef,
    pub model: String,
    /// The model's shape (or why it cannot be sized), and what reading it took on the head.
    pub read: ShapeRead,
    /// Whether the head's server has a GPU of its own (None: not asked, or it could not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_gpu: Option<bool>,
    /// Every layout with its figures or the rules it breaks, the one chosen and why; None when
    /// the model cannot be sized. (`plan` in its JSON, as the `plan` command prints it.)
    #[serde(rename = "plan")]
    pub fit: Option<Fit>,
    /// Why the model cannot be sized honestly (hybrid, linear attention, an unknown architecture).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cannot_size: Option<String>,
    /// What gathering the facts had to assume, said.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl FitReport {
    /// The model was sized and no layout serves it: a launch refuses it.
    pub fn refused(&self) -> bool {
        self.fit.as_ref().is_some_and(|fit| fit.chosen.is_none())
    }
}
