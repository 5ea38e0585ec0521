//! vLLM's rules for splitting a model, as its source checks them, and the plan they give:
//! - tensor parallelism: the attention heads divisible by TP (`ModelConfig.verify_with_parallel_config`:
//!   "Total number of attention heads (64) must be divisible by tensor parallel size (3)"); the
//!   KV heads divisible by TP, or TP a multiple of them, each rank then keeping one replicated
//!   (`QKVParallelLinear`: `divide(tp_size, total_num_kv_heads)`); the MLP's and the experts'
//!   widths divisible (`divide` in the merged column-parallel layers; MXFP4's are padded); a
//!   GPTQ/AWQ group or an FP8 block dividing each rank's share of a width (the quantized linear
//!   layers' "not aligned with the quantized weight shape" and `validate_fp8_block_shape`);
//! - pipeline parallelism: the layers split as `get_pp_indices` splits them (the remainder to the
//!   stages before the last, or `VLLM_PP_LAYER_PARTITION`), never more stages than layers; what
//!   is loaded beside the layers (a vision tower) on every stage, as vLLM builds it there;
//! - expert parallelism (`--enable-expert-parallel`, data parallel attention): whole experts dealt
//!   over DP × TP ranks (`determine_expert_map`), so at least one expert a rank;
//! - the cache ([`super::vllm_cache`]): `--kv-cache-dtype auto` is the model's dtype; every rank
//!   gets the same `--kv-cache-memory-bytes`, all the tightest node can give after its weights and
//!   the runtime allowance, in whole blocks of the image's vLLM ([`super::vllm_build`]); the
//!   context is the longest that leaves one request beside vLLM's null block;
//! - `--gpu-memory-utilization`: with `--kv-cache-memory-bytes` it only sets vLLM's start check
//!   (`request_memory` in `v1/worker/utils.py`: the free memory at start at least the total ×
//!   the fraction), so it is the share of the GPU's memory the service takes, which another
//!   service on the node leaves free.

use std::borrow::Cow;
use std::ops::Range;

use super::vllm_build::VllmBuild;
use super::vllm_cache::{self, VllmCache};
use super::{
    choose, choose_asked, refusal, Broken, CacheRules, ExpertCut, Fit, KvCacheDtype, Layout, LayoutFigures,
    LayoutOutcome, NodeMemory, Placement, Rule,
};
use crate::error::{Error, Result};
use crate::model::shape::weights::Weights;
use crate::model::shape::ModelShape;
use crate::spec::Transport;

/// Kept free on every node beside weights and cache: activations of a batch, HIP graphs, RCCL
/// buffers (vLLM measures them at start; this is the plan's allowance).
pub const DEFAULT_RUNTIME_GIB: u64 = 2;
/// The shortest context a layout must leave for a request: fewer is no service.
pub const MIN_CONTEXT: u64 = 4096;

/// What vLLM will do with the memory, as the plan assumes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VllmRules {
    /// The image's vLLM, whose rules size the cache.
    pub build: VllmBuild,
    pub kv_cache_dtype: KvCacheDtype,
    pub runtime_bytes: u64,
    pub min_context: u64,
    /// `--max-model-len` as asked: every layout must hold it, and none takes more.
    pub asked_context: Option<u64>,
    /// `--tp`/`--pp` as asked: that layout or none.
    pub asked_layout: Option<(u32, u32)>,
    /// `--max-num-batched-tokens` as asked (None: vLLM's default for the layout).
    pub max_num_batched_tokens: Option<u64>,
    /// `VLLM_PP_LAYER_PARTITION`: each pipeline stage's layers.
    pub pp_layer_partition: Option<Vec<u32>>,
    /// `VLLM_MLA_DISABLE=1`: latent attention served as plain attention.
    pub mla_disabled: bool,
}

impl VllmRules {
    /// The defaults of `build`, the cache's dtype as `--kv-cache-dtype` (`asked`) makes it for
    /// this model.
    pub fn new(shape: &ModelShape, asked_kv_cache_dtype: Option<&str>, build: VllmBuild) -> Result<VllmRules> {
        Ok(VllmRules {
            kv_cache_dtype: kv_cache_dtype(shape, asked_kv_cache_dtype, &build)?,
            build,
            runtime_bytes: DEFAULT_RUNTIME_GIB << 30,
            min_context: MIN_CONTEXT,
            asked_context: None,
            asked_layout: None,
            max_num_batched_tokens: None,
            pp_layer_partition: None,
            mla_disabled: false,
        })
    }
}

