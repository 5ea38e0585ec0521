//! A GGUF file's header, read as untrusted input the way ggml's own reader checks it
//! (`ggml/src/gguf.cpp`, `gguf_init_from_reader`): the magic `GGUF`, version 2 or 3 (1 is
//! refused, as llama.cpp does), the tensor and key-value counts, every value type (arrays and
//! strings included), then each tensor's name, dimensions, ggml type and offset; a tensor's bytes
//! are its elements over its type's block size times the block's bytes (`GGML_QUANT_SIZES` in
//! gguf-py), and the offsets follow each other at the file's alignment.
//!
//! Nothing is allocated for a claim before the bytes behind it are in hand: a count, length or
//! array beyond [`HEADER_LIMIT`] is refused; one beyond the bytes read so far is
//! [`HeaderError::Truncated`] with how many bytes the next try needs. Tokenizer arrays are stepped
//! over, only their length kept.
//!
//! [`shape`] turns the keys into a [`ModelShape`] by llama.cpp's names (`{arch}.block_count`,
//! `{arch}.attention.head_count_kv`...) with per-layer weights (llama.cpp splits by layers).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::weights::{Naming, WeightSource, Weights};
use super::{checked_product, HeaderError, Mla, ModelShape, Moe, Quantization, Sizing, SlidingWindow};

/// The longest header read: a 256k-token vocabulary with its merges is about 20 MB.
pub const HEADER_LIMIT: u64 = 128 << 20;
/// More key-value pairs or tensors than any model has.
const MAX_KV: u64 = 100_000;
const MAX_TENSORS: u64 = 1_000_000;
/// ggml's `GGML_MAX_NAME`: a tensor name is shorter.
const MAX_TENSOR_NAME: u64 = 64;
/// ggml's `GGML_MAX_DIMS`.
const MAX_DIMS: u32 = 4;
/// The longest key, and the longest string value kept (a chat template is tens of kilobytes).
const MAX_KEY: u64 = 1 << 16;
const MAX_STRING: u64 = 16 << 20;
/// Arrays of numbers up to this long are kept (per-layer head counts); longer ones only counted.
const KEPT_ARRAY: u64 = 1 << 16;

/// A key's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Value {
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    Bool(bool),
    String(String),
    /// An array: its length, and its items when they are numbers or booleans and few enough.
    Array {
        len: u64,
        items: Option<Vec<Value>>,
    },
}

impl Value {
    /// A non-negative integer.
    pub fn count(&self) -> Option<u64> {
        match self {
            Value::Unsigned(n) => Some(*n),
            Value::Signed(n) => u64::try_from(*n).ok(),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
}

/// One tensor's entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorInfo {
    pub name: String,
    /// ggml's `ne`: the first dimension is the row.
    pub dimensions: Vec<u64>,
    pub ggml_type: u32,
    /// From the start of the data section.
    pub offset: u64,
    pub bytes: u64,
}

/// A GGUF header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GgufHeader {
    pub version: u32,
    pub keys: BTreeMap<String, Value>,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    /// Where the tensor data starts in the file (the header's bytes, padded).
    pub data_offset: u64,
    /// The tensor data's bytes, padding included.
    pub data_bytes: u64,
}

