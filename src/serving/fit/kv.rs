//! The KV cache's bytes per token: each layer keeps a key and a value per token for each of its
//! key/value heads on a rank (grouped-query attention shares them across query heads), an MLA
//! layer one compressed vector (`kv_lora_rank + qk_rope_head_dim` values, the same on every rank);
//! a sliding-window layer stops growing at its window. The element's size is the KV dtype the
//! engine uses, named with why: never assumed silently.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::model::shape::ModelShape;

/// The KV cache's element type as the engine will use it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvCacheDtype {
    /// `bfloat16`, `fp8`, `f16`, `q8_0`...
    pub name: String,
    /// Elements per block and the block's bytes (ggml's quantized caches pack 32 in 34 bytes).
    pub block_elements: u64,
    pub block_bytes: u64,
    /// Why this one: the engine's default for this model, or the operator's flag.
    pub why: String,
}

impl KvCacheDtype {
    /// A dtype by name (vLLM's `--kv-cache-dtype` values and llama.cpp's `-ctk`/`-ctv` types).
    pub fn named(name: &str, why: impl Into<String>) -> Option<KvCacheDtype> {
        let (block_elements, block_bytes) = match name {
            "bfloat16" | "bf16" | "float16" | "half" | "f16" => (1, 2),
            "fp8" | "fp8_e4m3" | "fp8_e5m2" => (1, 1),
            "float32" | "float" | "f32" => (1, 4),
            "q8_0" => (32, 34),
            "q4_0" | "iq4_nl" => (32, 18),
            "q4_1" => (32, 20),
            "q5_0" => (32, 22),
            "q5_1" => (32, 24),
            _ => return None,
        };
        Some(KvCacheDtype { name: name.to_string(), block_elements, block_bytes, why: why.into() })
    }

    /// The bytes of `elements` values (whole blocks).
    pub fn bytes(&self, elements: u64) -> u64 {
        elements.div_ceil(self.block_elements.max(1)).saturating_mul(self.block_bytes)
    }
}

/// One layer's cache per token on a rank holding `kv_heads` key/value heads.
pub fn layer_bytes_per_token(shape: &ModelShape, kv_heads: u64, dtype: &KvCacheDtype) -> u64 {
    match &shape.mla {
        Some(mla) => dtype.bytes(mla.kv_lora_rank.saturating_add(mla.qk_rope_head_dim)),
        None => dtype
            .bytes(kv_heads.saturating_mul(shape.head_dim))
            .saturating_add(dtype.bytes(kv_heads.saturating_mul(shape.v_head_dim))),
    }
}

/// A rank's cache per token: the layers that grow with the context, and the sliding ones that
/// stop at their window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvPerToken {
    pub full_bytes: u64,
    pub sliding_bytes: u64,
}

impl KvPerToken {
    /// The cache of `layers` on a rank holding `kv_heads` key/value heads of each.
    pub fn of(shape: &ModelShape, layers: Range<u32>, kv_heads: u64, dtype: &KvCacheDtype) -> KvPerToken {
        let per_layer = layer_bytes_per_token(shape, kv_heads, dtype);
        let mut per_token = KvPerToken::default();
        for layer in layers {
            let slot = if shape.is_sliding(layer) { &mut per_token.sliding_bytes } else { &mut per_token.full_bytes };
            *slot = slot.saturating_add(per_layer);
        }
        per_token
    }

    /// The cache's bytes for `context` tokens, sliding layers holding at most `window_tokens`.
    pub fn bytes_at(&self, context: u64, window_tokens: u64) -> u64 {
        self.full_bytes
            .saturating_mul(context)
            .saturating_add(self.sliding_bytes.saturating_mul(context.min(window_tokens)))
    }

