//! vLLM's rules for splitting a model, as its source checks them, and the plan they give:
//! - tensor parallelism: the attention heads divisible by TP (`ModelConfig.verify_with_parallel_config`:
//!   "Total number of attention heads (64) must be divisible by tensor parallel size (3)"); the
//!   KV heads divisible by TP, or TP a multiple of them, each rank then keeping one replicated
//!   (`QKVParallelLinear`: `divide(tp_size, total_num_kv_heads)`); the MLP's and the experts'
//!   widths divisible (`divide` in the merged column-parallel layers; MXFP4's are padded); a
//!   GPTQ/AWQ group or an FP8 block dividing each rank's share of a width (the quantized linear
//!   layers' "not aligned with the quantized weight shape" and `validate_fp8_block_shape`);
//! - pipeline parallelism: the layers split as `get_pp_indices` splits them (the remainder to the
//!   stages before the last), never more stages than layers;
//! - expert parallelism (`--enable-expert-parallel`, data parallel attention): whole experts dealt
//!   over DP × TP ranks (`determine_expert_map`), so at least one expert a rank;
//! - the cache: `--kv-cache-dtype auto` is the model's dtype; a sliding layer keeps its window plus
//!   a batch (`SlidingWindowSpec.max_memory_usage_bytes`); every worker gets the same cache size.

use std::ops::Range;

use super::{
    choose, choose_asked, outcome, refusal, Broken, CacheRules, ExpertCut, KvBudget, KvCacheDtype, Layout, NodeMemory,
    Outcome, Placement, Plan, Rule,
};
use crate::error::{Error, Result};
use crate::model::shape::weights::Weights;
use crate::model::shape::ModelShape;
use crate::spec::Transport;

/// Kept free on every node beside weights and cache: activations of a batch, HIP graphs, RCCL
/// buffers (vLLM measures them at start; this is the plan's allowance).
pub const DEFAULT_RUNTIME_GIB: u64 = 2;
/// `--max-num-batched-tokens`' default for `vllm serve` (`engine/arg_utils.py`): a sliding layer
/// keeps this many tokens beyond its window.
pub const MAX_NUM_BATCHED_TOKENS: u64 = 8192;
/// `--block-size`' default: the cache is allocated in blocks of 16 tokens.
pub const BLOCK_SIZE: u64 = 16;
/// The shortest context a layout must leave for a request: fewer is no service.
pub const MIN_CONTEXT: u64 = 4096;

/// What vLLM will do with the memory, as the plan assumes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VllmRules {
    pub kv_cache_dtype: KvCacheDtype,
    pub runtime_bytes: u64,
    pub max_num_batched_tokens: u64,
    pub block_size: u64,
    pub min_context: u64,
    /// `--max-model-len` as asked: every layout must hold it, and none takes more.
    pub asked_context: Option<u64>,
    /// `--tp`/`--pp` as asked: that layout or none.
    pub asked_layout: Option<(u32, u32)>,
}

impl VllmRules {
    /// The defaults, the cache's dtype as `--kv-cache-dtype` (`asked`) makes it for this model.
    pub fn new(shape: &ModelShape, asked_kv_cache_dtype: Option<&str>) -> Result<VllmRules> {
        Ok(VllmRules {
            kv_cache_dtype: kv_cache_dtype(shape, asked_kv_cache_dtype)?,
            runtime_bytes: DEFAULT_RUNTIME_GIB << 30,
            max_num_batched_tokens: MAX_NUM_BATCHED_TOKENS,
            block_size: BLOCK_SIZE,
            min_context: MIN_CONTEXT,
            asked_context: None,
            asked_layout: None,
        })
    }
}

/// The cache's dtype: `--kv-cache-dtype` when given, else vLLM's `auto`, the model's own dtype
/// (a config without one is read as float32, which vLLM serves in bfloat16).
pub fn kv_cache_dtype(shape: &ModelShape, asked: Option<&str>) -> Result<KvCacheDtype> {
    match asked.filter(|name| *name != "auto") {
        Some(name) => KvCacheDtype::named(name, format!("--kv-cache-dtype {name}")).ok_or_else(|| {
            Error::Usage(format!(
                "--kv-cache-dtype {name}: not a cache dtype this plan knows. Fix: auto, bfloat16, float16, fp8, \
                 fp8_e4m3 or fp8_e5m2"
            ))
        }),
        None => {
            let (name, why) = match shape.dtype.as_deref() {
                Some("float16") => ("float16", "vLLM's --kv-cache-dtype auto: the model's dtype, float16".to_string()),
                Some("bfloat16") => {
                    ("bfloat16", "vLLM's --kv-cache-dtype auto: the model's dtype, bfloat16".to_string())
                }
                Some(other) => (
                    "bfloat16",
                    format!("vLLM's --kv-cache-dtype auto: the model's dtype {other} is served in bfloat16"),
                ),
                None => (
                    "bfloat16",
                    "vLLM's --kv-cache-dtype auto: the config names no dtype, read as float32 and served in bfloat16"
                        .to_string(),
                ),
            };
            let mut dtype = KvCacheDtype::named(name, why).unwrap_or_else(|| KvCacheDtype {
                name: name.into(),
                block_elements: 1,
                block_bytes: 2,
                why: String::new(),
            });
            if let Some(calibrated) = shape.quantization.as_ref().and_then(|q| q.kv_cache_dtype.as_deref()) {
                dtype.why.push_str(&format!(
                    "; the checkpoint has {calibrated} cache scales: --kv-cache-dtype {calibrated} would shrink the cache"
                ));
            }
            Ok(dtype)
        }
    }
}

