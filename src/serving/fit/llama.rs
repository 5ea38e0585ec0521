//! llama.cpp's rules for splitting a model over devices (the head's GPU and each RPC server's),
//! as `llama_model::load_tensors` splits it (`src/llama-model.cpp`): the repeating layers and the
//! output layer (n_layer + 1 slots) go to the devices by the cumulative `--tensor-split`
//! fractions, layer `il` to the first device whose split point passes `il / (n_layer + 1)`; the
//! input layer (the token embedding) always stays on the CPU; RPC servers come first in the
//! device list (`llama.cpp`: "add RPC servers at the front of the list"). Each layer's KV cache
//! lives on its layer's device (`-ctk`/`-ctv`, f16 by default): `-c` cells for every slot
//! together (llama-server's unified cache), padded to 256; a sliding-window layer keeps
//! `n_swa × slots + n_ubatch` cells, padded to 256 (`llama_kv_cache_iswa`). An MLA model's cell is
//! its latent (K) alone since the V-less cache (#19067), K and V before (`llama_build`). Every
//! device is named (`--device`) when the build's names are known: then no build's default device
//! selection can drop one (`llama_build`).

use super::{outcome, CacheRules, ExpertCut, Fit, KvCacheDtype, Layout, NodeMemory, Placement};
use crate::model::shape::weights::Weights;
use crate::model::shape::ModelShape;

/// Kept free on every device beside weights and cache: llama.cpp's compute buffers (logits of a
/// micro-batch over the vocabulary, the graph), the plan's allowance.
pub const DEFAULT_RUNTIME_GIB: u64 = 1;
/// llama-server's slots when `--parallel` is not given (its "auto": 4).
pub const DEFAULT_PARALLEL: u64 = 4;
/// `--ubatch-size`' default.
pub const UBATCH: u64 = 512;
/// The shortest context a split must leave.
pub const MIN_CONTEXT: u64 = 4096;
/// llama.cpp pads the context (and a sliding cache) to this many cells.
const PAD: u64 = 256;

/// What llama.cpp will do with the memory, as the plan assumes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlamaRules {
    pub kv_cache_dtype: KvCacheDtype,
    pub runtime_bytes: u64,
    pub parallel: u64,
    pub ubatch: u64,
    pub min_context: u64,
    /// `-c` as asked: every split must hold it (padded as llama.cpp pads it).
    pub asked_context: Option<u64>,
    /// An MLA model's cache holds V beside its latent (a build before #19067), and why the plan
    /// takes it so; None: the latent alone.
    pub mla_stores_v: Option<String>,
    /// Every device's name in llama.cpp's order (`--device`); None: llama.cpp's own order.
    pub device_names: Option<Vec<String>>,
}

impl Default for LlamaRules {
    fn default() -> LlamaRules {
        LlamaRules {
            kv_cache_dtype: KvCacheDtype {
                name: "f16".into(),
                block_elements: 1,
                block_bytes: 2,
                why: "llama.cpp's default cache type (-ctk f16 -ctv f16)".into(),
            },
            runtime_bytes: DEFAULT_RUNTIME_GIB << 30,
            parallel: DEFAULT_PARALLEL,
            ubatch: UBATCH,
            min_context: MIN_CONTEXT,
            asked_context: None,
            mla_stores_v: None,
            device_names: None,
        }
    }
}

/// `--tensor-split` for `devices` in llama.cpp's order: each device's share in MiB of what it can
/// give the model (usable memory less the runtime's share, less the token embedding on the head's).
pub fn tensor_split(devices: &[NodeMemory], head: Option<usize>, embedding_bytes: u64, runtime_bytes: u64) -> Vec<u64> {
    devices
        .iter()
        .enumerate()
        .map(|(index, device)| {
            let mut room = device.usable_bytes.saturating_sub(runtime_bytes);
            if Some(index) == head {
                room = room.saturating_sub(embedding_bytes);
            }
            room >> 20
        })
        .collect()
}

