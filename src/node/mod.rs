//! The head and its nodes: what the head asks a node ([`call::NodeCall`]), how it travels
//! ([`wire`]), and the node's side ([`agent`]: `strix-toolbox agent`, which ssh starts once per
//! node for a whole cluster command). A [`Node`] is anything that answers calls: a node over ssh
//! ([`remote::RemoteNode`], through the system's OpenSSH: [`ssh`]), or this machine
//! ([`local::LocalNode`]), so that `launch` on one box and `cluster launch` run the same code.

pub(crate) mod agent;
pub(crate) mod call;
pub(crate) mod identity;
pub(crate) mod local;
pub(crate) mod remote;
pub(crate) mod router;
pub(crate) mod router_keys;
pub mod ssh;
pub(crate) mod ssh_mux;
pub mod ssh_persist;
pub(crate) mod telemetry;
pub(crate) mod wire;

use async_trait::async_trait;

use crate::error::{Error, Result};
use call::{Call, NodeCall};

#[async_trait]
pub trait Node: Send + Sync {
    /// Its name, as the cluster lists it.
    fn name(&self) -> &str;

    /// Ask: the answer as it travels, or the node's error.
    async fn ask(&self, call: NodeCall) -> Result<serde_json::Value>;
}

/// Typed calls on any [`Node`]: `node.call(StatusCall {})` returns a `StatusReport`.
#[async_trait]
pub trait NodeCalls {
    async fn call<C: Call + Send>(&self, call: C) -> Result<C::Reply>;
}

#[async_trait]
impl<N: Node + ?Sized> NodeCalls for N {
    async fn call<C: Call + Send>(&self, call: C) -> Result<C::Reply> {
        let value = self.ask(call.into()).await?;
        serde_json::from_value(value).map_err(|e| Error::Node {
            node: self.name().to_string(),
            message: format!("node {}: its answer is not the report this strix-toolbox expects ({e})", self.name()),
            fix: Some("`strix-toolbox cluster install` puts the same build on every node".into()),
        })
    }
}
