//! What a node says of its home, for `cluster doctor` to tell nodes that mount one home (one NFS
//! /home on every node) from nodes with their own: the home's marker (the same on every node of
//! one home), the machine id its own state is kept under, and where its state and Hub cache are.

use serde::{Deserialize, Serialize};

use crate::model::cache::HubCache;
use crate::paths::home_marker;
use crate::settings::Settings;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeHome {
    /// The marker of its home ([`home_marker`]); None when it could not be read or made (`error`
    /// says why).
    pub marker: Option<String>,
    /// Its machine id, which keeps its own state apart (None: it has none, and its serving state
    /// is kept in the state directory itself).
    pub machine_id: Option<String>,
    /// Its state directory, and its own part of it.
    pub state_dir: Option<String>,
    pub node_state_dir: Option<String>,
    /// Its Hugging Face cache, as huggingface_hub resolves it there.
    pub hub_cache: Option<String>,
    pub error: Option<String>,
}

impl NodeHome {
    pub fn here(settings: &Settings) -> NodeHome {
        let paths = &settings.paths;
        let shown = |path: crate::error::Result<std::path::PathBuf>| path.ok().map(|p| p.display().to_string());
        let (marker, error) = match home_marker(paths) {
            Ok(marker) => (Some(marker), None),
            Err(error) => (None, Some(error.to_string())),
        };
        NodeHome {
            marker,
            machine_id: paths.node().map(str::to_string),
            state_dir: shown(paths.state_dir("state")),
            node_state_dir: shown(paths.node_state_dir("state")),
            hub_cache: HubCache::of(paths).ok().map(|cache| cache.root().display().to_string()),
            error,
        }
    }
}
