//! Serving a model: Ray across the nodes' toolboxes (the control plane), `vllm serve` on the head
//! (one OpenAI-compatible endpoint), what was started recorded on each node, and the probes that
//! prove it serves. The pure parts (environment, command lines, records) live here; the node's
//! side runs them through the engine (`ops::serving`), the head orchestrates (`cluster::launch`).

pub(crate) mod commands;
pub(crate) mod environment;
pub(crate) mod http;
pub(crate) mod record;
pub(crate) mod secret;
