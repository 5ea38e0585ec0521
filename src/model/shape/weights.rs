//! Where each weight goes when the model is split: the embedding, the output head, each layer's
//! tensors by how a split shares them (cut across tensor-parallel ranks, the key/value projections
//! that ranks replicate when there are fewer KV heads than ranks, routed experts that expert
//! parallelism deals out, small tensors every rank keeps whole), and what engines load beside the
//! layers or skip. Sorted from tensor names, Hugging Face's (`model.layers.3.self_attn.k_proj.weight`)
//! or GGUF's (`blk.3.attn_k.weight`); estimated from the config when no header was read.

use serde::{Deserialize, Serialize};

use super::ModelShape;

/// Every weight's bytes, by what holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Weights {
    pub source: WeightSource,
    pub total_bytes: u64,
    pub tensors: u64,
    /// The token embedding.
    pub embedding_bytes: u64,
    /// The output head and the final norm (a tied model's head is its embedding: not counted here).
    pub output_bytes: u64,
    /// Each transformer block's tensors, by layer.
    pub layers: Vec<LayerWeights>,
    /// Loaded beside the layers (a vision tower, a projector): counted on every rank, as an upper bound.
    pub other_bytes: u64,
    /// Not loaded to serve (DeepSeek's multi-token-prediction layer past `num_hidden_layers`).
    pub skipped_bytes: u64,
    /// An output head of its own was counted (`lm_head`, `output.weight`): the embedding is not tied.
    #[serde(default)]
    pub output_head: bool,
}

/// One layer's tensors, by how a split shares them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerWeights {
    /// Cut across tensor-parallel ranks: attention's query and output, the dense MLP, shared experts.
    pub split_bytes: u64,
    /// The key and value projections: cut by KV heads, replicated past them.
    pub kv_bytes: u64,
    /// Routed experts: cut in width by tensor parallelism, dealt out whole by expert parallelism.
    pub expert_bytes: u64,
    /// Kept whole by every rank: norms, routers, MLA's down-projections.
    pub replicated_bytes: u64,
}

impl LayerWeights {
    pub fn total(&self) -> u64 {
        self.split_bytes
            .saturating_add(self.kv_bytes)
            .saturating_add(self.expert_bytes)
            .saturating_add(self.replicated_bytes)
    }
}

/// Where the bytes come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WeightSource {
    /// Every tensor's dtype and shape, from the safetensors headers or the GGUF's.
    #[default]
    Headers,
    /// The config's parameter counts scaled to the index's `metadata.total_size`.
    IndexTotal,
    /// The config's parameter counts at its dtype: an estimate.
    Config,
}

/// How a checkpoint names its tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    HuggingFace,
    Gguf,
}

/// What a tensor is part of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Embedding,
    Output,
    Layer(u32, Part),
    Other,
    Skipped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Split,
    Kv,
    Expert,
    Replicated,
}

impl Weights {
    /// An empty account for a model of `layers` layers.
    pub fn new(source: WeightSource, layers: u32) -> Weights {
        Weights { source, layers: vec![LayerWeights::default(); layers as usize], ..Weights::default() }
    }

    /// Count one tensor: its name, its dimensions (only their number matters) and its bytes.
    pub fn add(&mut self, naming: Naming, name: &str, dimensions: usize, bytes: u64) {
        self.tensors += 1;
        self.total_bytes = self.total_bytes.saturating_add(bytes);
        let layers = u32::try_from(self.layers.len()).unwrap_or(u32::MAX);
        let role = match naming {
            Naming::HuggingFace => hugging_face_role(name, dimensions, layers),
            Naming::Gguf => gguf_role(name, dimensions, layers),
        };
        if role == Role::Output && (name.starts_with("lm_head.") || name.starts_with("output.")) {
            self.output_head = true;
        }
        let slot = match role {
            Role::Embedding => &mut self.embedding_bytes,
            Role::Output => &mut self.output_bytes,
            Role::Other => &mut self.other_bytes,
            Role::Skipped => &mut self.skipped_bytes,
            Role::Layer(index, part) => {
                let Some(layer) = self.layers.get_mut(index as usize) else {
                    self.skipped_bytes = self.skipped_bytes.saturating_add(bytes);
                    return;
                };
                match part {
                    Part::Split => &mut layer.split_bytes,
                    Part::Kv => &mut layer.kv_bytes,
                    Part::Expert => &mut layer.expert_bytes,
                    Part::Replicated => &mut layer.replicated_bytes,
                }
            }
        };
        *slot = slot.saturating_add(bytes);
    }

