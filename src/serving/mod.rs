//! Serving a model: Ray across the nodes' toolboxes (the control plane), `vllm serve` on the head
//! (one OpenAI-compatible endpoint), what was started recorded on each node, and the probes that
//! prove it serves. The pure parts: the environment, the command lines, the records, the HTTP
//! probe. The node's side, each one call from the head (or from `launch` on this
//! node), runs them inside the toolbox through the engine's exec API, as argv vectors: Ray
//! ([`ray`]), `vllm serve` ([`vllm`]), what the node serves ([`state`]), the probes ([`probe`]),
//! the logs and the stop. The head orchestrates in `cluster::launch`.

pub(crate) mod commands;
pub(crate) mod environment;
pub(crate) mod http;
pub(crate) mod logs;
pub(crate) mod probe;
pub(crate) mod ray;
pub(crate) mod record;
pub(crate) mod state;
pub(crate) mod stop;
pub(crate) mod vllm;
