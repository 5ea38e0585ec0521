//! A Hugging Face `config.json` → the model's shape, or why it cannot be sized. The fields are
//! transformers' (and vLLM's reading of them, `vllm/config/model.py` and each model's file): the
//! language model's own fields under `text_config` for a multimodal config, the expert count under
//! its several names, DeepSeek's MLA ranks, sliding-window layers by `layer_types` or by each
//! family's pattern, `quantization_config` as GPTQ, AWQ, FP8, MXFP4 and compressed-tensors
//! publish it. Every number is checked against a bound no real model reaches.
//!
//! Only architectures whose cache is attention over every token (full, grouped-query, latent or
//! sliding-window) are sized; a hybrid (linear attention, Mamba, recurrent state) or an unknown
//! architecture is [`Sizing::CannotSize`] with the reason.

use serde_json::{Map, Value};

use super::{HeaderError, Mla, ModelShape, Moe, Quantization, Sizing, SlidingWindow};

/// The largest config.json read: real ones are a few kilobytes (a long `layer_types` tens).
pub const CONFIG_LIMIT: u64 = 4 << 20;

/// Bounds no real model reaches, checked before anything is sized from a number.
const MAX_LAYERS: u64 = 4096;
const MAX_HEADS: u64 = 65_536;
const MAX_WIDTH: u64 = 1 << 24;
const MAX_VOCAB: u64 = 1 << 24;
const MAX_CONTEXT: u64 = 1 << 30;
const MAX_EXPERTS: u64 = 65_536;
const MAX_TEXT: usize = 256;

/// Architectures whose cache is attention over tokens, as vLLM registers them
/// (`vllm/model_executor/models/registry.py`): plain or grouped-query attention, DeepSeek's latent
/// attention, sliding windows.
const SIZED_ARCHITECTURES: &[&str] = &[
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "MixtralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen2MoeForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "GptOssForCausalLM",
    "Gemma2ForCausalLM",
    "Gemma3ForCausalLM",
    "Gemma3ForConditionalGeneration",
    "GlmForCausalLM",
    "Glm4ForCausalLM",
    "Glm4MoeForCausalLM",
    "Phi3ForCausalLM",
    "GraniteForCausalLM",
    "GraniteMoeForCausalLM",
    "OlmoeForCausalLM",
    "Olmo2ForCausalLM",
    "Mistral3ForConditionalGeneration",
    "Qwen2_5_VLForConditionalGeneration",
    "MiniMaxM2ForCausalLM",
    "Ernie4_5_ForCausalLM",
    "Ernie4_5_MoeForCausalLM",
];

/// Words in an architecture's name that say its cache is (partly) a recurrent state.
const HYBRID_ARCHITECTURES: &[&str] = &[
    "Mamba",
    "Jamba",
    "NemotronH",
    "Qwen3Next",
    "Qwen3_5",
    "FalconH1",
    "GraniteMoeHybrid",
    "Lfm2",
    "MiniMaxText01",
    "MiniMaxM1",
    "Zamba",
    "Bamba",
    "Plamo2",
    "RecurrentGemma",
    "Rwkv",
    "xLSTM",
];

/// Config keys only hybrid models have: linear attention's heads, a Mamba state, a layer pattern.
const HYBRID_KEYS: &[&str] = &[
    "full_attention_interval",
    "linear_num_value_heads",
    "linear_num_key_heads",
    "linear_key_head_dim",
    "mamba_d_state",
    "mamba_expand",
    "ssm_state_size",
    "hybrid_override_pattern",
    "attn_layer_period",
    "layers_block_type",
];

/// The layer kinds `layer_types` may name for a model sized here.
const ATTENTION_LAYER_TYPES: [&str; 2] = ["full_attention", "sliding_attention"];

