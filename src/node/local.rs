//! This machine as a node: calls run in this process, through the same dispatch the agent uses.

use async_trait::async_trait;

use super::agent::dispatch;
use super::call::NodeCall;
use super::Node;
use crate::error::Result;
use crate::settings::Settings;

pub struct LocalNode {
    name: String,
    settings: Settings,
}

impl LocalNode {
    pub fn new(settings: &Settings) -> LocalNode {
        let name = std::env::var("HOSTNAME").ok().filter(|n| !n.is_empty()).unwrap_or_else(|| "this node".into());
        LocalNode { name, settings: settings.clone() }
    }

    /// This machine under the name its cluster gives it (the router's starts on the cluster's
    /// head; a unit test's in-process cluster).
    pub fn named(name: &str, settings: Settings) -> LocalNode {
        LocalNode { name: name.to_string(), settings }
    }
}

#[async_trait]
impl Node for LocalNode {
    fn name(&self) -> &str {
        &self.name
    }

    async fn ask(&self, call: NodeCall) -> Result<serde_json::Value> {
        dispatch(&self.settings, call).await
    }
}
