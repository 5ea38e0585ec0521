//! A model's shape, read from its headers only: what a plan needs to know before anything is
//! downloaded or started. Hugging Face's `config.json` gives the architecture ([`config`]), the
//! safetensors headers and index give every tensor's bytes ([`safetensors`]), a GGUF's header gives
//! both ([`gguf`]); [`weights`] sorts tensors into what each rank of a split holds, and [`source`]
//! fetches the headers from a local directory, a GGUF file or the Hub by range reads.
//!
//! Every byte comes from strangers: every count and length is bounded before anything is allocated
//! for it, every product is checked, and a malformed header is a [`HeaderError`], never a panic.
//! A model whose cache cannot be sized honestly (hybrid, linear attention, an unknown
//! architecture) is [`Sizing::CannotSize`], never a guess.

pub(crate) mod ask;
pub(crate) mod config;
pub(crate) mod gguf;
pub(crate) mod safetensors;
pub(crate) mod source;
pub(crate) mod weights;

#[cfg(test)]
pub(crate) mod fixtures;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use weights::Weights;

/// What a plan needs of a model: its architecture, its attention (for the KV cache), its experts
/// and its weights. Every size in bytes, every count as the model states it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelShape {
    /// `architectures[0]` of a config.json (`Qwen3ForCausalLM`), or a GGUF's `general.architecture`.
    pub architecture: String,
    /// Transformer blocks (`num_hidden_layers`, `{arch}.block_count`).
    pub layers: u32,
    pub hidden_size: u64,
    pub attention_heads: u32,
    /// Key/value heads (GQA); equal to `attention_heads` for plain multi-head attention.
    pub kv_heads: u32,
    /// A key head's width (an MLA model's is `qk_nope_head_dim + qk_rope_head_dim`).
    pub head_dim: u64,
    /// A value head's width (equal to `head_dim` but for MLA and a few GGUFs).
    pub v_head_dim: u64,
    /// The dense MLP's width (for a MoE model, its dense layers').
    pub intermediate_size: u64,
    pub vocab_size: u64,
    /// The weights' dtype as the model names it (`bfloat16`), when it does.
    pub dtype: Option<String>,
    /// The longest context the model itself allows (`max_position_embeddings`, `context_length`).
    pub max_context: u64,
    /// The output projection is the embedding (`tie_word_embeddings`): one copy.
    pub tied_embeddings: bool,
    pub quantization: Option<Quantization>,
    pub moe: Option<Moe>,
    /// Multi-head latent attention: its cache is one compressed vector per token and layer.
    pub mla: Option<Mla>,
    /// Layers whose attention only looks back a window: their cache stops growing there.
    pub sliding: Option<SlidingWindow>,
    /// Every tensor's bytes, sorted by what holds them; None when only the config was read.
    pub weights: Option<Weights>,
}

/// How the weights are quantized, as far as the config says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quantization {
    /// `quant_method` (`fp8`, `mxfp4`, `gptq`, `awq`, `compressed-tensors`...), or a GGUF's file type.
    pub method: String,
    /// Bits per weight of the quantized tensors, when stated.
    pub bits: Option<u32>,
    /// Weights per scale along the input (GPTQ/AWQ `group_size`); None for per-channel.
    pub group_size: Option<u64>,
    /// FP8 block scaling's `[output, input]` block (`weight_block_size`).
    pub block: Option<[u64; 2]>,
    /// A KV cache dtype the checkpoint was calibrated for (compressed-tensors' `kv_cache_scheme`).
    pub kv_cache_dtype: Option<String>,
}

/// A mixture of experts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moe {
    /// Routed experts per MoE layer.
    pub experts: u32,
    /// Experts each token is routed to.
    pub experts_per_token: u32,
    /// One routed expert's width (`moe_intermediate_size`, else `intermediate_size`).
    pub expert_width: u64,
    /// Shared (always-on) experts' total width, 0 without them.
    pub shared_width: u64,
    /// Layers with a dense MLP instead of experts (DeepSeek's first layers, Qwen's `mlp_only_layers`).
    pub dense_layers: Vec<u32>,
}

/// Multi-head latent attention (DeepSeek V2/V3): the cache holds `kv_lora_rank + qk_rope_head_dim`
/// values per token and layer, whatever the heads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mla {
    pub kv_lora_rank: u64,
    pub qk_rope_head_dim: u64,
    pub qk_nope_head_dim: u64,
    pub v_head_dim: u64,
    pub q_lora_rank: Option<u64>,
}

/// Sliding-window attention on some layers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlidingWindow {
    /// Tokens a sliding layer looks back.
    pub window: u64,
    /// The sliding layers (the others attend to the whole context).
    pub layers: Vec<u32>,
}

/// A model's shape, or why it cannot be sized honestly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "sizing", rename_all = "kebab-case")]
pub enum Sizing {
    Sized(Box<ModelShape>),
    /// Said so, never guessed: the launch goes on without a plan, with a warning.
    CannotSize {
        architecture: String,
        why: String,
    },
}

impl ModelShape {
    /// Whether `layer` is a sliding-window layer.
    pub fn is_sliding(&self, layer: u32) -> bool {
        self.sliding.as_ref().is_some_and(|sliding| sliding.layers.binary_search(&layer).is_ok())
    }

    /// Whether `layer` routes to experts (a MoE model's layers but its dense ones).
    pub fn is_moe_layer(&self, layer: u32) -> bool {
        self.moe.as_ref().is_some_and(|moe| moe.dense_layers.binary_search(&layer).is_err())
    }
}

/// Why a header (config.json, a safetensors or GGUF header, an index) cannot be read: what it
/// claims beyond a bound, where it stops short, or what in it is not what the format says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// A length or count beyond what any real model has: refused before allocating it.
    #[error("{what} claims {claimed}, more than the {limit} any real model has")]
    TooLarge { what: String, claimed: u64, limit: u64 },
    /// The bytes stop before the header does: `needed` bytes from the start would hold the next
    /// part (a source with more may read that many and try again).
    #[error("the header stops after {have} bytes, before its {what} (needs at least {needed})")]
    Truncated { what: String, have: u64, needed: u64 },
    /// Not the format: a wrong magic, a bad type, an offset out of place, a field of the wrong kind.
    #[error("{what}: {why}")]
    Invalid { what: String, why: String },
}

impl HeaderError {
    pub fn invalid(what: impl Into<String>, why: impl Into<String>) -> HeaderError {
        HeaderError::Invalid { what: what.into(), why: why.into() }
    }

    pub fn too_large(what: impl Into<String>, claimed: u64, limit: u64) -> HeaderError {
        HeaderError::TooLarge { what: what.into(), claimed, limit }
    }

    /// The error the user sees: which file of which model, why, and what to do. A file that is not
    /// what it should be is a failure (exit 1), not a wrong command line.
    pub fn of_file(&self, model: &str, file: &str) -> Error {
        Error::host(
            format!("{model}: {file}"),
            format!("{model}: {file} cannot be read as a model header: {self}"),
            format!(
                "check that {model} is a model repository or file (config.json with safetensors weights, or a GGUF) \
                 and that {file} is not damaged; re-download it if it is local"
            ),
        )
    }
}

/// `a × b`, or the header's error when it overflows.
pub(crate) fn checked_product(what: &str, factors: impl IntoIterator<Item = u64>) -> Result<u64, HeaderError> {
    factors.into_iter().try_fold(1u64, |product, factor| {
        product.checked_mul(factor).ok_or_else(|| HeaderError::invalid(what, "its size overflows 64 bits"))
    })
}
