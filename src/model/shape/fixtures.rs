//! Real models for the tests: the config.json of each as published (tests/fixtures/model-configs),
//! and its safetensors checkpoint generated from it at test time: the tensor names, dtypes and
//! shapes the published checkpoints have (transformers' and the model authors' weight names), in
//! shards with their index, every file's data left sparse (a few megabytes of headers on disk for
//! hundreds of gigabytes of weights).

use std::io::Write;
use std::path::Path;

use serde_json::json;

use super::config;
use super::{ModelShape, Sizing};

pub const QWEN3_32B: &str = include_str!("../../../tests/fixtures/model-configs/Qwen3-32B.json");
pub const LLAMA_3_3_70B: &str = include_str!("../../../tests/fixtures/model-configs/Llama-3.3-70B-Instruct.json");
pub const QWEN3_235B_A22B: &str = include_str!("../../../tests/fixtures/model-configs/Qwen3-235B-A22B.json");
pub const GPT_OSS_120B: &str = include_str!("../../../tests/fixtures/model-configs/gpt-oss-120b.json");
pub const DEEPSEEK_V3: &str = include_str!("../../../tests/fixtures/model-configs/DeepSeek-V3.json");
pub const QWEN3_NEXT_80B: &str = include_str!("../../../tests/fixtures/model-configs/Qwen3-Next-80B-A3B-Instruct.json");
pub const GEMMA_3_27B_IT: &str = include_str!("../../../tests/fixtures/model-configs/gemma-3-27b-it.json");
/// The tests' tiny random Llama for the real vLLM (hidden 128, 4 heads, 2 KV heads, 4 layers, bf16).
pub const TINY_LLAMA_4L: &str = include_str!("../../../tests/fixtures/model-configs/tiny-llama-4l.json");

/// A tensor of a generated checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    pub name: String,
    pub dtype: &'static str,
    pub shape: Vec<u64>,
}

impl TensorSpec {
    fn new(name: impl Into<String>, dtype: &'static str, shape: &[u64]) -> TensorSpec {
        TensorSpec { name: name.into(), dtype, shape: shape.to_vec() }
    }

    pub fn bytes(&self) -> u64 {
        let bits = super::safetensors::dtype_bits(self.dtype).unwrap_or(8);
        self.shape.iter().product::<u64>() * bits / 8
    }
}

/// The shape a fixture's config gives.
pub fn shape_of(config_json: &str) -> ModelShape {
    match config::parse(config_json.as_bytes()) {
        Ok(Sizing::Sized(shape)) => *shape,
        other => panic!("the fixture should be sized: {other:?}"),
    }
}