    /// The same account, every part scaled so the total is `total` (the index's total size).
    pub fn scaled_to(&self, total: u64, source: WeightSource) -> Weights {
        let scale = |bytes: u64| -> u64 {
            if self.total_bytes == 0 {
                return 0;
            }
            u64::try_from(u128::from(bytes) * u128::from(total) / u128::from(self.total_bytes)).unwrap_or(u64::MAX)
        };
        Weights {
            source,
            total_bytes: total,
            tensors: self.tensors,
            embedding_bytes: scale(self.embedding_bytes),
            output_bytes: scale(self.output_bytes),
            layers: self
                .layers
                .iter()
                .map(|layer| LayerWeights {
                    split_bytes: scale(layer.split_bytes),
                    kv_bytes: scale(layer.kv_bytes),
                    expert_bytes: scale(layer.expert_bytes),
                    replicated_bytes: scale(layer.replicated_bytes),
                })
                .collect(),
            other_bytes: scale(self.other_bytes),
            skipped_bytes: scale(self.skipped_bytes),
            output_head: self.output_head,
        }
    }

    /// The config's parameters at the bytes its dtype and quantization give them: an estimate for
    /// when no header can be read (and the shares by which an index's total is divided).
    pub fn estimated(shape: &ModelShape) -> Weights {
        let mut weights = Weights::new(WeightSource::Config, shape.layers);
        let parameter = bytes_per_parameter(shape);
        // Linear layers carry the quantization; embeddings, norms and routers stay at the dtype.
        // Bits are counted in quarters: MXFP4 is 4.25 bits (4-bit values, an 8-bit scale per 32).
        let dtype_quarter_bits = 32 * parameter;
        let quarter_bits = |expert: bool| -> u64 {
            match &shape.quantization {
                Some(q) if q.method == "mxfp4" => {
                    if expert {
                        17
                    } else {
                        dtype_quarter_bits
                    }
                }
                Some(q) if q.method == "fp8" => 32,
                Some(q) => q.bits.map_or(dtype_quarter_bits, |bits| u64::from(bits) * 4),
                None => dtype_quarter_bits,
            }
        };
        let linear = |parameters: u64, expert: bool| -> u64 {
            u64::try_from(u128::from(parameters) * u128::from(quarter_bits(expert)) / 32).unwrap_or(u64::MAX)
        };
        let (h, heads, kv) = (shape.hidden_size, u64::from(shape.attention_heads), u64::from(shape.kv_heads));
        let embedding = times(&[shape.vocab_size, h, parameter]);
        weights.embedding_bytes = embedding;
        weights.output_bytes = if shape.tied_embeddings { 0 } else { embedding }.saturating_add(h * parameter);
        for index in 0..shape.layers {
            let mut layer = LayerWeights { replicated_bytes: 2 * h * parameter, ..LayerWeights::default() };
            match &shape.mla {
                Some(mla) => {
                    let q_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim;
                    let query = match mla.q_lora_rank {
                        Some(rank) => {
                            layer.replicated_bytes += linear(times(&[h, rank]), false);
                            linear(times(&[rank, heads, q_head]), false)
                        }
                        None => linear(times(&[h, heads, q_head]), false),
                    };
                    layer.replicated_bytes += linear(times(&[h, mla.kv_lora_rank + mla.qk_rope_head_dim]), false);
                    layer.split_bytes = query
                        .saturating_add(linear(
                            times(&[mla.kv_lora_rank, heads, mla.qk_nope_head_dim + mla.v_head_dim]),
                            false,
                        ))
                        .saturating_add(linear(times(&[heads, mla.v_head_dim, h]), false));
                }
                None => {
                    layer.split_bytes = linear(times(&[h, heads, shape.head_dim + shape.v_head_dim]), false);
                    layer.kv_bytes = linear(times(&[h, kv, shape.head_dim + shape.v_head_dim]), false);
                }
            }
            match &shape.moe {
                Some(moe) if shape.is_moe_layer(index) => {
                    let experts = u64::from(moe.experts);
                    layer.replicated_bytes = layer.replicated_bytes.saturating_add(times(&[h, experts, parameter]));
                    layer.expert_bytes = linear(times(&[experts, 3, h, moe.expert_width]), true);
                    layer.split_bytes =
                        layer.split_bytes.saturating_add(linear(times(&[3, h, moe.shared_width]), false));
                }
                _ => {
                    layer.split_bytes =
                        layer.split_bytes.saturating_add(linear(times(&[3, h, shape.intermediate_size]), false))
                }
            }
            weights.total_bytes = weights.total_bytes.saturating_add(layer.total());
            if let Some(slot) = weights.layers.get_mut(index as usize) {
                *slot = layer;
            }
        }
        weights.total_bytes =
            weights.total_bytes.saturating_add(weights.embedding_bytes).saturating_add(weights.output_bytes);
        weights
    }
}