/// The cache's dtype: `--kv-cache-dtype` when given and the image's vLLM takes it, else vLLM's
/// `auto`, the model's own dtype (a config without one is read as float32, which vLLM serves in
/// bfloat16).
pub fn kv_cache_dtype(shape: &ModelShape, asked: Option<&str>, build: &VllmBuild) -> Result<KvCacheDtype> {
    let taken = build.kv_cache_dtypes();
    match asked.filter(|name| *name != "auto") {
        Some(name) => KvCacheDtype::named(name, format!("--kv-cache-dtype {name}"))
            .filter(|_| taken.contains(&name))
            .ok_or_else(|| {
                Error::Usage(format!(
                    "--kv-cache-dtype {name}: not a cache dtype {} takes ({}). Fix: one of {}",
                    build.title(),
                    build.said,
                    taken.join(", ")
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

/// The model as vLLM serves it: with `VLLM_MLA_DISABLE=1` latent attention becomes plain
/// attention, every head its own key and value of `qk_nope_head_dim + qk_rope_head_dim`, the
/// value padded to it (`ModelConfig.get_head_size`, `DeepseekV2Attention.forward`).
pub fn as_served<'a>(shape: &'a ModelShape, rules: &VllmRules) -> Cow<'a, ModelShape> {
    match &shape.mla {
        Some(mla) if rules.mla_disabled => {
            let head_dim = mla.qk_nope_head_dim.saturating_add(mla.qk_rope_head_dim);
            Cow::Owned(ModelShape {
                mla: None,
                kv_heads: shape.attention_heads,
                head_dim,
                v_head_dim: head_dim,
                ..shape.clone()
            })
        }
        _ => Cow::Borrowed(shape),
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

/// Each pipeline stage's layers: `VLLM_PP_LAYER_PARTITION` when given (it must name `pp`
/// stages: vLLM refuses other counts), else as [`pipeline_stages`] splits them.
fn stages(shape: &ModelShape, pp: u32, rules: &VllmRules) -> std::result::Result<Vec<Range<u32>>, Broken> {
    let Some(partition) = &rules.pp_layer_partition else { return Ok(pipeline_stages(shape.layers, pp)) };
    if partition.len() != pp as usize {
        return Err(Broken {
            rule: Rule::Layers,
            message: format!(
                "VLLM_PP_LAYER_PARTITION names {} stages, and pipeline parallel {pp} has {pp} (vLLM: \"does not match \
                 pp_size\")",
                partition.len()
            ),
        });
    }
    let mut start = 0u32;
    Ok(partition
        .iter()
        .map(|&size| {
            let stage = start..start.saturating_add(size);
            start = stage.end;
            stage
        })
        .collect())
}

/// `VLLM_PP_LAYER_PARTITION` checked against the model as vLLM checks it (`get_pp_indices`).
pub fn check_partition(shape: &ModelShape, partition: &[u32]) -> Result<()> {
    let sum: u64 = partition.iter().map(|&n| u64::from(n)).sum();
    if sum != u64::from(shape.layers) || partition.contains(&0) {
        let listed: Vec<String> = partition.iter().map(u32::to_string).collect();
        return Err(Error::Usage(format!(
            "VLLM_PP_LAYER_PARTITION={} gives {sum} layers, and {} has {} (vLLM refuses it: \"does not match \
             num_hidden_layers\"). Fix: name each stage's layers, none empty, adding up to {}",
            listed.join(","),
            shape.architecture,
            shape.layers,
            shape.layers
        )));
    }
    Ok(())
}

/// Every layout of `nodes` for `shape` under vLLM, the one chosen on `transport`, and whether
/// fewer nodes would do.
pub fn fit(shape: &ModelShape, nodes: &[NodeMemory], transport: &Transport, rules: &VllmRules) -> Fit {
    let served = as_served(shape, rules);
    let mut fit = fit_on(&served, nodes, transport, rules);
    if matches!(served, Cow::Owned(_)) {
        fit.notes.push(
            "VLLM_MLA_DISABLE=1: its latent attention is served as plain attention, a key and a value for every \
             head, the value padded to the key's width"
                .into(),
        );
    }
    let shape = &served;
    if fit.chosen.is_some() && nodes.len() > 1 && rules.asked_layout.is_none() {
        for fewer in 1..nodes.len() {
            let smaller = fit_on(shape, nodes.get(..fewer).unwrap_or_default(), transport, rules);
            if let Some(layout) = smaller.chosen_layout() {
                let context = layout.fits().map_or(0, |f| f.context_tokens);
                fit.fewer_nodes = Some(format!(
                    "the model fits on {fewer} of the {} nodes ({}, a context of {context} tokens): one node is \
                     usually fastest for a model that fits it",
                    nodes.len(),
                    layout.label()
                ));
                break;
            }
        }
    }
    fit
}

/// `--max-num-batched-tokens` for a layout of `world` ranks: as asked, else vLLM's default on the
/// smallest node's GPU.
fn batched_tokens(rules: &VllmRules, nodes: &[NodeMemory], world: u32) -> u64 {
    let device = nodes.iter().map(|node| node.gtt_bytes).min().unwrap_or(0);
    rules.max_num_batched_tokens.unwrap_or_else(|| rules.build.default_max_num_batched_tokens(u64::from(world), device))
}

fn fit_on(shape: &ModelShape, nodes: &[NodeMemory], transport: &Transport, rules: &VllmRules) -> Fit {
    let mut notes = vec![format!("{}: blocks of {} tokens", rules.build.said, rules.build.block_size())];
    let weights = match &shape.weights {
        Some(weights) => weights.clone(),
        None => {
            notes.push("no weights were read: their bytes are estimated from the config".to_string());
            Weights::estimated(shape)
        }
    };
    let count = u32::try_from(nodes.len()).unwrap_or(u32::MAX);
    let cache = CacheRules {
        dtype: &rules.kv_cache_dtype,
        window_tokens: 0,
        runtime_bytes: rules.runtime_bytes,
        min_context: rules.min_context,
        asked_context: rules.asked_context,
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
            let stages = match stages(shape, pp, rules) {
                Ok(stages) => stages,
                Err(partition) => {
                    broken.push(partition);
                    Vec::new()
                }
            };
            let outcome = if broken.is_empty() {
                let batched = batched_tokens(rules, nodes, tp.saturating_mul(pp));
                let in_flight = rules.build.batches_in_flight(u64::from(pp)).saturating_mul(batched);
                let groups = VllmCache::of(shape, rules.build.block_size(), in_flight);
                let placements = placements(shape, &stages, tp, dp, expert_parallel);
                vllm_cache::outcome(shape, &weights, nodes, &placements, &cache, &groups)
            } else {
                LayoutOutcome::Breaks { rules: broken, needs_bytes: None }
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
    let chosen_layout = chosen.as_ref().and_then(|c| layouts.get(c.layout));
    let engine_args = chosen_layout.map(|layout| launch_args(layout, nodes, rules, shape)).unwrap_or_default();
    if let Some(figures) = chosen_layout.and_then(Layout::fits) {
        if shape.sliding.is_some() {
            let layout = chosen_layout.map_or((1, 1), |l| (l.tp, l.pp));
            notes.push(format!(
                "sliding-window layers keep {} tokens: the window of {} and {} batch(es) of {} in flight \
                 (--max-num-batched-tokens, given to vLLM so that it sizes them the same)",
                figures.nodes.first().map_or(0, |n| n.window_tokens),
                shape.sliding.as_ref().map_or(0, |s| s.window),
                rules.build.batches_in_flight(u64::from(layout.1)),
                batched_tokens(rules, nodes, layout.0.saturating_mul(layout.1))
            ));
        }
        notes.push(format!(
            "--gpu-memory-utilization {}: the share of each node's GTT the service takes (weights, the runtime \
             allowance, the KV cache), which vLLM checks is free at start",
            memory_utilization(nodes, figures, rules.runtime_bytes)
        ));
    }
    Fit {
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

/// What each node holds: ranks in vLLM's order (rank = stage × TP + TP rank), one a node; what
/// is loaded beside the layers (a vision tower) on every rank, as vLLM builds it on every stage.
fn placements(shape: &ModelShape, stages: &[Range<u32>], tp: u32, dp: u32, expert_parallel: bool) -> Vec<Placement> {
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
                beside_layers: true,
            })
            .collect();
    }
    let pp = u32::try_from(stages.len()).unwrap_or(u32::MAX);
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
                beside_layers: true,
            });
        }
    }
    all
}

/// `--gpu-memory-utilization` for `figures` on `nodes`: what the service takes on each node
/// (weights, `runtime_bytes`, its KV cache) over that node's GTT, the largest share, up to
/// ten-thousandths; never more than any node has free now (what vLLM checks at start).
pub fn memory_utilization(nodes: &[NodeMemory], figures: &LayoutFigures, runtime_bytes: u64) -> String {
    let mut needed = 1u64;
    let mut free = 10_000u64;
    for (node, load) in nodes.iter().zip(&figures.nodes) {
        let gtt = u128::from(node.gtt_bytes.max(1));
        let takes = u128::from(load.weights_bytes.saturating_add(runtime_bytes).saturating_add(load.kv_cache_bytes));
        needed = needed.max(u64::try_from((takes * 10_000).div_ceil(gtt)).unwrap_or(10_000));
        let unused = u128::from(node.gtt_bytes.saturating_sub(node.gtt_used_bytes));
        free = free.min(u64::try_from(unused * 10_000 / gtt).unwrap_or(10_000));
    }
    let share = needed.min(free).clamp(1, 10_000);
    format!("{}.{:04}", share / 10_000, share % 10_000)
}

/// vLLM's flags for a layout that fits: the sizes; `--max-model-len` the context that fits;
/// `--kv-cache-memory-bytes` the cache of the fullest node, whole blocks (one figure for every
/// rank); `--gpu-memory-utilization` for the start check; and for a model with sliding layers
/// the `--max-num-batched-tokens` their cache was sized with.
pub fn launch_args(layout: &Layout, nodes: &[NodeMemory], rules: &VllmRules, shape: &ModelShape) -> Vec<String> {
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
        "--gpu-memory-utilization".to_string(),
        memory_utilization(nodes, figures, rules.runtime_bytes),
    ]);
    if shape.sliding.is_some() {
        let batched = batched_tokens(rules, nodes, layout.tp.saturating_mul(layout.pp));
        args.extend(["--max-num-batched-tokens".to_string(), batched.to_string()]);
    }
    args
}

#[cfg(test)]
mod tests;