    /// The longest context `free` bytes hold (u64::MAX when no layer grows with it).
    pub fn longest_context(&self, free: u64, window_tokens: u64) -> u64 {
        let both = self.full_bytes.saturating_add(self.sliding_bytes);
        if both == 0 {
            return u64::MAX;
        }
        let up_to_window = both.saturating_mul(window_tokens);
        if free < up_to_window {
            return free / both;
        }
        match self.full_bytes {
            0 => u64::MAX,
            full => window_tokens.saturating_add((free - up_to_window) / full),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::shape::fixtures::{self, shape_of};

    fn bf16() -> KvCacheDtype {
        KvCacheDtype::named("bfloat16", "the model's dtype").expect("bfloat16")
    }

    #[test]
    fn grouped_query_attention_by_hand() {
        // Llama-3.3-70B: 8 KV heads of 128, K and V, bf16: 2 × 8 × 128 × 2 = 4096 bytes a layer,
        // × 80 layers = 327,680 bytes (320 KiB) a token on one rank.
        let shape = shape_of(fixtures::LLAMA_3_3_70B);
        assert_eq!(layer_bytes_per_token(&shape, 8, &bf16()), 4096);
        let all = KvPerToken::of(&shape, 0..80, 8, &bf16());
        assert_eq!(all, KvPerToken { full_bytes: 327_680, sliding_bytes: 0 });
        // Tensor parallel 2: 4 heads a rank, half.
        assert_eq!(KvPerToken::of(&shape, 0..80, 4, &bf16()).full_bytes, 163_840);
        // 32,768 tokens: 327,680 × 32,768 = 10 GiB.
        assert_eq!(all.bytes_at(32_768, 0), 10 << 30);
        assert_eq!(all.longest_context(10 << 30, 0), 32_768);
    }

    #[test]
    fn latent_attention_is_one_vector_a_layer_whatever_the_heads() {
        // DeepSeek-V3: (512 + 64) × 2 bytes = 1152 a layer; 61 layers = 70,272 a token, on every rank.
        let shape = shape_of(fixtures::DEEPSEEK_V3);
        assert_eq!(layer_bytes_per_token(&shape, 128, &bf16()), 1152);
        assert_eq!(layer_bytes_per_token(&shape, 1, &bf16()), 1152);
        assert_eq!(KvPerToken::of(&shape, 0..61, 128, &bf16()).full_bytes, 70_272);
        // Sized as if it were grouped-query attention with its 128 "KV heads" it would be
        // 128 × (192 + 128) × 2 = 81,920 a layer: 71 times more.
        assert_eq!(128 * (192 + 128) * 2 / 1152, 71);
    }

    #[test]
    fn sliding_layers_stop_at_their_window() {
        // gpt-oss-120b: 8 KV heads of 64, K and V, bf16: 2,048 bytes a layer; 18 full and 18 sliding.
        let shape = shape_of(fixtures::GPT_OSS_120B);
        let per = KvPerToken::of(&shape, 0..36, 8, &bf16());
        assert_eq!(per, KvPerToken { full_bytes: 36_864, sliding_bytes: 36_864 });
        // With the sliding layers holding 128 tokens: at 131,072 tokens,
        // 36,864 × 131,072 + 36,864 × 128 = 4,831,838,208 + 4,718,592 = 4,836,556,800 bytes.
        assert_eq!(per.bytes_at(131_072, 128), 4_836_556_800);
        assert_eq!(per.longest_context(4_836_556_800, 128), 131_072);
        // Below the window both kinds grow: 73,728 a token.
        assert_eq!(per.longest_context(73_728 * 100, 128), 100);
        assert_eq!(KvPerToken::default().longest_context(0, 0), u64::MAX);
    }

    #[test]
    fn quantized_caches_count_whole_blocks() {
        let q8 = KvCacheDtype::named("q8_0", "-ctk q8_0").expect("q8_0");
        // 2 heads of 16: 32 values in one block of 34 bytes, K and V.
        let tiny = shape_of(fixtures::QWEN3_32B);
        assert_eq!(q8.bytes(32), 34);
        assert_eq!(q8.bytes(33), 68);
        assert_eq!(KvCacheDtype::named("fp8", "--kv-cache-dtype fp8").expect("fp8").bytes(1024), 1024);
        assert_eq!(layer_bytes_per_token(&tiny, 1, &q8), 2 * 4 * 34);
        assert!(KvCacheDtype::named("q3_k", "no").is_none());
    }
}