/// The product of `factors`, saturating (the config's bounds keep real models far below it).
fn times(factors: &[u64]) -> u64 {
    factors.iter().fold(1u64, |product, factor| product.saturating_mul(*factor))
}

/// A weight's bytes at the config's dtype (2 for bfloat16, the default).
fn bytes_per_parameter(shape: &ModelShape) -> u64 {
    match shape.dtype.as_deref() {
        Some("float32") => 4,
        Some("float8_e4m3fn" | "float8_e5m2" | "int8" | "uint8") => 1,
        _ => 2,
    }
}

/// A Hugging Face tensor's role: `model.layers.N.` (or `model.language_model.layers.N.`) is layer
/// N unless under a vision or audio tower; DeepSeek's and Qwen's multi-token-prediction weights
/// are skipped (vLLM loads them only for speculative decoding).
fn hugging_face_role(name: &str, dimensions: usize, layers: u32) -> Role {
    const TOWERS: [&str; 6] = ["vision", "visual", "audio", "image", "multi_modal_projector", "mm_projector"];
    if name.starts_with("mtp.") || name.contains(".mtp.") {
        return Role::Skipped;
    }
    if TOWERS.iter().any(|tower| name.contains(tower)) {
        return Role::Other;
    }
    let parts: Vec<&str> = name.split('.').collect();
    let layer = parts.windows(2).find_map(|pair| match pair {
        ["layers" | "h" | "blocks", index] => index.parse::<u32>().ok(),
        _ => None,
    });
    let Some(layer) = layer else {
        return if ["embed_tokens", "wte", "word_embeddings"].iter().any(|e| parts.contains(e)) {
            Role::Embedding
        } else if parts.contains(&"lm_head") || name.ends_with("norm.weight") || name.ends_with("ln_f.weight") {
            Role::Output
        } else {
            Role::Other
        };
    };
    if layer >= layers {
        return Role::Skipped;
    }
    let part = if parts.iter().any(|p| p.starts_with("experts")) && !name.contains("shared_expert") {
        Part::Expert
    } else if dimensions <= 1
        || parts
            .iter()
            .any(|p| matches!(*p, "gate" | "router" | "shared_expert_gate" | "q_a_proj" | "kv_a_proj_with_mqa"))
        || name.contains("layernorm")
        || name.contains("_norm")
    {
        Part::Replicated
    } else if parts.iter().any(|p| matches!(*p, "k_proj" | "v_proj")) {
        Part::Kv
    } else {
        Part::Split
    };
    Role::Layer(layer, part)
}

