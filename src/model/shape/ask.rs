//! A plan's first question, asked of the head: the model's shape, read where its engine reads it.
//! A path is read inside the engine's toolbox on the head (started when stopped, unless the ask
//! says not to: a dry run starts nothing), as the engine will read it there; a Hub repository is
//! read over the head's uplink with the operator's `HF_ENDPOINT`, unless the head's cache holds the
//! commit asked (a relaunch's pinned one): then its snapshot is read in the toolbox, as the engine
//! reads it offline, and a relaunch needs no Hub. The token travels in the call,
//! over the node's channel: never in an argv. The answer says how many bytes and requests the read
//! took.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::in_toolbox::RunsInToolbox;
use super::source::{read_shape, ModelAccess, ReadLimits, ShapeRead};
use crate::container_engine::ExecOutcome;
use crate::error::{Error, Result};
use crate::model::cache::HubCache;
use crate::model::hub::HubAccess;
use crate::model::revision::Commit;
use crate::model::source::{ModelFormat, ModelSource};
use crate::secret::Secret;
use crate::settings::Settings;
use crate::toolbox::running::RunningToolbox;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapeAsk {
    pub source: ModelSource,
    /// How the engine reads the model.
    pub format: ModelFormat,
    /// A Hub branch, tag or commit [None: main].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The engine's toolbox on the head, where a path is read.
    pub toolbox: String,
    /// Start the toolbox to read a path in it when it is stopped.
    pub start_toolbox: bool,
    /// The operator's `HF_*` settings that say how to reach the Hub (`model::hub_env`).
    #[serde(default)]
    pub hub_env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hf_token: Option<Secret>,
}

/// The shape `ask` names, read within the default bounds.
pub async fn shape_ask(settings: &Settings, ask: &ShapeAsk) -> Result<ShapeRead> {
    let hub = HubAccess::new(ask.hub_env.get("HF_ENDPOINT").map(String::as_str), ask.hf_token.clone());
    let (source, revision) = match cached_snapshot(settings, ask) {
        Some(snapshot) => (ModelSource::Path(snapshot), None),
        None => (ask.source.clone(), ask.revision.as_deref()),
    };
    let toolbox = match &source {
        ModelSource::Path(path) => Some(toolbox_for(settings, ask, path).await?),
        ModelSource::Hub(_) | ModelSource::HubGguf { .. } => None,
    };
    let reach = ModelAccess { hub: &hub, toolbox: toolbox.as_ref().map(|t| t as &dyn RunsInToolbox) };
    read_shape(&source, ask.format, revision, reach, ReadLimits::default()).await
}

/// The snapshot of a whole Hub repository (vLLM's) at the commit `ask` names, when the head's
/// cache has it whole enough to read (its config.json there).
fn cached_snapshot(settings: &Settings, ask: &ShapeAsk) -> Option<String> {
    let ModelSource::Hub(repo) = &ask.source else { return None };
    let commit = Commit::parse(ask.revision.as_deref()?)?;
    let snapshot = HubCache::of(&settings.paths).ok()?.repo(repo).snapshot_dir(&commit);
    snapshot.join("config.json").is_file().then(|| snapshot.display().to_string())
}

/// The toolbox the model at `path` is read in: started when stopped if the ask allows it.
async fn toolbox_for(settings: &Settings, ask: &ShapeAsk, path: &str) -> Result<RunningToolbox> {
    if ask.start_toolbox {
        return RunningToolbox::open(settings, &ask.toolbox).await;
    }
    RunningToolbox::if_running(settings, &ask.toolbox).await?.ok_or_else(|| {
        Error::toolbox(
            &ask.toolbox,
            format!(
                "{path} is read inside toolbox {}, where its engine reads it, and the toolbox is not running (a dry run \
                 starts none)",
                ask.toolbox
            ),
            format!("`strix-toolbox cluster plan {path}` (or `plan` on one node) starts it and reads the model there"),
        )
    })
}

#[async_trait::async_trait]
impl RunsInToolbox for RunningToolbox {
    fn name(&self) -> &str {
        &self.name
    }

    async fn run(&self, argv: &[String]) -> Result<ExecOutcome> {
        self.exec(argv).await
    }
}