/// Every layout of `nodes` GPUs (one a node): TP × PP, and for a MoE model expert parallelism
/// over data-parallel attention (DP = the nodes, a rank each) or over tensor-parallel attention
/// (TP = the nodes). A DP rank of several TP ranks would span nodes, which vLLM's data-parallel
/// deployment across nodes does not do with one GPU a node. (tp, pp, dp, expert_parallel).
pub fn layouts(nodes: u32, moe: bool) -> Vec<(u32, u32, u32, bool)> {
    let divisors: Vec<u32> = (1..=nodes.max(1)).filter(|d| nodes.is_multiple_of(*d)).collect();
    let mut all: Vec<(u32, u32, u32, bool)> = divisors.iter().map(|&tp| (tp, nodes / tp, 1, false)).collect();
    if moe && nodes > 1 {
        all.extend([(1, 1, nodes, true), (nodes, 1, 1, true)]);
    }
    all
}

/// The rules tensor parallel `tp` breaks for this model (none for TP 1).
pub fn tensor_parallel_rules(shape: &ModelShape, tp: u32, expert_parallel: bool) -> Vec<Broken> {
    let mut broken = Vec::new();
    if tp <= 1 {
        return broken;
    }
    let t = u64::from(tp);
    let heads = u64::from(shape.attention_heads);
    if heads % t != 0 {
        broken.push(Broken {
            rule: Rule::AttentionHeads,
            message: format!(
                "its {heads} attention heads are not divisible by tensor parallel {tp} (vLLM: \"Total number of \
                 attention heads ({heads}) must be divisible by tensor parallel size ({tp})\")"
            ),
        });
    }
    let kv = u64::from(shape.kv_heads);
    if shape.mla.is_none() {
        if t >= kv && t % kv != 0 {
            broken.push(Broken {
                rule: Rule::KvHeads,
                message: format!(
                    "tensor parallel {tp} is not a multiple of its {kv} KV heads, which vLLM replicates when there \
                     are fewer of them than ranks"
                ),
            });
        } else if t < kv && kv % t != 0 {
            broken.push(Broken {
                rule: Rule::KvHeads,
                message: format!("its {kv} KV heads are not divisible by tensor parallel {tp}"),
            });
        }
    }
    let mxfp4 = shape.quantization.as_ref().is_some_and(|q| q.method == "mxfp4");
    let dense = shape.moe.as_ref().is_none_or(|moe| !moe.dense_layers.is_empty());
    let mut widths: Vec<(&str, u64)> = Vec::new();
    if dense && shape.intermediate_size > 0 {
        widths.push(("MLP width", shape.intermediate_size));
    }
    if let Some(moe) = &shape.moe {
        if !expert_parallel && !mxfp4 {
            widths.push(("expert width", moe.expert_width));
        }
        if moe.shared_width > 0 {
            widths.push(("shared experts' width", moe.shared_width));
        }
    }
    for (what, width) in &widths {
        if width % t != 0 {
            broken.push(Broken {
                rule: Rule::Width,
                message: format!("its {what} {width} is not divisible by tensor parallel {tp}"),
            });
        }
    }
    // A quantization group (GPTQ, AWQ, compressed-tensors) along each rank's share of an input, an
    // FP8 block along each rank's share of an output and of an input.
    let quantization = shape.quantization.as_ref();
    let group = quantization.and_then(|q| q.group_size).filter(|&g| g > 1);
    let block = quantization.and_then(|q| q.block);
    let attention_input = heads.saturating_mul(shape.v_head_dim);
    let mut shares: Vec<(&str, u64)> =
        widths.iter().filter(|(_, w)| w % t == 0).map(|(what, w)| (*what, w / t)).collect();
    if heads % t == 0 {
        shares.push(("attention output's input", attention_input / t));
    }
    for (what, share) in shares {
        let mut limits: Vec<(&str, u64)> = Vec::new();
        if let Some(group) = group {
            limits.push(("quantization group", group));
        }
        if let Some([n, k]) = block {
            limits.push(("FP8 block", n.max(k)));
            if n != k {
                limits.push(("FP8 block", n.min(k)));
            }
        }
        for (kind, size) in limits {
            if share % size != 0 {
                broken.push(Broken {
                    rule: Rule::QuantizationGroup,
                    message: format!(
                        "each rank's share of its {what} ({share} at tensor parallel {tp}) is not a multiple of its \
                         {kind} of {size}"
                    ),
                });
                break;
            }
        }
    }
    broken
}

