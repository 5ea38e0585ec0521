//! The fit, as a pure function: a model's shape, each node's usable memory, the link and the
//! engine's rules in; every layout that fills the nodes out, each with what every node holds
//! (weights, the KV cache per token, the longest context that fits) or the rules it breaks; then
//! the one chosen and why. Nothing here reads a file or a clock: the engine's file gathers the
//! facts and calls [`vllm::fit`] or [`llama::fit`]; the `plan` command prints the result and the
//! launch plan (`super::plan`) carries out the layout chosen. What the engine says after loading
//! is read back by [`vllm_log`] and [`llama_log`] to set beside the fit. Every size is in bytes.

pub(crate) mod asked;
pub(crate) mod kv;
pub(crate) mod llama;
pub(crate) mod llama_build;
pub(crate) mod llama_log;
pub(crate) mod measured;
pub(crate) mod memory;
pub(crate) mod vllm;
pub(crate) mod vllm_build;
pub(crate) mod vllm_cache;
pub(crate) mod vllm_log;

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::model::shape::weights::Weights;
use crate::model::shape::ModelShape;
use crate::reporter::Bytes;
use crate::spec::Transport;
pub use asked::{choose_asked, FitAsk};
pub use kv::{KvCacheDtype, KvPerToken};
pub use measured::{Measured, NodeLog, Planned};
pub use memory::{FitNodes, NodeMemory};

/// Every layout, the one chosen and why, or why none fits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fit {
    /// `vllm` or `llama.cpp`.
    pub engine: String,
    pub architecture: String,
    pub nodes: Vec<NodeMemory>,
    pub kv_cache_dtype: KvCacheDtype,
    /// Kept free on every node beside the weights and the KV cache (activations, graphs,
    /// communication buffers), and why that much.
    pub runtime_bytes: u64,
    pub runtime_why: String,
    pub layouts: Vec<Layout>,
    pub chosen: Option<Chosen>,
    /// Said when fewer nodes would hold the model.
    pub fewer_nodes: Option<String>,
    /// Why nothing fits, with the numbers and the fix.
    pub refusal: Option<Refusal>,
    /// What the plan assumed, said.
    pub notes: Vec<String>,
    /// The engine's flags for the chosen layout (sizes, context, memory); the user's own flags
    /// after `--` win over these.
    pub engine_args: Vec<String>,
}

impl Fit {
    /// The chosen layout.
    pub fn chosen_layout(&self) -> Option<&Layout> {
        self.chosen.as_ref().and_then(|chosen| self.layouts.get(chosen.layout))
    }

    /// The layout with these sizes (`--tp`/`--pp` as asked), if the plan has it.
    pub fn layout(&self, tp: u32, pp: u32, dp: u32, expert_parallel: bool) -> Option<&Layout> {
        self.layouts.iter().find(|l| l.tp == tp && l.pp == pp && l.dp == dp && l.expert_parallel == expert_parallel)
    }
}

/// How the model is split over the nodes (one GPU each): TP × PP × DP = the nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub tp: u32,
    pub pp: u32,
    /// Data-parallel replicas of the attention (expert parallelism spreads the experts over all).
    pub dp: u32,
    pub expert_parallel: bool,
    pub outcome: LayoutOutcome,
}

impl Layout {
    pub fn fits(&self) -> Option<&LayoutFigures> {
        match &self.outcome {
            LayoutOutcome::Fits(figures) => Some(figures),
            LayoutOutcome::Breaks { .. } => None,
        }
    }

    /// `TP 2 × PP 2`, `EP over DP 3 × TP 1`, `layers split over 3`.
    pub fn label(&self) -> String {
        if self.expert_parallel {
            format!("expert parallel over DP {} × TP {}", self.dp, self.tp)
        } else {
            format!("TP {} × PP {}", self.tp, self.pp)
        }
    }
}

/// A layout's figures, or the rules it breaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum LayoutOutcome {
    Fits(LayoutFigures),
    Breaks {
        rules: Vec<Broken>,
        /// What the fullest node would need (weights, runtime, the shortest request's cache), when
        /// memory is what it lacks.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        needs_bytes: Option<u64>,
    },
}

/// What a layout that fits gives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutFigures {
    pub nodes: Vec<NodeLoad>,
    /// The longest context every node's cache holds, capped at the model's own.
    pub context_tokens: u64,
    /// Whether the model or a node's memory set it.
    pub limited_by: String,
    /// The cache as the engine sizes and says it (vLLM: its blocks, its concurrency); None for
    /// an engine whose cache is what each node's figures say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<vllm_cache::CacheFigures>,
}