/// `--tensor-split`'s argument: `113000,57000,30000`.
pub fn tensor_split_arg(split: &[u64]) -> String {
    split.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

/// The device of each of the `layers` repeating layers and of the output layer (the last entry),
/// as llama.cpp assigns them with all layers offloaded (`-ngl` past the layers).
pub fn layer_devices(layers: u32, split: &[u64]) -> Vec<usize> {
    let total: u128 = split.iter().map(|&s| u128::from(s)).sum();
    let slots = u128::from(layers) + 1;
    (0..=layers)
        .map(|layer| {
            if total == 0 {
                return 0;
            }
            // upper_bound(splits, il / slots): the first device whose cumulative fraction exceeds it,
            // compared exactly as cumulative × slots > il × total.
            let mut cumulative = 0u128;
            let position = u128::from(layer) * total;
            for (device, share) in split.iter().enumerate() {
                cumulative += u128::from(*share);
                if cumulative * slots > position {
                    return device;
                }
            }
            split.len().saturating_sub(1)
        })
        .collect()
}

/// Cells a sliding-window layer keeps: `n_swa × slots + n_ubatch`, padded to 256.
pub fn window_tokens(shape: &ModelShape, rules: &LlamaRules) -> u64 {
    let Some(sliding) = &shape.sliding else { return 0 };
    sliding.window.saturating_mul(rules.parallel.max(1)).saturating_add(rules.ubatch).div_ceil(PAD) * PAD
}

/// What each of `devices` devices holds under `split`: its layers as llama.cpp assigns them, the
/// output layer on its device (with the tied embedding's copy), the embedding on the head's (None:
/// the head's server has no GPU of its own, and the embedding is on no device).
pub fn placements(shape: &ModelShape, devices: usize, head: Option<usize>, split: &[u64]) -> Vec<Placement> {
    let assignment = layer_devices(shape.layers, split);
    let output_device = assignment.last().copied().unwrap_or(0);
    (0..devices)
        .map(|device| {
            let mine: Vec<u32> = (0..shape.layers).filter(|&l| assignment.get(l as usize) == Some(&device)).collect();
            let layers = match (mine.first(), mine.last()) {
                (Some(&first), Some(&last)) => first..last + 1,
                _ => 0..0,
            };
            Placement {
                stage: u32::try_from(device).unwrap_or(u32::MAX),
                rank: 0,
                layers,
                tp: 1,
                experts: ExpertCut::Width(1),
                embedding: Some(device) == head,
                output: device == output_device,
                tied_output: device == output_device && shape.tied_embeddings,
                // What a GGUF holds beside the layers goes with the embedding (a vision tower
                // is a GGUF of its own, --mmproj).
                beside_layers: Some(device) == head,
            }
        })
        .collect()
}

/// The split of `shape` over `devices` (in llama.cpp's order; `head` is the device on the head
/// node, whose host keeps the token embedding; None when the head's server has no GPU of its
/// own): one layout, the layers by each device's memory.
pub fn fit(shape: &ModelShape, devices: &[NodeMemory], head: Option<usize>, rules: &LlamaRules) -> Fit {
    let mut notes = vec![match head {
        Some(_) => "the token embedding stays in the head's host memory (llama.cpp keeps the input layer on the \
                    CPU), counted on the head's device"
            .to_string(),
        None => "the head's llama-server has no GPU of its own: the layers go to the workers' devices alone, and \
                 the token embedding stays in the head's host memory (llama.cpp keeps the input layer on the CPU)"
            .to_string(),
    }];
    if let (Some(_), Some(why)) = (&shape.mla, &rules.mla_stores_v) {
        notes.push(format!("{why}: K {} and V {} values a token and layer", shape.head_dim, shape.v_head_dim));
    }
    let cached = as_cached(shape, rules);
    let shape = &cached;
    let weights = match &shape.weights {
        Some(weights) => weights.clone(),
        None => {
            notes.push("no weights were read: their bytes are estimated from the config".to_string());
            Weights::estimated(shape)
        }
    };
    let split = tensor_split(devices, head, weights.embedding_bytes, rules.runtime_bytes);
    let placements = placements(shape, devices.len(), head, &split);
    let window = window_tokens(shape, rules);
    let cache = CacheRules {
        dtype: &rules.kv_cache_dtype,
        window_tokens: window,
        runtime_bytes: rules.runtime_bytes,
        min_context: rules.min_context,
        // llama.cpp pads -c up to whole 256 cells: the cache is that many.
        asked_context: rules.asked_context.map(|asked| asked.div_ceil(PAD).saturating_mul(PAD)),
    };
    let mut outcome = outcome(shape, &weights, devices, &placements, &cache);
    if let super::LayoutOutcome::Fits(figures) = &mut outcome {
        // -c is padded up to 256 cells: ask for a multiple of 256 that fits.
        let padded = figures.context_tokens / PAD * PAD;
        if padded > 0 && padded < figures.context_tokens {
            figures.context_tokens = padded;
            for node in &mut figures.nodes {
                node.kv_cache_bytes = node.kv_per_token.bytes_at(padded, window);
            }
        }
    }
    let count = u32::try_from(devices.len()).unwrap_or(u32::MAX);
    let layout = Layout { tp: 1, pp: count, dp: 1, expert_parallel: false, outcome };
    let fits = layout.fits().is_some();
    let mut engine_args = Vec::new();
    if let Some(figures) = layout.fits() {
        if let Some(names) = rules.device_names.as_ref().filter(|names| names.len() == devices.len() && names.len() > 1)
        {
            engine_args.extend(["--device".to_string(), names.join(",")]);
        }
        if devices.len() > 1 {
            engine_args.extend(["--tensor-split".to_string(), tensor_split_arg(&split)]);
        }
        engine_args.extend(["-c".to_string(), figures.context_tokens.to_string()]);
    }
    let layouts = vec![layout];
    let refusal = (!fits).then(|| super::refusal(&layouts, devices, cache.needed(shape)));
    Fit {
        engine: "llama.cpp".into(),
        architecture: shape.architecture.clone(),
        nodes: devices.to_vec(),
        kv_cache_dtype: rules.kv_cache_dtype.clone(),
        runtime_bytes: rules.runtime_bytes,
        runtime_why: "the plan's allowance for llama.cpp's compute buffers (the logits of a micro-batch, the graph)"
            .into(),
        chosen: fits.then(|| super::Chosen {
            layout: 0,
            why: format!(
                "llama.cpp splits the layers over the {} device(s) by their memory (--tensor-split {})",
                devices.len(),
                tensor_split_arg(&split)
            ),
        }),
        layouts,
        fewer_nodes: None,
        refusal,
        notes,
        engine_args,
    }
}

/// `shape` as the build caches it: a build that keeps an MLA model's V as well caches each layer
/// as the GGUF's one head of `key_length` K and `value_length` V (576 and 512 for DeepSeek-V3),
/// which is what the plan sizes once the latent is set aside.
fn as_cached(shape: &ModelShape, rules: &LlamaRules) -> ModelShape {
    match (&shape.mla, &rules.mla_stores_v) {
        (Some(_), Some(_)) => ModelShape { mla: None, ..shape.clone() },
        _ => shape.clone(),
    }
}

#[cfg(test)]
mod tests;