/// The layers of each pipeline stage, as vLLM's `get_pp_indices` splits them: equal shares, the
/// remainder one each to the stages before the last, from the second to last backwards.
pub fn pipeline_stages(layers: u32, pp: u32) -> Vec<Range<u32>> {
    let pp = pp.max(1);
    let mut sizes = vec![layers / pp; pp as usize];
    let remainder = (layers % pp) as usize;
    for i in 2..remainder + 2 {
        if let Some(size) = sizes.len().checked_sub(i).and_then(|at| sizes.get_mut(at)) {
            *size += 1;
        }
    }
    let mut start = 0;
    sizes
        .into_iter()
        .map(|size| {
            let stage = start..start + size;
            start += size;
            stage
        })
        .collect()
}

/// Tokens a sliding layer's cache holds at most: its window and a batch in flight, in blocks
/// (`SlidingWindowSpec.max_memory_usage_bytes`: `cdiv(window - 1 + max_num_batched_tokens,
/// block_size) + 1` blocks).
pub fn window_tokens(shape: &ModelShape, rules: &VllmRules) -> u64 {
    let Some(sliding) = &shape.sliding else { return 0 };
    let block = rules.block_size.max(1);
    let blocks = (sliding.window.saturating_sub(1).saturating_add(rules.max_num_batched_tokens)).div_ceil(block) + 1;
    blocks.saturating_mul(block)
}

/// Every layout of `nodes` for `shape` under vLLM, the one chosen on `transport`, and whether
/// fewer nodes would do.
pub fn plan(shape: &ModelShape, nodes: &[NodeMemory], transport: &Transport, rules: &VllmRules) -> Plan {
    let mut plan = plan_on(shape, nodes, transport, rules);
    if plan.chosen.is_some() && nodes.len() > 1 && rules.asked_layout.is_none() {
        for fewer in 1..nodes.len() {
            let smaller = plan_on(shape, nodes.get(..fewer).unwrap_or_default(), transport, rules);
            if let Some(layout) = smaller.chosen_layout() {
                let context = layout.fits().map_or(0, |f| f.context_tokens);
                plan.fewer_nodes = Some(format!(
                    "the model fits on {fewer} of the {} nodes ({}, a context of {context} tokens): one node is \
                     usually fastest for a model that fits it",
                    nodes.len(),
                    layout.label()
                ));
                break;
            }
        }
    }
    plan
}