impl LayoutFigures {
    /// The largest KV cache any node holds at the layout's context.
    pub fn kv_cache_bytes(&self) -> u64 {
        self.nodes.iter().map(|n| n.kv_cache_bytes).max().unwrap_or(0)
    }
}

/// What one node holds in a layout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLoad {
    pub node: String,
    /// Pipeline stage and tensor-parallel rank (for llama.cpp, the device's place in the split).
    pub stage: u32,
    pub rank: u32,
    pub first_layer: u32,
    pub layers: u32,
    pub weights_bytes: u64,
    /// The cache per token of this node's layers.
    pub kv_per_token: KvPerToken,
    /// Tokens a sliding layer keeps at most (the window, as the engine allocates it).
    pub window_tokens: u64,
    /// Usable less the runtime's share less the weights: what the cache may take.
    pub free_for_kv_bytes: u64,
    /// The cache at the layout's context.
    pub kv_cache_bytes: u64,
    /// The longest context this node alone could hold.
    pub context_tokens: u64,
}

/// A rule a layout breaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Broken {
    pub rule: Rule,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    AttentionHeads,
    KvHeads,
    /// A width (MLP, experts) the tensor-parallel size does not divide.
    Width,
    /// A quantization group or block that does not divide the per-rank width.
    QuantizationGroup,
    Layers,
    Experts,
    Memory,
    Context,
}

/// The layout chosen, by its index in [`Fit::layouts`], and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chosen {
    pub layout: usize,
    pub why: String,
}

/// Why no layout fits: what the smallest of them needs per node, what the nodes have, the fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub message: String,
    pub fix: String,
    pub needs_bytes: u64,
    pub has_bytes: u64,
    /// The rules the layout the operator asked for (`--tp`/`--pp`) breaks; empty when no layout
    /// of the engine's own choosing fits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asked_breaks: Vec<Broken>,
}

impl Refusal {
    /// The operator asked for a layout that breaks a rule of the model (not merely its memory).
    pub fn asked_against_the_model(&self) -> bool {
        self.asked_breaks.iter().any(|broken| !matches!(broken.rule, Rule::Memory | Rule::Context))
    }
}

/// What one node holds: its layers, how they are cut, and what else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub stage: u32,
    pub rank: u32,
    pub layers: Range<u32>,
    /// Ranks cutting the layers' tensors (1: whole).
    pub tp: u32,
    pub experts: ExpertCut,
    pub embedding: bool,
    pub output: bool,
    /// Also the tied embedding as the output head (a last pipeline stage without the first).
    pub tied_output: bool,
    /// Also what is loaded beside the layers (a vision tower, a projector), cut across the
    /// tensor-parallel ranks.
    pub beside_layers: bool,
}

/// How a node holds the routed experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpertCut {
    /// Every expert, cut in width across `tp` ranks.
    Width(u32),
    /// Whole experts, dealt out over `ranks` (expert parallelism): the busiest rank's share.
    Whole { ranks: u32 },
}

/// Key/value heads on one of `tp` ranks: split while there are enough, one replicated past them
/// (vLLM's `QKVParallelLinear`).
pub fn kv_heads_on_rank(shape: &ModelShape, tp: u32) -> u64 {
    let kv = u64::from(shape.kv_heads.max(1));
    let tp = u64::from(tp.max(1));
    if tp >= kv {
        1
    } else {
        kv / tp
    }
}

/// The weights `placement` puts on its node.
pub fn weights_on(shape: &ModelShape, weights: &Weights, placement: &Placement) -> u64 {
    let tp = u64::from(placement.tp.max(1));
    let kv_ways = u64::from(shape.kv_heads.max(1)).min(tp);
    let experts = u64::from(shape.moe.as_ref().map_or(1, |moe| moe.experts.max(1)));
    let mut bytes = 0u64;
    for layer in placement.layers.clone() {
        let Some(layer) = weights.layers.get(layer as usize) else { continue };
        let expert = match placement.experts {
            ExpertCut::Width(ways) => layer.expert_bytes.div_ceil(u64::from(ways.max(1))),
            ExpertCut::Whole { ranks } => {
                let most = experts.div_ceil(u64::from(ranks.max(1)));
                u64::try_from(u128::from(layer.expert_bytes) * u128::from(most) / u128::from(experts))
                    .unwrap_or(u64::MAX)
            }
        };
        bytes = bytes
            .saturating_add(layer.split_bytes.div_ceil(tp))
            .saturating_add(layer.kv_bytes.div_ceil(kv_ways))
            .saturating_add(layer.replicated_bytes)
            .saturating_add(expert);
    }
    if placement.embedding {
        bytes = bytes.saturating_add(weights.embedding_bytes.div_ceil(tp));
    }
    if placement.beside_layers {
        bytes = bytes.saturating_add(weights.other_bytes.div_ceil(tp));
    }
    if placement.output {
        bytes = bytes.saturating_add(weights.output_bytes.div_ceil(tp));
    }
    if placement.tied_output {
        bytes = bytes.saturating_add(weights.embedding_bytes.div_ceil(tp));
    }
    bytes
}