/// Every tensor of the model's published checkpoint, in the order of its shards.
pub fn tensors(config_json: &str) -> Vec<TensorSpec> {
    let shape = shape_of(config_json);
    let (h, v) = (shape.hidden_size, shape.vocab_size);
    let (heads, kv, d) = (u64::from(shape.attention_heads), u64::from(shape.kv_heads), shape.head_dim);
    let mut out = vec![TensorSpec::new("model.embed_tokens.weight", "BF16", &[v, h])];
    for layer in 0..shape.layers {
        let p = format!("model.layers.{layer}");
        out.push(TensorSpec::new(format!("{p}.input_layernorm.weight"), "BF16", &[h]));
        out.push(TensorSpec::new(format!("{p}.post_attention_layernorm.weight"), "BF16", &[h]));
        match shape.architecture.as_str() {
            "DeepseekV3ForCausalLM" => deepseek_layer(&shape, &p, layer, &mut out),
            "GptOssForCausalLM" => {
                for (proj, rows) in [("q_proj", heads * d), ("k_proj", kv * d), ("v_proj", kv * d)] {
                    out.push(TensorSpec::new(format!("{p}.self_attn.{proj}.weight"), "BF16", &[rows, h]));
                    out.push(TensorSpec::new(format!("{p}.self_attn.{proj}.bias"), "BF16", &[rows]));
                }
                out.push(TensorSpec::new(format!("{p}.self_attn.o_proj.weight"), "BF16", &[h, heads * d]));
                out.push(TensorSpec::new(format!("{p}.self_attn.o_proj.bias"), "BF16", &[h]));
                out.push(TensorSpec::new(format!("{p}.self_attn.sinks"), "BF16", &[heads]));
                let moe = shape.moe.as_ref().map(|m| (u64::from(m.experts), m.expert_width)).unwrap_or_default();
                let (e, i) = moe;
                out.push(TensorSpec::new(format!("{p}.mlp.router.weight"), "BF16", &[e, h]));
                out.push(TensorSpec::new(format!("{p}.mlp.router.bias"), "BF16", &[e]));
                // MXFP4: 32 values per block of 16 bytes, one 8-bit scale per block (transformers' mxfp4.py).
                let x = format!("{p}.mlp.experts");
                out.push(TensorSpec::new(format!("{x}.gate_up_proj_blocks"), "U8", &[e, 2 * i, h / 32, 16]));
                out.push(TensorSpec::new(format!("{x}.gate_up_proj_scales"), "U8", &[e, 2 * i, h / 32]));
                out.push(TensorSpec::new(format!("{x}.gate_up_proj_bias"), "BF16", &[e, 2 * i]));
                out.push(TensorSpec::new(format!("{x}.down_proj_blocks"), "U8", &[e, h, i / 32, 16]));
                out.push(TensorSpec::new(format!("{x}.down_proj_scales"), "U8", &[e, h, i / 32]));
                out.push(TensorSpec::new(format!("{x}.down_proj_bias"), "BF16", &[e, h]));
            }
            architecture => {
                for (proj, rows) in [("q_proj", heads * d), ("k_proj", kv * d), ("v_proj", kv * d)] {
                    out.push(TensorSpec::new(format!("{p}.self_attn.{proj}.weight"), "BF16", &[rows, h]));
                }
                out.push(TensorSpec::new(format!("{p}.self_attn.o_proj.weight"), "BF16", &[h, heads * d]));
                if architecture.starts_with("Qwen3") {
                    out.push(TensorSpec::new(format!("{p}.self_attn.q_norm.weight"), "BF16", &[d]));
                    out.push(TensorSpec::new(format!("{p}.self_attn.k_norm.weight"), "BF16", &[d]));
                }
                match &shape.moe {
                    Some(moe) => {
                        let (e, i) = (u64::from(moe.experts), moe.expert_width);
                        out.push(TensorSpec::new(format!("{p}.mlp.gate.weight"), "BF16", &[e, h]));
                        for expert in 0..e {
                            mlp(&mut out, &format!("{p}.mlp.experts.{expert}"), "BF16", h, i, false);
                        }
                    }
                    None => mlp(&mut out, &format!("{p}.mlp"), "BF16", h, shape.intermediate_size, false),
                }
            }
        }
    }
    if shape.architecture == "DeepseekV3ForCausalLM" {
        // The multi-token-prediction layer after the 61 (`num_nextn_predict_layers`: 1).
        let p = format!("model.layers.{}", shape.layers);
        out.push(TensorSpec::new(format!("{p}.input_layernorm.weight"), "BF16", &[h]));
        out.push(TensorSpec::new(format!("{p}.post_attention_layernorm.weight"), "BF16", &[h]));
        deepseek_layer(&shape, &p, shape.layers, &mut out);
        out.push(TensorSpec::new(format!("{p}.embed_tokens.weight"), "BF16", &[v, h]));
        out.push(TensorSpec::new(format!("{p}.enorm.weight"), "BF16", &[h]));
        out.push(TensorSpec::new(format!("{p}.hnorm.weight"), "BF16", &[h]));
        out.push(TensorSpec::new(format!("{p}.eh_proj.weight"), "BF16", &[h, 2 * h]));
        out.push(TensorSpec::new(format!("{p}.shared_head.norm.weight"), "BF16", &[h]));
        out.push(TensorSpec::new(format!("{p}.shared_head.head.weight"), "BF16", &[v, h]));
    }
    out.push(TensorSpec::new("model.norm.weight", "BF16", &[h]));
    if !shape.tied_embeddings {
        out.push(TensorSpec::new("lm_head.weight", "BF16", &[v, h]));
    }
    out
}