fn plan_on(shape: &ModelShape, nodes: &[NodeMemory], transport: &Transport, rules: &VllmRules) -> Plan {
    let mut notes = Vec::new();
    let weights = match &shape.weights {
        Some(weights) => weights.clone(),
        None => {
            notes.push("no weights were read: their bytes are estimated from the config".to_string());
            Weights::estimated(shape)
        }
    };
    let count = u32::try_from(nodes.len()).unwrap_or(u32::MAX);
    let window = window_tokens(shape, rules);
    if window > 0 {
        notes.push(format!(
            "sliding-window layers keep {window} tokens: the window and a batch of {} (vLLM's default \
             --max-num-batched-tokens)",
            rules.max_num_batched_tokens
        ));
    }
    let cache = CacheRules {
        dtype: &rules.kv_cache_dtype,
        window_tokens: window,
        runtime_bytes: rules.runtime_bytes,
        min_context: rules.min_context,
        asked_context: rules.asked_context,
        budget: KvBudget::Uniform,
    };
    if let Some(asked) = rules.asked_context.filter(|&asked| asked > shape.max_context) {
        notes.push(format!(
            "--max-model-len {asked} is more than the model's own {}: the plan takes the model's (vLLM refuses a \
             longer one)",
            shape.max_context
        ));
    }
    let layouts: Vec<Layout> = layouts(count, shape.moe.is_some())
        .into_iter()
        .map(|(tp, pp, dp, expert_parallel)| {
            let mut broken = tensor_parallel_rules(shape, tp, expert_parallel);
            if pp > shape.layers {
                broken.push(Broken {
                    rule: Rule::Layers,
                    message: format!("pipeline parallel {pp} needs more stages than its {} layers", shape.layers),
                });
            }
            let experts = shape.moe.as_ref().map_or(0, |moe| moe.experts);
            if expert_parallel && experts < dp * tp {
                broken.push(Broken {
                    rule: Rule::Experts,
                    message: format!("its {experts} experts are fewer than the {} expert-parallel ranks", dp * tp),
                });
            }
            let outcome = if broken.is_empty() {
                let mut outcome =
                    outcome(shape, &weights, nodes, &placements(shape, tp, pp, dp, expert_parallel), &cache);
                whole_blocks(&mut outcome, rules.block_size, window);
                outcome
            } else {
                Outcome::Breaks { rules: broken, needs_bytes: None }
            };
            Layout { tp, pp, dp, expert_parallel, outcome }
        })
        .collect();
    let (chosen, refusal) = match rules.asked_layout {
        Some((tp, pp)) => match choose_asked(&layouts, nodes, tp, pp) {
            Ok(chosen) => (Some(chosen), None),
            Err(refused) => (None, Some(refused)),
        },
        None => {
            let chosen = choose(&layouts, transport, nodes.len());
            let refusal = chosen.is_none().then(|| refusal(&layouts, nodes, cache.needed(shape)));
            (chosen, refusal)
        }
    };
    let engine_args = chosen.as_ref().and_then(|c| layouts.get(c.layout)).map(launch_args).unwrap_or_default();
    Plan {
        engine: "vllm".into(),
        architecture: shape.architecture.clone(),
        nodes: nodes.to_vec(),
        kv_cache_dtype: rules.kv_cache_dtype.clone(),
        runtime_bytes: rules.runtime_bytes,
        runtime_why: "the plan's allowance for activations, HIP graphs and RCCL buffers (vLLM profiles them at start)"
            .into(),
        layouts,
        chosen,
        fewer_nodes: None,
        refusal,
        notes,
        engine_args,
    }
}

/// A context the memory set, down to whole cache blocks: vLLM checks that the cache holds
/// `--max-model-len` in blocks of `block_size` tokens, so a part block would fail its start.
fn whole_blocks(outcome: &mut Outcome, block_size: u64, window: u64) {
    let Outcome::Fits(figures) = outcome else { return };
    let whole = figures.context_tokens / block_size.max(1) * block_size.max(1);
    if whole > 0 && whole < figures.context_tokens {
        figures.context_tokens = whole;
        for node in &mut figures.nodes {
            node.kv_cache_bytes = node.kv_per_token.bytes_at(whole, window);
        }
    }
}

/// What each node holds: ranks in vLLM's order (rank = stage × TP + TP rank), one a node.
fn placements(shape: &ModelShape, tp: u32, pp: u32, dp: u32, expert_parallel: bool) -> Vec<Placement> {
    if expert_parallel {
        return (0..dp * tp)
            .map(|rank| Placement {
                stage: 0,
                rank,
                layers: 0..shape.layers,
                tp,
                experts: ExpertCut::Whole { ranks: dp * tp },
                embedding: true,
                output: true,
                tied_output: false,
            })
            .collect();
    }
    let stages = pipeline_stages(shape.layers, pp);
    let mut all = Vec::new();
    for (stage, layers) in (0u32..).zip(stages) {
        for rank in 0..tp {
            let last = stage + 1 == pp;
            all.push(Placement {
                stage,
                rank,
                layers: layers.clone(),
                tp,
                experts: ExpertCut::Width(tp),
                embedding: stage == 0,
                output: last,
                tied_output: last && stage > 0 && shape.tied_embeddings,
            });
        }
    }
    all
}

/// vLLM's flags for a layout that fits: the sizes, `--max-model-len` the context that fits, and
/// `--kv-cache-memory-bytes` the cache it needs on the fullest node (one figure for every worker).
pub fn launch_args(layout: &Layout) -> Vec<String> {
    let Some(figures) = layout.fits() else { return Vec::new() };
    let mut args = vec![
        "--tensor-parallel-size".to_string(),
        layout.tp.to_string(),
        "--pipeline-parallel-size".to_string(),
        layout.pp.to_string(),
    ];
    if layout.expert_parallel {
        args.extend([
            "--data-parallel-size".to_string(),
            layout.dp.to_string(),
            "--enable-expert-parallel".to_string(),
        ]);
    }
    args.extend([
        "--max-model-len".to_string(),
        figures.context_tokens.to_string(),
        "--kv-cache-memory-bytes".to_string(),
        figures.kv_cache_bytes().to_string(),
    ]);
    args
}

#[cfg(test)]
mod tests;
