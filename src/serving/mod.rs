//! Serving a model: each engine a profile ([`engine`]: vLLM, llama.cpp), its launch a plan
//! ([`plan`]: what each node runs, in steps, and what proves each step) made by the engine's
//! module ([`vllm`] over Ray, [`llama`] over RPC), what was started recorded on each node
//! ([`record`]), and the probes that prove it serves. The node's side, each one call from the head
//! (or from `launch` on this node), runs inside the toolbox through the engine's exec API, as argv
//! vectors: a process started detached ([`process`]), Ray ([`ray`]), what the node serves
//! ([`state`]), the probes ([`probe`], [`reach`]; OpenAI's model list read in [`openai_models`]), the logs and the stop. The head carries a plan
//! out in `cluster::launch`, the same way for every engine. Before it, [`fit`] plans the layout
//! from the model's shape and the nodes' memory.

pub(crate) mod commands;
pub(crate) mod compile_cache;
pub(crate) mod engine;
pub(crate) mod engine_args;
pub(crate) mod environment;
pub(crate) mod fit;
pub(crate) mod http;
pub(crate) mod llama;
pub(crate) mod logs;
pub(crate) mod openai_models;
pub(crate) mod parallelism;
pub(crate) mod plan;
pub(crate) mod ports;
pub(crate) mod probe;
pub(crate) mod process;
pub(crate) mod ray;
pub(crate) mod reach;
pub(crate) mod record;
pub(crate) mod room;
pub(crate) mod service_name;
pub(crate) mod state;
pub(crate) mod stop;
pub(crate) mod vllm;
pub(crate) mod vllm_args;