/// A gate/up/down MLP of width `i`; FP8 with its 128×128 block scales when `fp8`.
fn mlp(out: &mut Vec<TensorSpec>, prefix: &str, dtype: &'static str, h: u64, i: u64, fp8: bool) {
    for (proj, rows, cols) in [("gate_proj", i, h), ("up_proj", i, h), ("down_proj", h, i)] {
        linear(out, &format!("{prefix}.{proj}"), dtype, rows, cols, fp8);
    }
}

/// One linear layer's weight `[rows, cols]`, with DeepSeek's `weight_scale_inv` (one F32 per
/// 128×128 block) when it is FP8.
fn linear(out: &mut Vec<TensorSpec>, prefix: &str, dtype: &'static str, rows: u64, cols: u64, fp8: bool) {
    out.push(TensorSpec::new(format!("{prefix}.weight"), dtype, &[rows, cols]));
    if fp8 {
        out.push(TensorSpec::new(
            format!("{prefix}.weight_scale_inv"),
            "F32",
            &[rows.div_ceil(128), cols.div_ceil(128)],
        ));
    }
}

/// DeepSeek-V3's layer (its modeling_deepseek.py names): MLA attention in FP8, a dense MLP on the
/// first `first_k_dense_replace` layers, else 256 routed experts, a shared expert and the router.
fn deepseek_layer(shape: &ModelShape, p: &str, layer: u32, out: &mut Vec<TensorSpec>) {
    let (h, heads) = (shape.hidden_size, u64::from(shape.attention_heads));
    let Some(mla) = &shape.mla else { return };
    let q_lora = mla.q_lora_rank.unwrap_or(0);
    let q_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim;
    let a = format!("{p}.self_attn");
    linear(out, &format!("{a}.q_a_proj"), "F8_E4M3", q_lora, h, true);
    out.push(TensorSpec::new(format!("{a}.q_a_layernorm.weight"), "BF16", &[q_lora]));
    linear(out, &format!("{a}.q_b_proj"), "F8_E4M3", heads * q_head, q_lora, true);
    linear(out, &format!("{a}.kv_a_proj_with_mqa"), "F8_E4M3", mla.kv_lora_rank + mla.qk_rope_head_dim, h, true);
    out.push(TensorSpec::new(format!("{a}.kv_a_layernorm.weight"), "BF16", &[mla.kv_lora_rank]));
    linear(
        out,
        &format!("{a}.kv_b_proj"),
        "F8_E4M3",
        heads * (mla.qk_nope_head_dim + mla.v_head_dim),
        mla.kv_lora_rank,
        true,
    );
    linear(out, &format!("{a}.o_proj"), "F8_E4M3", h, heads * mla.v_head_dim, true);
    let dense = shape.moe.as_ref().is_none_or(|moe| moe.dense_layers.contains(&layer));
    match &shape.moe {
        Some(moe) if !dense => {
            let (e, i) = (u64::from(moe.experts), moe.expert_width);
            out.push(TensorSpec::new(format!("{p}.mlp.gate.weight"), "BF16", &[e, h]));
            out.push(TensorSpec::new(format!("{p}.mlp.gate.e_score_correction_bias"), "F32", &[e]));
            for expert in 0..e {
                mlp(out, &format!("{p}.mlp.experts.{expert}"), "F8_E4M3", h, i, true);
            }
            mlp(out, &format!("{p}.mlp.shared_experts"), "F8_E4M3", h, moe.shared_width, true);
        }
        _ => mlp(out, &format!("{p}.mlp"), "F8_E4M3", h, shape.intermediate_size, true),
    }
}