/// The shape `bytes` (a config.json) describes, or why it cannot be sized.
pub fn parse(bytes: &[u8]) -> Result<Sizing, HeaderError> {
    if bytes.len() as u64 > CONFIG_LIMIT {
        return Err(HeaderError::too_large("config.json", bytes.len() as u64, CONFIG_LIMIT));
    }
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| HeaderError::invalid("config.json", format!("not JSON: {e}")))?;
    let Value::Object(top) = value else {
        return Err(HeaderError::invalid("config.json", "not a JSON object"));
    };
    let config = Config::new(&top);
    let architecture = config.architecture()?;
    if let Some(why) = config.why_hybrid(&architecture)? {
        return Ok(Sizing::CannotSize { architecture, why });
    }
    if !SIZED_ARCHITECTURES.contains(&architecture.as_str()) {
        return Ok(Sizing::CannotSize {
            architecture: architecture.clone(),
            why: format!(
                "{architecture} is not an architecture whose cache strix-toolbox knows how to size (it sizes \
                 attention caches: full, grouped-query, latent and sliding-window)"
            ),
        });
    }
    if config.get("index_topk").is_some_and(|v| !v.is_null()) {
        return Ok(Sizing::CannotSize {
            architecture,
            why: "its sparse-attention indexer keeps a cache of its own (index_topk), which is not sized here".into(),
        });
    }
    Ok(Sizing::Sized(Box::new(config.shape(architecture)?)))
}

/// What transformers fills in for the fields a Gemma 3 text config leaves out: the defaults of
/// `Gemma3TextConfig` (transformers' `models/gemma3/configuration_gemma3.py`, as in 5.19). The
/// published multimodal gemma-3 configs rely on them: gemma-3-27b-it's `text_config` names no
/// `vocab_size` or `max_position_embeddings`, gemma-3-4b-it's not even its heads.
const GEMMA3_TEXT_DEFAULTS: &str = r#"{"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
    "max_position_embeddings": 131072, "sliding_window": 4096}"#;

static GEMMA3_TEXT: std::sync::LazyLock<Map<String, Value>> =
    std::sync::LazyLock::new(|| serde_json::from_str(GEMMA3_TEXT_DEFAULTS).unwrap_or_default());

/// The config's fields, the language model's first: a multimodal config keeps them under
/// `text_config` (vLLM's `get_text_config`), InternVL's under `llm_config`; then what the
/// family's config class fills in for a field left out.
struct Config<'a> {
    text: Option<&'a Map<String, Value>>,
    top: &'a Map<String, Value>,
    defaults: Option<&'static Map<String, Value>>,
}

