//! The safetensors format's header, and the index of a sharded checkpoint, read as untrusted
//! input. A safetensors file starts with its header's length (8 bytes, little-endian), then that
//! many bytes of JSON: each tensor's `dtype`, `shape` and `data_offsets` into the data that
//! follows, and an optional `__metadata__` of strings. The checks are the safetensors crate's
//! (`safetensors/src/tensor.rs`, `Metadata::validate`): a length beyond 100 MB is refused before
//! anything is allocated, offsets tile the data from 0 without gap or overlap, each tensor's bytes
//! are its elements times its dtype's bits, and every product is checked.
//!
//! `model.safetensors.index.json` maps each tensor to its shard (`weight_map`) and says the
//! weights' total (`metadata.total_size`).

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

use super::{checked_product, HeaderError};

/// The longest header read: the safetensors crate's `MAX_HEADER_SIZE`.
pub const HEADER_LIMIT: u64 = 100_000_000;
/// The largest index read: DeepSeek-V3's, with 91k tensors, is under 10 MB.
pub const INDEX_LIMIT: u64 = 64 << 20;
/// More dimensions than any tensor has.
const MAX_DIMENSIONS: usize = 8;
/// More shards than any checkpoint has (DeepSeek-V3 has 163).
const MAX_SHARDS: usize = 10_000;
/// The longest tensor or shard name kept.
const MAX_NAME: usize = 1024;

/// One tensor of a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<u64>,
    pub bytes: u64,
}

/// A safetensors file's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SafetensorsHeader {
    pub tensors: Vec<Tensor>,
    /// Bytes of tensor data after the header.
    pub data_bytes: u64,
    /// The header's own bytes, its 8-byte length included: where the data starts.
    pub header_bytes: u64,
}

impl SafetensorsHeader {
    /// The whole file's size, as the header describes it.
    pub fn file_bytes(&self) -> u64 {
        self.header_bytes.saturating_add(self.data_bytes)
    }
}

/// The header's JSON length, from the file's first 8 bytes; refused beyond [`HEADER_LIMIT`].
pub fn header_length(first: &[u8]) -> Result<u64, HeaderError> {
    let Some(bytes) = first.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()) else {
        return Err(HeaderError::Truncated { what: "header length".into(), have: first.len() as u64, needed: 8 });
    };
    let length = u64::from_le_bytes(bytes);
    if length > HEADER_LIMIT {
        return Err(HeaderError::too_large("the safetensors header length", length, HEADER_LIMIT));
    }
    if length < 2 {
        return Err(HeaderError::invalid(
            "the safetensors header",
            format!("{length} bytes cannot hold a JSON object"),
        ));
    }
    Ok(length)
}

/// The header at the start of a safetensors file (`start` holds at least its first `8 + length`
/// bytes; fewer is [`HeaderError::Truncated`] with the bytes needed). The reader asks for the two
/// parts by range ([`header_length`], [`parse_json`]); this whole form is the tests' and fuzzer's.
#[cfg(test)]
pub fn parse(start: &[u8]) -> Result<SafetensorsHeader, HeaderError> {
    let length = header_length(start)?;
    let end = 8 + length;
    let Some(json) = start.get(8..end as usize) else {
        return Err(HeaderError::Truncated { what: "header".into(), have: start.len() as u64, needed: end });
    };
    parse_json(json, end)
}

/// The header's JSON (`header_bytes`: its length with the 8-byte prefix).
pub fn parse_json(json: &[u8], header_bytes: u64) -> Result<SafetensorsHeader, HeaderError> {
    if json.first() != Some(&b'{') {
        return Err(HeaderError::invalid("the safetensors header", "does not start with '{'"));
    }
    let entries: Entries = serde_json::from_slice(json)
        .map_err(|e| HeaderError::invalid("the safetensors header", format!("not its JSON: {e}")))?;
    let mut entries = entries.0;
    entries.sort_by_key(|(_, entry)| entry.data_offsets);
    let mut tensors = Vec::with_capacity(entries.len());
    let mut end = 0u64;
    for (name, entry) in entries {
        let [begin, stop] = entry.data_offsets;
        if begin != end || stop < begin {
            return Err(HeaderError::invalid(
                format!("tensor {name}"),
                format!("its data_offsets [{begin}, {stop}] do not follow the previous tensor's end {end}"),
            ));
        }
        let Some(bits) = dtype_bits(&entry.dtype) else {
            return Err(HeaderError::invalid(format!("tensor {name}"), format!("unknown dtype {:?}", entry.dtype)));
        };
        let elements = checked_product(&format!("tensor {name}"), entry.shape.iter().copied())?;
        let bits_total = checked_product(&format!("tensor {name}"), [elements, bits])?;
        if bits_total % 8 != 0 || bits_total / 8 != stop - begin {
            return Err(HeaderError::invalid(
                format!("tensor {name}"),
                format!(
                    "{} {:?} is {bits_total} bits, but its data_offsets span {} bytes",
                    entry.dtype,
                    entry.shape,
                    stop - begin
                ),
            ));
        }
        end = stop;
        tensors.push(Tensor { name, dtype: entry.dtype, shape: entry.shape, bytes: stop - begin });
    }
    Ok(SafetensorsHeader { tensors, data_bytes: end, header_bytes })
}