/// ggml's types: (name, elements per block, bytes per block), as `GGML_QUANT_SIZES` in gguf-py's
/// constants.py; the removed ones (4, 5, 31-33, 36-38) have none.
pub fn ggml_type(id: u32) -> Option<(&'static str, u64, u64)> {
    const QK_K: u64 = 256;
    Some(match id {
        0 => ("F32", 1, 4),
        1 => ("F16", 1, 2),
        2 => ("Q4_0", 32, 2 + 16),
        3 => ("Q4_1", 32, 2 + 2 + 16),
        6 => ("Q5_0", 32, 2 + 4 + 16),
        7 => ("Q5_1", 32, 2 + 2 + 4 + 16),
        8 => ("Q8_0", 32, 2 + 32),
        9 => ("Q8_1", 32, 2 + 2 + 32),
        10 => ("Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4),
        11 => ("Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12),
        12 => ("Q4_K", QK_K, 2 + 2 + QK_K / 2 + 12),
        13 => ("Q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12),
        14 => ("Q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16),
        15 => ("Q8_K", QK_K, 4 + QK_K + QK_K / 8),
        16 => ("IQ2_XXS", QK_K, 2 + QK_K / 4),
        17 => ("IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32),
        18 => ("IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8),
        19 => ("IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16),
        20 => ("IQ4_NL", 32, 2 + 16),
        21 => ("IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4),
        22 => ("IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16),
        23 => ("IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64),
        24 => ("I8", 1, 1),
        25 => ("I16", 1, 2),
        26 => ("I32", 1, 4),
        27 => ("I64", 1, 8),
        28 => ("F64", 1, 8),
        29 => ("IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32),
        30 => ("BF16", 1, 2),
        34 => ("TQ1_0", QK_K, 2 + 4 * 13),
        35 => ("TQ2_0", QK_K, 2 + 64),
        39 => ("MXFP4", 32, 1 + 16),
        40 => ("NVFP4", 64, 4 + 32),
        41 => ("Q1_0", 128, 2 + 16),
        42 => ("Q2_0", 64, 2 + 16),
        _ => return None,
    })
}

/// The header at the start of a GGUF file; `start` holds the file's first bytes. Too few is
/// [`HeaderError::Truncated`] with the bytes the next try needs.
pub fn parse(start: &[u8]) -> Result<GgufHeader, HeaderError> {
    let mut cursor = Cursor { bytes: start, at: 0 };
    let magic = cursor.take(4, "magic")?;
    if magic != b"GGUF" {
        return Err(HeaderError::invalid("the GGUF header", format!("its magic is {magic:?}, not \"GGUF\"")));
    }
    let version = cursor.u32("version")?;
    match version {
        2 | 3 => {}
        1 => {
            return Err(HeaderError::invalid(
                "the GGUF header",
                "version 1 is no longer read (llama.cpp refuses it too)",
            ))
        }
        other => return Err(HeaderError::invalid("the GGUF header", format!("version {other} is not 2 or 3"))),
    }
    let tensor_count = cursor.u64("tensor count")?;
    if tensor_count > MAX_TENSORS {
        return Err(HeaderError::too_large("the GGUF tensor count", tensor_count, MAX_TENSORS));
    }
    let kv_count = cursor.u64("key-value count")?;
    if kv_count > MAX_KV {
        return Err(HeaderError::too_large("the GGUF key-value count", kv_count, MAX_KV));
    }
    let mut keys = BTreeMap::new();
    for _ in 0..kv_count {
        let key = cursor.string("key", MAX_KEY)?;
        if key.is_empty() {
            return Err(HeaderError::invalid("a GGUF key", "is empty"));
        }
        let value_type = cursor.u32("value type")?;
        let value = cursor.value(&key, value_type)?;
        if keys.insert(key.clone(), value).is_some() {
            return Err(HeaderError::invalid(format!("GGUF key {key}"), "appears twice"));
        }
    }
    let alignment = match keys.get("general.alignment") {
        None => 32,
        Some(Value::Unsigned(n)) if n.is_power_of_two() && *n <= u64::from(u32::MAX) => *n,
        Some(other) => {
            return Err(HeaderError::invalid("GGUF key general.alignment", format!("{other:?} is not a power of 2")))
        }
    };
    let mut tensors = Vec::new();
    let mut names = BTreeSet::new();
    let mut expected_offset = 0u64;
    for _ in 0..tensor_count {
        let name = cursor.string("tensor name", MAX_TENSOR_NAME - 1)?;
        if !names.insert(name.clone()) {
            return Err(HeaderError::invalid(format!("GGUF tensor {name}"), "appears twice"));
        }
        let dims = cursor.u32("tensor dimensions")?;
        if dims > MAX_DIMS {
            return Err(HeaderError::invalid(format!("GGUF tensor {name}"), format!("{dims} dimensions, more than 4")));
        }
        let mut dimensions = Vec::with_capacity(dims as usize);
        for _ in 0..dims {
            let dimension = cursor.u64("tensor dimension")?;
            if dimension > i64::MAX as u64 {
                return Err(HeaderError::invalid(format!("GGUF tensor {name}"), "a negative dimension"));
            }
            dimensions.push(dimension);
        }
        let ggml_type_id = cursor.u32("tensor type")?;
        let Some((type_name, block, block_bytes)) = ggml_type(ggml_type_id) else {
            return Err(HeaderError::invalid(
                format!("GGUF tensor {name}"),
                format!("unknown ggml type {ggml_type_id}"),
            ));
        };
        let row = dimensions.first().copied().unwrap_or(1);
        if row % block != 0 {
            return Err(HeaderError::invalid(
                format!("GGUF tensor {name}"),
                format!("{row} elements per row is not a multiple of {type_name}'s block of {block}"),
            ));
        }
        let what = format!("GGUF tensor {name}");
        let elements = checked_product(&what, dimensions.iter().copied())?;
        let bytes = checked_product(&what, [elements / block, block_bytes])?;
        let offset = cursor.u64("tensor offset")?;
        if offset != expected_offset {
            return Err(HeaderError::invalid(
                what,
                format!("its offset is {offset}, where the previous tensors end at {expected_offset}"),
            ));
        }
        expected_offset = padded(offset.checked_add(bytes), alignment)
            .ok_or_else(|| HeaderError::invalid(format!("GGUF tensor {name}"), "the data's size overflows"))?;
        tensors.push(TensorInfo { name, dimensions, ggml_type: ggml_type_id, offset, bytes });
    }
    let data_offset = padded(Some(cursor.at as u64), alignment).unwrap_or(u64::MAX);
    Ok(GgufHeader { version, keys, tensors, alignment, data_offset, data_bytes: expected_offset })
}

/// `value` rounded up to `alignment`; None on overflow.
fn padded(value: Option<u64>, alignment: u64) -> Option<u64> {
    let value = value?;
    value.checked_add(alignment - 1).map(|v| v / alignment * alignment)
}

/// Reads little-endian values from the bytes in hand, never past them.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], HeaderError> {
        let end = (self.at as u64).checked_add(n).filter(|&end| end <= HEADER_LIMIT).ok_or_else(|| {
            HeaderError::too_large(
                format!("the GGUF header's {what}"),
                (self.at as u64).saturating_add(n),
                HEADER_LIMIT,
            )
        })?;
        let Some(bytes) = self.bytes.get(self.at..end as usize) else {
            return Err(HeaderError::Truncated { what: what.into(), have: self.bytes.len() as u64, needed: end });
        };
        self.at = end as usize;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], HeaderError> {
        let bytes = self.take(N as u64, what)?;
        <[u8; N]>::try_from(bytes).map_err(|_| HeaderError::invalid(what, "short read"))
    }

    fn u32(&mut self, what: &str) -> Result<u32, HeaderError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, HeaderError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A length-prefixed string of at most `limit` bytes (longer is refused before reading it).
    fn string(&mut self, what: &str, limit: u64) -> Result<String, HeaderError> {
        let length = self.u64(what)?;
        if length > limit {
            return Err(HeaderError::too_large(format!("a GGUF {what}"), length, limit));
        }
        let bytes = self.take(length, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| HeaderError::invalid(format!("a GGUF {what}"), "not UTF-8"))
    }

    /// One value of `value_type` (GGUF's `gguf_type`); an array's items are kept only when they
    /// are few numbers, else stepped over.
    fn value(&mut self, key: &str, value_type: u32) -> Result<Value, HeaderError> {
        Ok(match value_type {
            0 => Value::Unsigned(u64::from(self.array::<1>(key)?[0])),
            1 => Value::Signed(i64::from(i8::from_le_bytes(self.array(key)?))),
            2 => Value::Unsigned(u64::from(u16::from_le_bytes(self.array(key)?))),
            3 => Value::Signed(i64::from(i16::from_le_bytes(self.array(key)?))),
            4 => Value::Unsigned(u64::from(self.u32(key)?)),
            5 => Value::Signed(i64::from(i32::from_le_bytes(self.array(key)?))),
            6 => Value::Float(f64::from(f32::from_le_bytes(self.array(key)?))),
            7 => match self.array::<1>(key)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                other => return Err(HeaderError::invalid(format!("GGUF key {key}"), format!("bool {other}"))),
            },
            8 => Value::String(self.string(&format!("string {key}"), MAX_STRING)?),
            9 => {
                let item_type = self.u32(key)?;
                let len = self.u64(key)?;
                let item_bytes = match item_type {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    10..=12 => 8,
                    8 => 8, // at least each string's length
                    9 => return Err(HeaderError::invalid(format!("GGUF key {key}"), "an array of arrays")),
                    other => {
                        return Err(HeaderError::invalid(format!("GGUF key {key}"), format!("value type {other}")))
                    }
                };
                let least = len.checked_mul(item_bytes).filter(|&b| b <= HEADER_LIMIT).ok_or_else(|| {
                    HeaderError::too_large(format!("GGUF array {key}"), len.saturating_mul(item_bytes), HEADER_LIMIT)
                })?;
                if item_type == 8 {
                    for _ in 0..len {
                        let length = self.u64(key)?;
                        if length > MAX_STRING {
                            return Err(HeaderError::too_large(
                                format!("a string of GGUF array {key}"),
                                length,
                                MAX_STRING,
                            ));
                        }
                        self.take(length, key)?;
                    }
                    Value::Array { len, items: None }
                } else if len <= KEPT_ARRAY {
                    // Room for the items the bytes in hand can hold, not for what the length claims.
                    let in_hand = (self.bytes.len().saturating_sub(self.at) as u64) / item_bytes;
                    let mut items = Vec::with_capacity(len.min(in_hand) as usize);
                    for _ in 0..len {
                        items.push(self.value(key, item_type)?);
                    }
                    Value::Array { len, items: Some(items) }
                } else {
                    self.take(least, key)?;
                    Value::Array { len, items: None }
                }
            }
            10 => Value::Unsigned(self.u64(key)?),
            11 => Value::Signed(i64::from_le_bytes(self.array(key)?)),
            12 => Value::Float(f64::from_le_bytes(self.array(key)?)),
            other => return Err(HeaderError::invalid(format!("GGUF key {key}"), format!("value type {other}"))),
        })
    }
}

/// llama.cpp's architectures whose cache is attention over tokens (`src/llama-arch.cpp` names).
const SIZED: &[&str] = &[
    "llama",
    "qwen2",
    "qwen2moe",
    "qwen3",
    "qwen3moe",
    "deepseek2",
    "gemma2",
    "gemma3",
    "glm4",
    "glm4moe",
    "phi3",
    "granite",
    "granitemoe",
    "olmoe",
    "olmo2",
    "mistral3",
    "gpt-oss",
    "minimax-m2",
    "command-r",
    "cohere2",
    "smollm3",
    "exaone4",
];
/// Architectures with a recurrent state beside (or instead of) a KV cache.
const HYBRID: &[&str] = &[
    "qwen3next",
    "qwen35",
    "qwen35moe",
    "mamba",
    "mamba2",
    "jamba",
    "falcon-h1",
    "granitehybrid",
    "lfm2",
    "lfm2moe",
    "plamo2",
    "rwkv6",
    "rwkv6qwen2",
    "rwkv7",
    "arwkv7",
    "minimax-01",
    "kimi-linear",
    "nemotron_h",
];
/// llama.cpp's sliding-window pattern by architecture (`load_swa_pattern` in `src/models/*.cpp`):
/// of every N layers the last is global.
const SWA_PATTERNS: &[(&str, u64)] =
    &[("gpt-oss", 2), ("gemma2", 2), ("gemma3", 6), ("cohere2", 4), ("exaone4", 4), ("olmo2", 4)];

/// The model's shape from a GGUF header (and more parts' tensors of a split model), or why it
/// cannot be sized.
pub fn shape(first: &GgufHeader, more_parts: &[GgufHeader]) -> Result<Sizing, HeaderError> {
    let keys = Keys(&first.keys);
    let architecture = match keys.get("general.architecture") {
        Some(Value::String(arch)) if arch.len() <= 64 && !arch.chars().any(char::is_control) => arch.clone(),
        Some(_) => return Err(HeaderError::invalid("GGUF key general.architecture", "not a short name")),
        None => return Err(HeaderError::invalid("the GGUF header", "general.architecture is missing")),
    };
    if HYBRID.contains(&architecture.as_str()) || keys.get(&format!("{architecture}.ssm.state_size")).is_some() {
        return Ok(Sizing::CannotSize {
            architecture: architecture.clone(),
            why: format!(
                "{architecture} is a hybrid model: part of its cache is a recurrent state per request, not a KV cache \
                 per token, which this plan cannot size honestly"
            ),
        });
    }
    if !SIZED.contains(&architecture.as_str()) {
        return Ok(Sizing::CannotSize {
            architecture: architecture.clone(),
            why: format!("{architecture} is not an architecture whose cache strix-toolbox knows how to size"),
        });
    }
    let prefix = architecture.clone();
    let arch = |key: &str| format!("{prefix}.{key}");
    let layers = keys.required(&arch("block_count"), 4096)?;
    let hidden_size = keys.required(&arch("embedding_length"), 1 << 24)?;
    let attention_heads = keys.most(&arch("attention.head_count"), 65_536)?.unwrap_or(0);
    let kv_heads = keys.most(&arch("attention.head_count_kv"), 65_536)?.unwrap_or(attention_heads);
    if layers == 0 || attention_heads == 0 || kv_heads == 0 {
        return Err(HeaderError::invalid("the GGUF header", "no layers or no attention heads"));
    }
    let head_dim = keys.count(&arch("attention.key_length"), 1 << 20)?.unwrap_or(hidden_size / attention_heads);
    let v_head_dim = keys.count(&arch("attention.value_length"), 1 << 20)?.unwrap_or(head_dim);
    let vocab_size = match keys.count(&arch("vocab_size"), 1 << 24)? {
        Some(vocab) => vocab,
        None => match keys.get("tokenizer.ggml.tokens") {
            Some(Value::Array { len, .. }) => *len,
            _ => 0,
        },
    };
    let layers32 = u32::try_from(layers).unwrap_or(u32::MAX);
    let moe = match keys.count(&arch("expert_count"), 65_536)?.filter(|&n| n > 0) {
        None => None,
        Some(experts) => {
            let expert_width = keys.count(&arch("expert_feed_forward_length"), 1 << 24)?.unwrap_or(0);
            let shared = keys.count(&arch("expert_shared_count"), 65_536)?.unwrap_or(0);
            let shared_each = keys.count(&arch("expert_shared_feed_forward_length"), 1 << 24)?.unwrap_or(expert_width);
            let leading_dense = keys.count(&arch("leading_dense_block_count"), 4096)?.unwrap_or(0);
            Some(Moe {
                experts: u32::try_from(experts).unwrap_or(u32::MAX),
                experts_per_token: u32::try_from(keys.count(&arch("expert_used_count"), 65_536)?.unwrap_or(0))
                    .unwrap_or(u32::MAX),
                expert_width,
                shared_width: shared.saturating_mul(shared_each),
                dense_layers: (0..layers32).filter(|&l| u64::from(l) < leading_dense).collect(),
            })
        }
    };
    // llama.cpp runs attention as MLA only when both `*_mla` widths are there (`is_mla()`,
    // src/llama-hparams.h): a GGUF converted before them (llama.cpp #12801, 2025-04) is cached as
    // the full multi-head attention its plain keys describe (`legacy_mla`).
    let key_mla = keys.count(&arch("attention.key_length_mla"), 1 << 20)?.filter(|&n| n > 0);
    let value_mla = keys.count(&arch("attention.value_length_mla"), 1 << 20)?.filter(|&n| n > 0);
    let mla = match (keys.count(&arch("attention.kv_lora_rank"), 1 << 20)?, key_mla, value_mla) {
        (Some(rank), Some(key_mla), Some(value_mla)) if rank > 0 => {
            let rope = keys.count(&arch("rope.dimension_count"), 1 << 20)?.unwrap_or(0);
            Some(Mla {
                kv_lora_rank: rank,
                qk_rope_head_dim: rope,
                qk_nope_head_dim: key_mla.saturating_sub(rope),
                v_head_dim: value_mla,
                q_lora_rank: keys.count(&arch("attention.q_lora_rank"), 1 << 20)?,
            })
        }
        _ => None,
    };
    let sliding = sliding(&keys, &architecture, layers32)?;
    let file_type = keys.count("general.file_type", 1 << 16)?;
    let mut weights = Weights::new(WeightSource::Headers, layers32);
    for tensor in first.tensors.iter().chain(more_parts.iter().flat_map(|part| part.tensors.iter())) {
        weights.add(Naming::Gguf, &tensor.name, tensor.dimensions.iter().filter(|&&d| d > 1).count(), tensor.bytes);
    }
    let tied_embeddings = !weights.output_head;
    Ok(Sizing::Sized(Box::new(ModelShape {
        architecture,
        layers: layers32,
        hidden_size,
        attention_heads: u32::try_from(attention_heads).unwrap_or(u32::MAX),
        kv_heads: u32::try_from(kv_heads).unwrap_or(u32::MAX),
        head_dim,
        v_head_dim,
        intermediate_size: keys.most(&arch("feed_forward_length"), 1 << 24)?.unwrap_or(0),
        vocab_size,
        dtype: file_type.map(file_type_name),
        max_context: keys.required(&arch("context_length"), 1 << 30)?,
        tied_embeddings,
        quantization: file_type.map(|t| Quantization {
            method: file_type_name(t),
            bits: None,
            group_size: None,
            block: None,
            kv_cache_dtype: None,
        }),
        moe,
        mla,
        sliding,
        weights: Some(weights),
    })))
}

/// Said of a GGUF whose model has latent attention (`kv_lora_rank`) but no `*_mla` widths: it was
/// converted before llama.cpp's MLA (#12801), and llama.cpp caches its full heads, not the latent.
pub fn legacy_mla(header: &GgufHeader) -> Option<String> {
    let keys = Keys(&header.keys);
    let architecture = keys.get("general.architecture")?.as_str()?;
    let key = |name: &str| keys.get(&format!("{architecture}.attention.{name}"));
    let rank = key("kv_lora_rank")?.count().filter(|&rank| rank > 0)?;
    if key("key_length_mla").is_some() && key("value_length_mla").is_some() {
        return None;
    }
    let heads = key("head_count_kv").and_then(Value::count).unwrap_or(0);
    let widths = (key("key_length").and_then(Value::count), key("value_length").and_then(Value::count));
    let (k, v) = (widths.0.unwrap_or(0), widths.1.unwrap_or(0));
    Some(format!(
        "this GGUF has latent attention (kv_lora_rank {rank}) but no attention.key_length_mla/value_length_mla: it \
         was converted before llama.cpp's MLA (#12801), and llama.cpp caches its {heads} full heads of {k} + {v} \
         values a token and layer instead of the latent; a GGUF converted by a newer convert_hf_to_gguf.py caches far \
         less"
    ))
}

/// `general.file_type` by llama.cpp's name for it (`LLAMA_FTYPE_*` in `include/llama.h`).
fn file_type_name(file_type: u64) -> String {
    const NAMES: [(u64, &str); 37] = [
        (0, "F32"),
        (1, "F16"),
        (2, "Q4_0"),
        (3, "Q4_1"),
        (7, "Q8_0"),
        (8, "Q5_0"),
        (9, "Q5_1"),
        (10, "Q2_K"),
        (11, "Q3_K_S"),
        (12, "Q3_K_M"),
        (13, "Q3_K_L"),
        (14, "Q4_K_S"),
        (15, "Q4_K_M"),
        (16, "Q5_K_S"),
        (17, "Q5_K_M"),
        (18, "Q6_K"),
        (19, "IQ2_XXS"),
        (20, "IQ2_XS"),
        (21, "Q2_K_S"),
        (22, "IQ3_XS"),
        (23, "IQ3_XXS"),
        (24, "IQ1_S"),
        (25, "IQ4_NL"),
        (26, "IQ3_S"),
        (27, "IQ3_M"),
        (28, "IQ2_S"),
        (29, "IQ2_M"),
        (30, "IQ4_XS"),
        (31, "IQ1_M"),
        (32, "BF16"),
        (36, "TQ1_0"),
        (37, "TQ2_0"),
        (38, "MXFP4_MOE"),
        (39, "NVFP4"),
        (40, "Q1_0"),
        (41, "Q2_0"),
        (1024, "guessed"),
    ];
    match NAMES.iter().find(|(id, _)| *id == file_type) {
        Some((_, name)) => format!("gguf {name}"),
        None => format!("gguf file type {file_type}"),
    }
}

/// llama.cpp's sliding layers: a per-layer pattern array, else every N-th layer global by the
/// architecture's rule, when the model has a window at all.
fn sliding(keys: &Keys, architecture: &str, layers: u32) -> Result<Option<SlidingWindow>, HeaderError> {
    let Some(window) = keys.count(&format!("{architecture}.attention.sliding_window"), 1 << 30)?.filter(|&w| w > 0)
    else {
        return Ok(None);
    };
    let pattern_key = format!("{architecture}.attention.sliding_window_pattern");
    let sliding: Vec<u32> = match keys.get(&pattern_key) {
        Some(Value::Array { items: Some(items), .. }) => (0..layers)
            .filter(|&l| {
                matches!(items.get(l as usize), Some(Value::Bool(true) | Value::Unsigned(1) | Value::Signed(1)))
            })
            .collect(),
        Some(value) => match value.count() {
            Some(n) if n > 0 => (0..layers).filter(|&l| u64::from(l) % n < n - 1).collect(),
            _ => Vec::new(),
        },
        None => match SWA_PATTERNS.iter().find(|(name, _)| *name == architecture) {
            Some((_, n)) => (0..layers).filter(|&l| u64::from(l) % n < n - 1).collect(),
            None => Vec::new(),
        },
    };
    Ok((!sliding.is_empty()).then_some(SlidingWindow { window, layers: sliding }))
}

struct Keys<'a>(&'a BTreeMap<String, Value>);

impl Keys<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    fn count(&self, key: &str, max: u64) -> Result<Option<u64>, HeaderError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(value) => match value.count() {
                Some(n) if n <= max => Ok(Some(n)),
                Some(n) => Err(HeaderError::too_large(format!("GGUF key {key}"), n, max)),
                None => Err(HeaderError::invalid(format!("GGUF key {key}"), "not a count")),
            },
        }
    }

    fn required(&self, key: &str, max: u64) -> Result<u64, HeaderError> {
        self.count(key, max)?.ok_or_else(|| HeaderError::invalid(format!("GGUF key {key}"), "missing"))
    }

    /// A count, or the largest of a per-layer array of them.
    fn most(&self, key: &str, max: u64) -> Result<Option<u64>, HeaderError> {
        match self.0.get(key) {
            Some(Value::Array { items: Some(items), .. }) => {
                let mut most = None;
                for item in items {
                    let Some(n) = item.count() else {
                        return Err(HeaderError::invalid(format!("GGUF key {key}"), "not a list of counts"));
                    };
                    if n > max {
                        return Err(HeaderError::too_large(format!("GGUF key {key}"), n, max));
                    }
                    most = most.max(Some(n));
                }
                Ok(most)
            }
            _ => self.count(key, max),
        }
    }
}

#[cfg(test)]
mod tests;
