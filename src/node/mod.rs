//! The head and its nodes: what the head asks a node ([`call::NodeCall`]), how it travels
//! ([`wire`]), and the node's side ([`agent`]: `strix-toolbox agent`, which ssh starts once per
//! node for a whole cluster command).

pub(crate) mod agent;
pub(crate) mod call;
pub(crate) mod wire;