/// Bits per element of a safetensors dtype (the crate's `Dtype::bitsize`).
pub fn dtype_bits(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "F4" => 4,
        "F6_E2M3" | "F6_E3M2" => 6,
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" | "F8_E8M0" | "F8_E4M3FNUZ" | "F8_E5M2FNUZ" => 8,
        "I16" | "U16" | "F16" | "BF16" => 16,
        "I32" | "U32" | "F32" => 32,
        "I64" | "U64" | "F64" | "C64" => 64,
        _ => return None,
    })
}

/// One tensor's entry in the header.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    dtype: String,
    shape: Shape,
    data_offsets: [u64; 2],
}

/// A shape of at most [`MAX_DIMENSIONS`] non-negative dimensions.
struct Shape(Vec<u64>);

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Shape, D::Error> {
        struct Dimensions;
        impl<'de> Visitor<'de> for Dimensions {
            type Value = Shape;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a list of at most {MAX_DIMENSIONS} dimensions")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
                let mut dimensions = Vec::new();
                while let Some(dimension) = seq.next_element::<u64>()? {
                    if dimensions.len() == MAX_DIMENSIONS {
                        return Err(de::Error::custom(format!("more than {MAX_DIMENSIONS} dimensions")));
                    }
                    dimensions.push(dimension);
                }
                Ok(Shape(dimensions))
            }
        }
        deserializer.deserialize_seq(Dimensions)
    }
}

impl std::ops::Deref for Shape {
    type Target = Vec<u64>;
    fn deref(&self) -> &Vec<u64> {
        &self.0
    }
}

impl From<Shape> for Vec<u64> {
    fn from(shape: Shape) -> Vec<u64> {
        shape.0
    }
}

/// The header's tensors in file order, `__metadata__` skipped; a name twice is refused.
struct Entries(Vec<(String, Parsed)>);

/// An entry with its shape taken out of the wrapper.
struct Parsed {
    dtype: String,
    shape: Vec<u64>,
    data_offsets: [u64; 2],
}

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Entries, D::Error> {
        struct Tensors;
        impl<'de> Visitor<'de> for Tensors {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of tensor names to their dtype, shape and data_offsets")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                let mut names = BTreeSet::new();
                while let Some(name) = map.next_key::<String>()? {
                    if name == "__metadata__" {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    }
                    if name.len() > MAX_NAME {
                        return Err(de::Error::custom(format!("a tensor name of {} bytes", name.len())));
                    }
                    if !names.insert(name.clone()) {
                        return Err(de::Error::custom(format!("tensor {name} appears twice")));
                    }
                    let entry: Entry = map.next_value()?;
                    let parsed =
                        Parsed { dtype: entry.dtype, shape: entry.shape.into(), data_offsets: entry.data_offsets };
                    entries.push((name, parsed));
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(Tensors)
    }
}

/// A sharded checkpoint's index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    /// `metadata.total_size`: every tensor's bytes, when the index says.
    pub total_size: Option<u64>,
    /// The shards, each once, in name order.
    pub shards: Vec<String>,
    /// Tensors the index maps.
    pub tensors: u64,
}

/// `model.safetensors.index.json`, its shard names checked to be plain relative paths.
pub fn parse_index(bytes: &[u8]) -> Result<Index, HeaderError> {
    const WHAT: &str = "model.safetensors.index.json";
    if bytes.len() as u64 > INDEX_LIMIT {
        return Err(HeaderError::too_large(WHAT, bytes.len() as u64, INDEX_LIMIT));
    }
    #[derive(Deserialize)]
    struct RawIndex {
        #[serde(default)]
        metadata: Option<Metadata>,
        weight_map: std::collections::BTreeMap<String, String>,
    }
    #[derive(Deserialize)]
    struct Metadata {
        #[serde(default)]
        total_size: Option<serde_json::Value>,
    }
    let raw: RawIndex =
        serde_json::from_slice(bytes).map_err(|e| HeaderError::invalid(WHAT, format!("not an index: {e}")))?;
    let total_size = match raw.metadata.and_then(|m| m.total_size) {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Number(n)) => match n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19).map(|f| f as u64))
        {
            Some(total) => Some(total),
            None => return Err(HeaderError::invalid(WHAT, format!("metadata.total_size {n} is not a byte count"))),
        },
        Some(other) => {
            return Err(HeaderError::invalid(WHAT, format!("metadata.total_size {other} is not a byte count")))
        }
    };
    let mut shards = BTreeSet::new();
    for shard in raw.weight_map.values() {
        if !is_plain_path(shard) || !shard.ends_with(".safetensors") {
            return Err(HeaderError::invalid(WHAT, format!("shard {shard:?} is not a .safetensors file in the model")));
        }
        if shards.insert(shard.clone()) && shards.len() > MAX_SHARDS {
            return Err(HeaderError::too_large(format!("{WHAT} shards"), shards.len() as u64, MAX_SHARDS as u64));
        }
    }
    if shards.is_empty() {
        return Err(HeaderError::invalid(WHAT, "its weight_map is empty"));
    }
    Ok(Index { total_size, shards: shards.into_iter().collect(), tensors: raw.weight_map.len() as u64 })
}

/// A relative path inside the model: no `..`, no leading `/`, no empty or control characters.
pub fn is_plain_path(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= MAX_NAME
        && !path.starts_with('/')
        && !path.contains('\\')
        && !path.chars().any(char::is_control)
        && path.split('/').all(|part| !part.is_empty() && part != "." && part != "..")
}

#[cfg(test)]
mod tests;