impl<'a> Config<'a> {
    fn new(top: &'a Map<String, Value>) -> Config<'a> {
        let text = ["text_config", "language_config", "llm_config"].iter().find_map(|key| top.get(*key)?.as_object());
        let model_type =
            |config: &Map<String, Value>| config.get("model_type").and_then(Value::as_str).map(str::to_string);
        let gemma3 = [text.and_then(model_type), model_type(top)]
            .iter()
            .flatten()
            .any(|kind| kind == "gemma3_text" || kind == "gemma3");
        Config { text, top, defaults: gemma3.then(|| &*GEMMA3_TEXT) }
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.text
            .and_then(|text| text.get(key))
            .or_else(|| self.top.get(key))
            .or_else(|| self.defaults.and_then(|defaults| defaults.get(key)))
    }

    fn architecture(&self) -> Result<String, HeaderError> {
        let named = self
            .top
            .get("architectures")
            .or_else(|| self.text.and_then(|text| text.get("architectures")))
            .and_then(Value::as_array)
            .and_then(|list| list.first());
        match named {
            Some(Value::String(name)) => text("architectures[0]", name),
            Some(_) => Err(HeaderError::invalid("config.json architectures", "not a list of names")),
            None => match self.get("model_type") {
                Some(Value::String(model_type)) => text("model_type", model_type),
                _ => Ok("unknown".into()),
            },
        }
    }

    /// Why this config's cache is not (only) attention, when it is not.
    fn why_hybrid(&self, architecture: &str) -> Result<Option<String>, HeaderError> {
        if let Some(word) = HYBRID_ARCHITECTURES.iter().find(|word| architecture.contains(**word)) {
            return Ok(Some(format!(
                "{architecture} is a hybrid model ({word}): part of its cache is a recurrent state per request, not a \
                 KV cache per token, which this plan cannot size honestly"
            )));
        }
        if let Some(key) = HYBRID_KEYS.iter().find(|key| self.get(key).is_some_and(|v| !v.is_null())) {
            return Ok(Some(format!(
                "its config has {key}: a hybrid of attention and linear-attention or state-space layers, whose \
                 recurrent state is not a KV cache per token"
            )));
        }
        if let Some(types) = self.get("layer_types").and_then(Value::as_array) {
            for kind in types {
                let Some(kind) = kind.as_str() else {
                    return Err(HeaderError::invalid("config.json layer_types", "not a list of names"));
                };
                if !ATTENTION_LAYER_TYPES.contains(&kind) {
                    return Ok(Some(format!(
                        "layer_types has {} layers: their cache is not a KV cache per token over the context",
                        text("layer_types", kind)?
                    )));
                }
            }
        }
        Ok(None)
    }

    /// A count under `key` (or the first of its other names), bounded by `max`.
    fn count(&self, keys: &[&str], max: u64) -> Result<Option<u64>, HeaderError> {
        for key in keys {
            match self.get(key) {
                None | Some(Value::Null) => continue,
                Some(value) => return count(key, value, max).map(Some),
            }
        }
        Ok(None)
    }

    fn required(&self, keys: &[&str], max: u64) -> Result<u64, HeaderError> {
        self.count(keys, max)?.ok_or_else(|| {
            HeaderError::invalid(format!("config.json {}", keys.first().copied().unwrap_or_default()), "missing")
        })
    }

    fn flag(&self, key: &str) -> Option<bool> {
        self.get(key).and_then(Value::as_bool)
    }

    fn shape(&self, architecture: String) -> Result<ModelShape, HeaderError> {
        let layers = self.required(&["num_hidden_layers", "num_layers", "n_layer"], MAX_LAYERS)?;
        let hidden_size = self.required(&["hidden_size", "n_embd", "d_model"], MAX_WIDTH)?;
        let attention_heads = self.required(&["num_attention_heads", "n_head"], MAX_HEADS)?;
        let kv_heads = self.count(&["num_key_value_heads", "num_kv_heads"], MAX_HEADS)?.unwrap_or(attention_heads);
        positive("num_hidden_layers", layers)?;
        positive("num_attention_heads", attention_heads)?;
        positive("num_key_value_heads", kv_heads)?;
        if kv_heads > attention_heads {
            return Err(HeaderError::invalid(
                "config.json num_key_value_heads",
                format!("{kv_heads} key/value heads for {attention_heads} attention heads"),
            ));
        }
        let mla = self.mla()?;
        let (head_dim, v_head_dim) = match &mla {
            Some(mla) => (mla.qk_nope_head_dim + mla.qk_rope_head_dim, mla.v_head_dim),
            None => {
                let head_dim = match self.count(&["head_dim"], MAX_WIDTH)? {
                    Some(head_dim) => head_dim,
                    None if hidden_size % attention_heads == 0 => hidden_size / attention_heads,
                    None => {
                        return Err(HeaderError::invalid(
                            "config.json head_dim",
                            format!(
                                "missing, and hidden_size {hidden_size} is not a multiple of {attention_heads} heads"
                            ),
                        ))
                    }
                };
                (head_dim, head_dim)
            }
        };
        positive("head_dim", head_dim)?;
        let intermediate_size =
            self.count(&["intermediate_size", "ffn_hidden_size", "n_inner"], MAX_WIDTH)?.unwrap_or(0);
        let vocab_size = self.required(&["vocab_size", "padded_vocab_size"], MAX_VOCAB)?;
        let max_context = self
            .required(&["max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"], MAX_CONTEXT)?;
        positive("max_position_embeddings", max_context)?;
        let layers = u32::try_from(layers).unwrap_or(u32::MAX);
        let moe = self.moe(layers, intermediate_size)?;
        let sliding = self.sliding(&architecture, layers)?;
        let dtype = match self.get("torch_dtype").or_else(|| self.get("dtype")) {
            Some(Value::String(dtype)) => Some(text("torch_dtype", dtype)?),
            _ => None,
        };
        let tied_embeddings = self.flag("tie_word_embeddings").unwrap_or(architecture.starts_with("Gemma"));
        Ok(ModelShape {
            architecture,
            layers,
            hidden_size,
            attention_heads: u32::try_from(attention_heads).unwrap_or(u32::MAX),
            kv_heads: u32::try_from(kv_heads).unwrap_or(u32::MAX),
            head_dim,
            v_head_dim,
            intermediate_size,
            vocab_size,
            dtype,
            max_context,
            tied_embeddings,
            quantization: self.quantization()?,
            moe,
            mla,
            sliding,
            weights: None,
        })
    }

    fn mla(&self) -> Result<Option<Mla>, HeaderError> {
        let Some(kv_lora_rank) = self.count(&["kv_lora_rank"], MAX_WIDTH)? else { return Ok(None) };
        let rope = self.required(&["qk_rope_head_dim"], MAX_WIDTH)?;
        let nope = self.required(&["qk_nope_head_dim"], MAX_WIDTH)?;
        let v_head_dim = self.required(&["v_head_dim"], MAX_WIDTH)?;
        positive("kv_lora_rank", kv_lora_rank)?;
        positive("v_head_dim", v_head_dim)?;
        Ok(Some(Mla {
            kv_lora_rank,
            qk_rope_head_dim: rope,
            qk_nope_head_dim: nope,
            v_head_dim,
            q_lora_rank: self.count(&["q_lora_rank"], MAX_WIDTH)?,
        }))
    }

    /// Experts under their several names: Qwen's `num_experts`, Mixtral's and gpt-oss'
    /// `num_local_experts`, DeepSeek's `n_routed_experts`, Ernie's `moe_num_experts`.
    fn moe(&self, layers: u32, intermediate_size: u64) -> Result<Option<Moe>, HeaderError> {
        let experts =
            self.count(&["num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"], MAX_EXPERTS)?;
        let Some(experts) = experts.filter(|&experts| experts > 0) else { return Ok(None) };
        let per_token = self.required(
            &["num_experts_per_tok", "experts_per_token", "num_experts_per_token", "moe_topk", "moe_k"],
            MAX_EXPERTS,
        )?;
        if per_token == 0 || per_token > experts {
            return Err(HeaderError::invalid(
                "config.json num_experts_per_tok",
                format!("{per_token} experts per token of {experts}"),
            ));
        }
        let expert_width = self.count(&["moe_intermediate_size"], MAX_WIDTH)?.unwrap_or(intermediate_size);
        positive("moe_intermediate_size", expert_width)?;
        let shared_width_each = self.count(&["shared_expert_intermediate_size"], MAX_WIDTH)?;
        let shared_count = self
            .count(&["n_shared_experts", "num_shared_experts"], MAX_EXPERTS)?
            .unwrap_or(u64::from(shared_width_each.is_some_and(|width| width > 0)));
        let shared_width = shared_width_each.unwrap_or(expert_width).saturating_mul(shared_count);
        let dense_layers = self.dense_layers(layers)?;
        Ok(Some(Moe {
            experts: u32::try_from(experts).unwrap_or(u32::MAX),
            experts_per_token: u32::try_from(per_token).unwrap_or(u32::MAX),
            expert_width,
            shared_width,
            dense_layers,
        }))
    }

    /// The layers with a dense MLP, by vLLM's rules: DeepSeek's `first_k_dense_replace` and
    /// `moe_layer_freq` (`deepseek_v2.py`), Qwen's `mlp_only_layers` and `decoder_sparse_step`
    /// (`qwen3_moe.py`).
    fn dense_layers(&self, layers: u32) -> Result<Vec<u32>, HeaderError> {
        let first_dense = self.count(&["first_k_dense_replace"], MAX_LAYERS)?.unwrap_or(0);
        let frequency = self.count(&["moe_layer_freq"], MAX_LAYERS)?.unwrap_or(1).max(1);
        let sparse_step = self.count(&["decoder_sparse_step"], MAX_LAYERS)?.unwrap_or(1).max(1);
        let mut mlp_only = Vec::new();
        if let Some(list) = self.get("mlp_only_layers").filter(|v| !v.is_null()) {
            let Some(list) = list.as_array().filter(|list| list.len() as u64 <= MAX_LAYERS) else {
                return Err(HeaderError::invalid("config.json mlp_only_layers", "not a list of layers"));
            };
            for layer in list {
                mlp_only.push(count("mlp_only_layers", layer, MAX_LAYERS)?);
            }
        }
        Ok((0..layers)
            .filter(|&layer| {
                let layer = u64::from(layer);
                layer < first_dense
                    || layer % frequency != 0
                    || (layer + 1) % sparse_step != 0
                    || mlp_only.contains(&layer)
            })
            .collect())
    }

    /// Which layers slide, and how far: `layer_types` when the config lists them (transformers
    /// writes it for every recent family), else the family's own rule.
    fn sliding(&self, architecture: &str, layers: u32) -> Result<Option<SlidingWindow>, HeaderError> {
        let window = self.count(&["sliding_window"], MAX_CONTEXT)?.filter(|&window| window > 0);
        let sliding: Vec<u32> = if let Some(types) = self.get("layer_types").filter(|v| !v.is_null()) {
            let Some(types) = types.as_array().filter(|types| types.len() == layers as usize) else {
                return Err(HeaderError::invalid(
                    "config.json layer_types",
                    format!("not a list of the {layers} layers' kinds"),
                ));
            };
            (0..layers)
                .filter(|&layer| types.get(layer as usize).and_then(Value::as_str) == Some("sliding_attention"))
                .collect()
        } else if window.is_none() || self.flag("use_sliding_window") == Some(false) {
            Vec::new()
        } else if architecture.starts_with("Gemma3") {
            // Gemma 3: every `sliding_window_pattern`-th layer is global (transformers' Gemma3Config).
            let pattern = self.count(&["sliding_window_pattern"], MAX_LAYERS)?.unwrap_or(6).max(1);
            (0..layers).filter(|&layer| (u64::from(layer) + 1) % pattern != 0).collect()
        } else if architecture.starts_with("Gemma2") {
            // Gemma 2: the even layers slide (vLLM's gemma2.py).
            (0..layers).filter(|layer| layer % 2 == 0).collect()
        } else if let Some(first) = self.count(&["max_window_layers"], MAX_LAYERS)? {
            // Qwen 2 with `use_sliding_window`: the layers from `max_window_layers` on.
            (0..layers).filter(|&layer| u64::from(layer) >= first).collect()
        } else {
            // Mistral's original form: a window on every layer.
            (0..layers).collect()
        };
        if sliding.is_empty() {
            return Ok(None);
        }
        let Some(window) = window else {
            return Err(HeaderError::invalid("config.json sliding_window", "sliding layers without a window"));
        };
        Ok(Some(SlidingWindow { window, layers: sliding }))
    }

    fn quantization(&self) -> Result<Option<Quantization>, HeaderError> {
        let Some(config) = ["quantization_config", "compression_config"]
            .iter()
            .find_map(|key| self.top.get(*key).or_else(|| self.text.and_then(|text| text.get(*key))))
            .filter(|v| !v.is_null())
        else {
            return Ok(None);
        };
        let Some(config) = config.as_object() else {
            return Err(HeaderError::invalid("config.json quantization_config", "not an object"));
        };
        let field = |key: &str| config.get(key).filter(|v| !v.is_null());
        let method = match field("quant_method") {
            Some(Value::String(method)) => text("quant_method", method)?,
            Some(_) => return Err(HeaderError::invalid("config.json quant_method", "not a name")),
            None if field("load_in_4bit").is_some() || field("load_in_8bit").is_some() => "bitsandbytes".into(),
            None => "unknown".into(),
        };
        let number = |key: &str, max: u64| -> Result<Option<u64>, HeaderError> {
            match field(key) {
                None => Ok(None),
                // GPTQ's -1: one scale per output channel, no groups.
                Some(value) if value.as_i64() == Some(-1) => Ok(None),
                Some(value) => count(key, value, max).map(Some),
            }
        };
        let mut bits = number("bits", 64)?.or(number("w_bit", 64)?).or(number("weight_bits", 64)?);
        let mut group_size = number("group_size", MAX_WIDTH)?.or(number("q_group_size", MAX_WIDTH)?);
        // compressed-tensors: the weights' scheme of its (first) config group.
        if let Some(weights) = field("config_groups")
            .and_then(Value::as_object)
            .and_then(|groups| groups.values().next())
            .and_then(|group| group.get("weights"))
            .and_then(Value::as_object)
        {
            if let Some(num_bits) = weights.get("num_bits").filter(|v| !v.is_null()) {
                bits = Some(count("num_bits", num_bits, 64)?);
            }
            if let Some(size) = weights.get("group_size").filter(|v| !v.is_null()) {
                group_size = Some(count("group_size", size, MAX_WIDTH)?);
            }
        }
        let block = match field("weight_block_size") {
            None => None,
            Some(Value::Array(pair)) if pair.len() == 2 => {
                let n = count("weight_block_size", pair.first().unwrap_or(&Value::Null), MAX_WIDTH)?;
                let k = count("weight_block_size", pair.get(1).unwrap_or(&Value::Null), MAX_WIDTH)?;
                positive("weight_block_size", n.min(k))?;
                Some([n, k])
            }
            Some(_) => return Err(HeaderError::invalid("config.json weight_block_size", "not [n, k]")),
        };
        let kv_cache_dtype = field("kv_cache_scheme").and_then(Value::as_object).map(|scheme| {
            let bits = scheme.get("num_bits").and_then(Value::as_u64).unwrap_or(0);
            match scheme.get("type").and_then(Value::as_str) {
                Some("float") if bits == 8 => "fp8".to_string(),
                Some("int") if bits == 8 => "int8".to_string(),
                _ => format!("{bits}-bit"),
            }
        });
        Ok(Some(Quantization { method, bits: bits.map(|b| b as u32), group_size, block, kv_cache_dtype }))
    }
}

/// A count: a non-negative integer (an integral float too, as some configs write them), at most `max`.
fn count(key: &str, value: &Value, max: u64) -> Result<u64, HeaderError> {
    let number = match value {
        Value::Number(number) => number
            .as_u64()
            .or_else(|| number.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1.8e19).map(|f| f as u64)),
        _ => None,
    };
    let Some(number) = number else {
        return Err(HeaderError::invalid(format!("config.json {key}"), format!("{value} is not a count")));
    };
    if number > max {
        return Err(HeaderError::too_large(format!("config.json {key}"), number, max));
    }
    Ok(number)
}

fn positive(key: &str, value: u64) -> Result<(), HeaderError> {
    if value == 0 {
        return Err(HeaderError::invalid(format!("config.json {key}"), "is 0"));
    }
    Ok(())
}

/// A name from the config, bounded and printable.
fn text(key: &str, value: &str) -> Result<String, HeaderError> {
    if value.len() > MAX_TEXT || value.chars().any(char::is_control) {
        return Err(HeaderError::invalid(format!("config.json {key}"), "not a short printable name"));
    }
    Ok(value.to_string())
}

#[cfg(test)]
mod tests;