/// A safetensors file's header for `tensors`, in order: its 8-byte length and JSON, and the bytes
/// of data after it.
pub fn safetensors_header(tensors: &[TensorSpec]) -> (Vec<u8>, u64) {
    let mut entries = serde_json::Map::new();
    entries.insert("__metadata__".into(), json!({ "format": "pt" }));
    let mut offset = 0u64;
    for tensor in tensors {
        let end = offset + tensor.bytes();
        entries.insert(
            tensor.name.clone(),
            json!({ "dtype": tensor.dtype, "shape": tensor.shape, "data_offsets": [offset, end] }),
        );
        offset = end;
    }
    let json = serde_json::to_vec(&entries).expect("a header");
    let mut header = (json.len() as u64).to_le_bytes().to_vec();
    header.extend_from_slice(&json);
    (header, offset)
}

/// What [`write_checkpoint`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub total_bytes: u64,
    pub tensors: u64,
    pub shards: usize,
    /// Bytes of headers: what a plan reads of the weights.
    pub header_bytes: u64,
}

/// The model's checkpoint in `dir`: config.json, shards of about `shard_bytes` of data each (the
/// data sparse), and `model.safetensors.index.json` (one shard: `model.safetensors`, no index).
pub fn write_checkpoint(config_json: &str, dir: &Path, shard_bytes: u64) -> Written {
    std::fs::write(dir.join("config.json"), config_json).expect("write config.json");
    let tensors = tensors(config_json);
    let mut shards: Vec<Vec<TensorSpec>> = vec![Vec::new()];
    let mut in_shard = 0u64;
    for tensor in tensors {
        if in_shard > 0 && in_shard + tensor.bytes() > shard_bytes {
            shards.push(Vec::new());
            in_shard = 0;
        }
        in_shard += tensor.bytes();
        shards.last_mut().expect("a shard").push(tensor);
    }
    let count = shards.len();
    let mut written = Written { total_bytes: 0, tensors: 0, shards: count, header_bytes: 0 };
    let mut weight_map = serde_json::Map::new();
    for (index, shard) in shards.iter().enumerate() {
        let name = if count == 1 {
            "model.safetensors".to_string()
        } else {
            format!("model-{:05}-of-{count:05}.safetensors", index + 1)
        };
        let (header, data) = safetensors_header(shard);
        let mut file = std::fs::File::create(dir.join(&name)).expect("create a shard");
        file.write_all(&header).expect("write a header");
        file.set_len(header.len() as u64 + data).expect("size a shard");
        written.total_bytes += data;
        written.header_bytes += header.len() as u64;
        written.tensors += shard.len() as u64;
        for tensor in shard {
            weight_map.insert(tensor.name.clone(), json!(name));
        }
    }
    if count > 1 {
        let index = json!({ "metadata": { "total_size": written.total_bytes }, "weight_map": weight_map });
        std::fs::write(dir.join("model.safetensors.index.json"), serde_json::to_vec_pretty(&index).expect("index"))
            .expect("write the index");
    }
    written
}

/// A GGUF header written by hand, as gguf-py's `GGUFWriter` lays it out (version 3, little-endian,
/// tensors at the default alignment of 32): for the tests of the reader and its fuzzing.
#[derive(Debug, Clone, Default)]
pub struct GgufBuilder {
    kv: Vec<u8>,
    kv_count: u64,
    infos: Vec<u8>,
    tensor_count: u64,
    data_bytes: u64,
}

impl GgufBuilder {
    fn key(mut self, key: &str, value_type: u32, value: &[u8]) -> GgufBuilder {
        self.kv.extend_from_slice(&(key.len() as u64).to_le_bytes());
        self.kv.extend_from_slice(key.as_bytes());
        self.kv.extend_from_slice(&value_type.to_le_bytes());
        self.kv.extend_from_slice(value);
        self.kv_count += 1;
        self
    }

