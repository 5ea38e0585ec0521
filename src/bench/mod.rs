//! Proof of service: how fast an OpenAI-compatible endpoint serves ([`load`]), and whether it
//! answers right ([`gate`]), kept per image and compared; [`op`] is the operation behind `bench`
//! and `cluster bench`, whose requests run on the node that reaches the endpoint ([`node`]).
//!
//! # The figures, as `vllm bench serve` defines them
//!
//! Read from vLLM's own benchmark (vllm-project/vllm: `vllm/benchmarks/serve.py`,
//! `calculate_metrics` and `benchmark`; `vllm/benchmarks/lib/endpoint_request_func.py`,
//! `async_request_openai_completions`; `vllm/benchmarks/datasets/random.py`):
//!
//! - Requests go to `/v1/completions` with `stream: true`, `stream_options.include_usage`,
//!   `max_tokens` = `--output-len`, temperature 0, and `ignore_eos` (vLLM sets it for its random
//!   prompts, so every request generates exactly `--output-len` tokens). `--concurrency` is vLLM's
//!   `--max-concurrency` at `--request-rate inf`: every request is queued at once, at most that
//!   many in flight. One untimed request goes first (vLLM's "initial test run").
//! - **TTFT**: from sending a request to the first streamed message carrying a choice. **ITL**:
//!   the gaps between consecutive such messages, every request's pooled. **E2EL**: from sending
//!   to the last such message. **TPOT**: (E2EL − TTFT) / (output tokens − 1), for requests with
//!   more than one output token. Each as mean, median, std (population) and p50/p90/p99, numpy's
//!   linear percentiles ([`stats`]).
//! - **Output tokens** are the server's `usage.completion_tokens`. vLLM's client reads it only
//!   from a message without choices (which vLLM sends) and else tokenizes the text; here it is
//!   read from any message (llama.cpp puts it in its last message, beside an empty choice), so
//!   against llama.cpp this counts what the server generated instead of a re-tokenization.
//! - **Duration**: from queueing a level's first request to its last answer's end. Request,
//!   output token and total token throughput are completed requests, output tokens and (input +
//!   output) tokens over it; peak output token throughput and peak concurrent requests use
//!   vLLM's one-second buckets ([`figures`]).
//! - **Prompts** of `--input-len` tokens as the server counts them, from the server's own
//!   tokenizer ([`prompt`]): sent as text by default, made as vLLM makes its random prompts (ids
//!   decoded, tokenized again, cut or filled to the length), so the server tokenizes them as it
//!   does `vllm bench serve`'s; or, with `--prompts token-ids`, as exactly that many ids. The
//!   form changes the figures, not only the prompt: a text is tokenized on the server's way in,
//!   which spreads the arrival of requests sent at once, so at a concurrency above one vLLM
//!   batches their prefills differently (scripts/bench.sh measures both beside vLLM's bench).
//!
//! # Keeping and comparing
//!
//! A result ([`result`]) is keyed by what decides its figures ([`key`]: image digest, engine,
//! model identity, TP, PP, nodes, transport, lengths; concurrency per level inside it), kept
//! under `$XDG_STATE_HOME/strix-toolbox/bench/` ([`store`]), listed newest first, compared level
//! by level ([`compare`]) and plotted ([`plot`]).

pub mod api;
pub mod client;
pub mod compare;
pub(crate) mod error;
pub mod exchange;
pub mod figures;
pub mod gate;
pub mod key;
pub mod load;
pub mod node;
pub mod plot;
pub mod prompt;
pub mod result;
pub mod served_model;
pub mod sse;
pub mod stats;
pub mod store;
pub mod token_probe;

pub use client::{ApiClient, Endpoint, Timeouts};
pub use compare::{compare, Comparison};
pub use figures::Figures;
pub use key::{BenchKey, EngineRef, LinkTransport, ModelIdentity};
pub use load::LevelResult;
pub use result::{Acceptance, BenchResult};
pub use store::{BenchStore, History, HistoryFilter};
