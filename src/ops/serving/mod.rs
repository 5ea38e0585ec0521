//! The node's side of serving a model: what its toolbox runs (Ray, `vllm serve`), what it has
//! recorded, and the probes, each one call from the head (or from `launch` on this node).
//! Every command runs inside the toolbox through the engine's exec API, as an argv.

pub mod logs;
pub mod probe;
pub mod ray;
pub mod state;
pub mod stop;
pub mod toolbox;
pub mod vllm;