/// What the engine's rules say about the cache and the memory it leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheRules<'a> {
    pub dtype: &'a KvCacheDtype,
    pub window_tokens: u64,
    pub runtime_bytes: u64,
    /// A layout leaving fewer tokens than this (or the model's own maximum, if smaller) breaks.
    pub min_context: u64,
    /// The context the operator asked for (`--max-model-len`, `-c`): the ceiling, and what every
    /// layout must hold (the model's own maximum caps it).
    pub asked_context: Option<u64>,
}

impl CacheRules<'_> {
    /// The longest context a layout may take, and what sets it.
    pub fn ceiling(&self, shape: &ModelShape) -> (u64, String) {
        match self.asked_context {
            Some(asked) if asked < shape.max_context => (asked, format!("the {asked} tokens asked")),
            _ => (shape.max_context, "the model's own maximum".to_string()),
        }
    }

    /// The fewest tokens a layout must hold: what was asked, else the engine's least.
    pub fn needed(&self, shape: &ModelShape) -> u64 {
        let (ceiling, _) = self.ceiling(shape);
        match self.asked_context {
            Some(_) => ceiling,
            None => self.min_context.min(ceiling),
        }
    }
}

/// A layout's outcome from its placements, one per node in order, each node's cache taking what
/// that node has (llama.cpp: each device its layers' cache; vLLM's is [`vllm_cache::outcome`]).
pub fn outcome(
    shape: &ModelShape,
    weights: &Weights,
    nodes: &[NodeMemory],
    placements: &[Placement],
    rules: &CacheRules,
) -> LayoutOutcome {
    let needed = rules.needed(shape);
    let (ceiling, ceiling_by) = rules.ceiling(shape);
    let mut loads = Vec::new();
    let mut broken = Vec::new();
    let mut needs = 0u64;
    for (node, placement) in nodes.iter().zip(placements) {
        let weights_bytes = weights_on(shape, weights, placement);
        let kv_heads = kv_heads_on_rank(shape, placement.tp);
        let kv_per_token = KvPerToken::of(shape, placement.layers.clone(), kv_heads, rules.dtype);
        let least_cache = kv_per_token.bytes_at(needed, rules.window_tokens);
        needs = needs.max(weights_bytes.saturating_add(rules.runtime_bytes).saturating_add(least_cache));
        let room = node.usable_bytes.saturating_sub(rules.runtime_bytes);
        if weights_bytes > room {
            broken.push(Broken {
                rule: Rule::Memory,
                message: format!(
                    "{}: its weights need {}, and it has {} usable ({} of it kept for the runtime)",
                    node.node,
                    Bytes(weights_bytes),
                    Bytes(node.usable_bytes),
                    Bytes(rules.runtime_bytes)
                ),
            });
        }
        loads.push(NodeLoad {
            node: node.node.clone(),
            stage: placement.stage,
            rank: placement.rank,
            first_layer: placement.layers.start,
            layers: placement.layers.end.saturating_sub(placement.layers.start),
            weights_bytes,
            kv_per_token,
            window_tokens: rules.window_tokens,
            free_for_kv_bytes: room.saturating_sub(weights_bytes),
            kv_cache_bytes: 0,
            context_tokens: 0,
        });
    }
    if !broken.is_empty() {
        return LayoutOutcome::Breaks { rules: broken, needs_bytes: Some(needs) };
    }
    for load in &mut loads {
        load.context_tokens = load.kv_per_token.longest_context(load.free_for_kv_bytes, rules.window_tokens);
    }
    let (context, by) = match loads.iter().min_by_key(|l| l.context_tokens) {
        Some(tightest) if tightest.context_tokens < ceiling => {
            (tightest.context_tokens, format!("the memory of {}", tightest.node))
        }
        _ => (ceiling, ceiling_by),
    };
    if context < needed {
        return LayoutOutcome::Breaks {
            rules: vec![Broken {
                rule: Rule::Context,
                message: format!(
                    "the weights fit, but {by} leaves room for a cache of {context} tokens, fewer than the {needed} a \
                     request needs"
                ),
            }],
            needs_bytes: Some(needs),
        };
    }
    for load in &mut loads {
        load.kv_cache_bytes = load.kv_per_token.bytes_at(context, rules.window_tokens);
    }
    LayoutOutcome::Fits(LayoutFigures { nodes: loads, context_tokens: context, limited_by: by, cache: None })
}