/// A GGUF tensor's role, by llama.cpp's names (`llama-arch.cpp`): `token_embd`, `output`,
/// `output_norm`, `blk.N.*` with `_exps` for routed experts and `attn_k`/`attn_v`.
fn gguf_role(name: &str, dimensions: usize, layers: u32) -> Role {
    if name.starts_with("token_embd.") {
        return Role::Embedding;
    }
    if name.starts_with("output.") || name.starts_with("output_norm.") {
        return Role::Output;
    }
    let Some(rest) = name.strip_prefix("blk.") else { return Role::Other };
    let Some((index, tensor)) = rest.split_once('.') else { return Role::Other };
    let Ok(layer) = index.parse::<u32>() else { return Role::Other };
    if layer >= layers {
        return Role::Skipped;
    }
    let part = if tensor.contains("_exps") {
        Part::Expert
    } else if dimensions <= 1 || tensor.starts_with("ffn_gate_inp") || tensor.contains("norm") {
        Part::Replicated
    } else if tensor.starts_with("attn_k.") || tensor.starts_with("attn_v.") {
        Part::Kv
    } else {
        Part::Split
    };
    Role::Layer(layer, part)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hugging_face_names_are_sorted_by_what_holds_them() {
        let mut weights = Weights::new(WeightSource::Headers, 2);
        for (name, dims, bytes) in [
            ("model.embed_tokens.weight", 2, 1000),
            ("lm_head.weight", 2, 1000),
            ("model.norm.weight", 1, 10),
            ("model.layers.0.self_attn.q_proj.weight", 2, 100),
            ("model.layers.0.self_attn.k_proj.weight", 2, 20),
            ("model.layers.0.self_attn.v_proj.weight", 2, 20),
            ("model.layers.0.input_layernorm.weight", 1, 1),
            ("model.layers.1.mlp.experts.7.down_proj.weight", 2, 300),
            ("model.layers.1.mlp.experts.gate_up_proj_blocks", 4, 400),
            ("model.layers.1.mlp.gate.weight", 2, 5),
            ("model.layers.1.mlp.shared_experts.up_proj.weight", 2, 60),
            ("model.layers.1.self_attn.kv_a_proj_with_mqa.weight", 2, 7),
            ("model.layers.2.eh_proj.weight", 2, 50),
            ("model.visual.blocks.0.attn.qkv.weight", 2, 70),
        ] {
            weights.add(Naming::HuggingFace, name, dims, bytes);
        }
        assert_eq!((weights.embedding_bytes, weights.output_bytes), (1000, 1010));
        assert_eq!(
            weights.layers[0],
            LayerWeights { split_bytes: 100, kv_bytes: 40, expert_bytes: 0, replicated_bytes: 1 }
        );
        assert_eq!(
            weights.layers[1],
            LayerWeights { split_bytes: 60, kv_bytes: 0, expert_bytes: 700, replicated_bytes: 12 }
        );
        // Layer 2 does not exist in a 2-layer model: DeepSeek's MTP layer. The vision block is other.
        assert_eq!((weights.skipped_bytes, weights.other_bytes), (50, 70));
        assert_eq!(weights.total_bytes, 1000 + 1010 + 141 + 772 + 50 + 70);
        assert_eq!(weights.tensors, 14);
        assert!(weights.output_head);
    }

    #[test]
    fn gguf_names_are_sorted_by_what_holds_them() {
        let mut weights = Weights::new(WeightSource::Headers, 1);
        for (name, dims, bytes) in [
            ("token_embd.weight", 2, 500),
            ("output_norm.weight", 1, 4),
            ("blk.0.attn_q.weight", 2, 64),
            ("blk.0.attn_k.weight", 2, 16),
            ("blk.0.attn_v.weight", 2, 16),
            ("blk.0.ffn_gate_exps.weight", 3, 900),
            ("blk.0.ffn_gate_inp.weight", 2, 8),
            ("blk.0.ffn_up_shexp.weight", 2, 30),
            ("blk.0.attn_norm.weight", 1, 2),
            ("rope_freqs.weight", 1, 3),
        ] {
            weights.add(Naming::Gguf, name, dims, bytes);
        }
        assert_eq!((weights.embedding_bytes, weights.output_bytes, weights.other_bytes), (500, 4, 3));
        assert_eq!(
            weights.layers[0],
            LayerWeights { split_bytes: 94, kv_bytes: 32, expert_bytes: 900, replicated_bytes: 10 }
        );
        assert!(!weights.output_head, "only the final norm: the head is the tied embedding");
    }

    #[test]
    fn scaling_keeps_the_shares() {
        let mut weights = Weights::new(WeightSource::Config, 1);
        weights.add(Naming::Gguf, "token_embd.weight", 2, 100);
        weights.add(Naming::Gguf, "blk.0.attn_q.weight", 2, 300);
        let scaled = weights.scaled_to(800, WeightSource::IndexTotal);
        assert_eq!((scaled.total_bytes, scaled.embedding_bytes, scaled.layers[0].split_bytes), (800, 200, 600));
        assert_eq!(scaled.source, WeightSource::IndexTotal);
    }
}