    pub fn string(self, key: &str, value: &str) -> GgufBuilder {
        let mut bytes = (value.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(value.as_bytes());
        self.key(key, 8, &bytes)
    }

    pub fn u32(self, key: &str, value: u32) -> GgufBuilder {
        self.key(key, 4, &value.to_le_bytes())
    }

    pub fn u64(self, key: &str, value: u64) -> GgufBuilder {
        self.key(key, 10, &value.to_le_bytes())
    }

    pub fn i32(self, key: &str, value: i32) -> GgufBuilder {
        self.key(key, 5, &value.to_le_bytes())
    }

    pub fn f32(self, key: &str, value: f32) -> GgufBuilder {
        self.key(key, 6, &value.to_le_bytes())
    }

    pub fn bool(self, key: &str, value: bool) -> GgufBuilder {
        self.key(key, 7, &[u8::from(value)])
    }

    /// Any other value type, its bytes as given (u8, i8, u16, i16, i64, f64).
    pub fn raw(self, key: &str, value_type: u32, value: &[u8]) -> GgufBuilder {
        self.key(key, value_type, value)
    }

    pub fn u32_array(self, key: &str, values: &[u32]) -> GgufBuilder {
        let mut bytes = 4u32.to_le_bytes().to_vec();
        bytes.extend_from_slice(&(values.len() as u64).to_le_bytes());
        for value in values {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
        self.key(key, 9, &bytes)
    }

    pub fn string_array(self, key: &str, values: &[&str]) -> GgufBuilder {
        let mut bytes = 8u32.to_le_bytes().to_vec();
        bytes.extend_from_slice(&(values.len() as u64).to_le_bytes());
        for value in values {
            bytes.extend_from_slice(&(value.len() as u64).to_le_bytes());
            bytes.extend_from_slice(value.as_bytes());
        }
        self.key(key, 9, &bytes)
    }

    /// A tensor of ggml type `ggml_type` with dimensions `ne` (the row first), at the next offset.
    pub fn tensor(mut self, name: &str, ne: &[u64], ggml_type: u32) -> GgufBuilder {
        // An unknown type (to test its refusal) takes no bytes.
        let bytes = super::gguf::ggml_type(ggml_type)
            .map_or(0, |(_, block, block_bytes)| ne.iter().product::<u64>() / block * block_bytes);
        self.infos.extend_from_slice(&(name.len() as u64).to_le_bytes());
        self.infos.extend_from_slice(name.as_bytes());
        self.infos.extend_from_slice(&(ne.len() as u32).to_le_bytes());
        for dimension in ne {
            self.infos.extend_from_slice(&dimension.to_le_bytes());
        }
        self.infos.extend_from_slice(&ggml_type.to_le_bytes());
        self.infos.extend_from_slice(&self.data_bytes.to_le_bytes());
        self.tensor_count += 1;
        self.data_bytes += bytes.div_ceil(32) * 32;
        self
    }

    /// The header's bytes, padded to where the data starts.
    pub fn build(&self) -> Vec<u8> {
        let mut bytes = b"GGUF".to_vec();
        bytes.extend_from_slice(&3u32.to_le_bytes());
        bytes.extend_from_slice(&self.tensor_count.to_le_bytes());
        bytes.extend_from_slice(&self.kv_count.to_le_bytes());
        bytes.extend_from_slice(&self.kv);
        bytes.extend_from_slice(&self.infos);
        bytes.resize(bytes.len().div_ceil(32) * 32, 0);
        bytes
    }

    /// The tensor data's bytes (padding included).
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes
    }
}

/// DeepSeek-V3's GGUF header as llama.cpp's convert_hf_to_gguf.py writes it (DeepseekV2Model's
/// `set_gguf_parameters`): with `mla` the MQA form of latent attention since llama.cpp #12801
/// (one KV head of `kv_lora_rank + qk_rope_head_dim` = 576 K and `kv_lora_rank` = 512 V values,
/// the per-head widths under the `*_mla` keys); without, the earlier conversion (the config's 128
/// KV heads of 192 K and 128 V values, no `*_mla` keys). Its config.json: tests/fixtures/model-configs.
pub fn deepseek_v3_gguf(mla: bool) -> GgufBuilder {
    let header = GgufBuilder::default()
        .string("general.architecture", "deepseek2")
        .u32("general.file_type", 15)
        .u32("deepseek2.block_count", 61)
        .u32("deepseek2.context_length", 163_840)
        .u32("deepseek2.embedding_length", 7168)
        .u32("deepseek2.feed_forward_length", 18_432)
        .u32("deepseek2.attention.head_count", 128)
        .u32("deepseek2.vocab_size", 129_280)
        .u32("deepseek2.leading_dense_block_count", 3)
        .u32("deepseek2.attention.q_lora_rank", 1536)
        .u32("deepseek2.attention.kv_lora_rank", 512)
        .u32("deepseek2.rope.dimension_count", 64)
        .u32("deepseek2.expert_count", 256)
        .u32("deepseek2.expert_used_count", 8)
        .u32("deepseek2.expert_shared_count", 1)
        .u32("deepseek2.expert_feed_forward_length", 2048);
    let header = if mla {
        header
            .u32("deepseek2.attention.head_count_kv", 1)
            .u32("deepseek2.attention.key_length", 576)
            .u32("deepseek2.attention.value_length", 512)
            .u32("deepseek2.attention.key_length_mla", 192)
            .u32("deepseek2.attention.value_length_mla", 128)
    } else {
        header
            .u32("deepseek2.attention.head_count_kv", 128)
            .u32("deepseek2.attention.key_length", 192)
            .u32("deepseek2.attention.value_length", 128)
    };
    header
        .tensor("token_embd.weight", &[7168, 129_280], 12)
        .tensor("blk.0.attn_kv_a_mqa.weight", &[7168, 576], 12)
        .tensor("blk.3.ffn_up_exps.weight", &[7168, 2048, 256], 12)
        .tensor("output.weight", &[7168, 129_280], 14)
}

/// llama.cpp's build for the tests (scripts/llama-cpp.sh): its `models/` (vocabulary GGUFs) and its
/// venv's Python with gguf-py.
pub fn llama_cpp() -> std::path::PathBuf {
    let current = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/llama-cpp/current");
    std::fs::canonicalize(&current)
        .unwrap_or_else(|error| panic!("{} is missing ({error}): run scripts/llama-cpp.sh first", current.display()))
}

/// The tests' tiny llama GGUF (tests/testsuite/support/tiny_llama.py, seed 1, `layers` layers),
/// written by gguf-py into `dir`.
pub fn tiny_llama(dir: &Path, layers: u32) -> std::path::PathBuf {
    let build = llama_cpp();
    let gguf = dir.join(format!("tiny-llama-l{layers}.gguf"));
    let output = std::process::Command::new(build.join("venv/bin/python"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testsuite/support/tiny_llama.py"))
        .arg(build.join("models/ggml-vocab-llama-spm.gguf"))
        .arg(&gguf)
        .arg("1")
        .arg(layers.to_string())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run the venv's python");
    assert!(output.status.success(), "tiny_llama.py failed: {}", String::from_utf8_lossy(&output.stderr));
    gguf
}

/// The model's shape with its weights counted from its checkpoint's tensors (as reading their
/// headers counts them), without writing the files.
pub fn with_weights(config_json: &str) -> ModelShape {
    let mut shape = shape_of(config_json);
    let mut weights = super::weights::Weights::new(super::weights::WeightSource::Headers, shape.layers);
    for tensor in tensors(config_json) {
        let dimensions = tensor.shape.iter().filter(|&&d| d > 1).count();
        weights.add(super::weights::Naming::HuggingFace, &tensor.name, dimensions, tensor.bytes());
    }
    shape.tied_embeddings = !weights.output_head;
    shape.weights = Some(weights);
    shape
}