/// Why no layout fits: what the least demanding layout needs on its fullest node against the
/// smallest node's usable memory, or that every layout breaks a rule of the model.
pub fn refusal(layouts: &[Layout], nodes: &[NodeMemory], min_context: u64) -> Refusal {
    let has = nodes.iter().map(|n| n.usable_bytes).min().unwrap_or(0);
    let needs = layouts
        .iter()
        .filter_map(|layout| match &layout.outcome {
            LayoutOutcome::Breaks { needs_bytes, .. } => *needs_bytes,
            LayoutOutcome::Fits(_) => None,
        })
        .min();
    let why = match needs {
        None => {
            let rules: Vec<String> = layouts
                .iter()
                .filter_map(|l| match &l.outcome {
                    LayoutOutcome::Breaks { rules, .. } => {
                        rules.first().map(|r| format!("{}: {}", l.label(), r.message))
                    }
                    LayoutOutcome::Fits(_) => None,
                })
                .collect();
            format!("every layout breaks a rule of the model ({})", rules.join("; "))
        }
        Some(needs) => format!(
            "it needs {} per node (weights, runtime and a cache of {min_context} tokens) in its least demanding \
             layout, and the nodes have {} usable",
            Bytes(needs),
            Bytes(has)
        ),
    };
    Refusal {
        message: format!("no layout of the {} node(s) serves this model: {why}", nodes.len()),
        fix: "add nodes, take a quantized variant of the model, free the GPU memory in use, lower the reserve, or \
              give a shorter --max-model-len"
            .into(),
        needs_bytes: needs.unwrap_or(0),
        has_bytes: has,
        asked_breaks: Vec::new(),
    }
}

/// The order layouts are preferred on `transport`: on RoCE tensor parallel where the model
/// allows it, then expert parallel (for MoE), then tensor × pipeline with the most TP, then
/// pipeline; on TCP pipeline first, then the least tensor parallel. Returns the first that fits.
pub fn choose(layouts: &[Layout], transport: &Transport, nodes: usize) -> Option<Chosen> {
    let rdma = matches!(transport, Transport::Roce { .. });
    let mut order: Vec<usize> = (0..layouts.len()).collect();
    order.sort_by_key(|&index| {
        let l = &layouts[index];
        let kind = match (l.expert_parallel, l.pp, l.tp) {
            (false, 1, _) => 0,
            (true, _, _) => 1,
            (false, pp, _) if pp as usize == nodes => 3,
            _ => 2,
        };
        if rdma {
            (kind, std::cmp::Reverse(l.tp))
        } else {
            // TCP: pipeline first, then mixed with the least TP, expert parallel, then tensor parallel.
            let kind = match kind {
                3 => 0,
                2 => 1,
                1 => 2,
                _ => 3,
            };
            (kind, std::cmp::Reverse(u32::MAX - l.tp))
        }
    });
    let first = order.iter().copied().find(|&index| layouts[index].fits().is_some())?;
    let layout = &layouts[first];
    let skipped: Vec<String> = order
        .iter()
        .take_while(|&&index| index != first)
        .filter_map(|&index| match &layouts[index].outcome {
            LayoutOutcome::Breaks { rules, .. } => {
                rules.first().map(|rule| format!("{}: {}", layouts[index].label(), rule.message))
            }
            LayoutOutcome::Fits(_) => None,
        })
        .collect();
    let link = transport.label();
    let because = match (layout.expert_parallel, layout.tp, layout.pp) {
        _ if nodes == 1 => "one node, one GPU".to_string(),
        (true, tp, _) => format!(
            "expert parallel over {nodes} nodes (DP {} × TP {tp}): the experts are dealt out whole and only the \
             routed tokens cross the link",
            layout.dp
        ),
        (false, tp, 1) if rdma => {
            format!("tensor parallel {tp}: the link is {link}, and RDMA carries the all-reduce of every layer")
        }
        (false, 1, pp) if !rdma => format!(
            "pipeline parallel {pp}: the link is {link}, where tensor parallelism's all-reduce of every layer costs \
             more than it gains; the layers are split instead"
        ),
        (false, tp, pp) => {
            format!("tensor parallel {tp} × pipeline parallel {pp} on {link}: the layouts preferred on it do not fit")
        }
    };
    let why = if skipped.is_empty() { because } else { format!("{because} (before it: {})", skipped.join("; ")) };
    Some(Chosen { layout: first, why })
}

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod tests;
