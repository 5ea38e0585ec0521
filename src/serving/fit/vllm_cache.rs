//! vLLM's KV cache as vLLM sizes it (`vllm/v1/core/kv_cache_utils.py`, `kv_cache_interface.py`),
//! and a layout's figures from it:
//! - a layer's page is `block_size` tokens of its keys and values on its rank;
//! - the layers are grouped (`get_kv_cache_groups`): all alike, one group; full and sliding layers
//!   (`_get_kv_cache_groups_uniform_page_size`) in groups of as many layers as the smaller kind
//!   has (as the larger when it has fewer than 1.5 times as many), each kind's layers dealt into
//!   `cdiv(n, size)` groups as `layers[i::groups]`;
//! - a block of the shared pool holds a page of each layer of the widest group on the rank
//!   (`_get_kv_cache_bytes_per_block`): `--kv-cache-memory-bytes` buys `bytes / that` blocks on
//!   each rank, the fewest of them for all (`get_kv_cache_configs`);
//! - a request of `C` tokens takes `cdiv(C, block)` blocks in each full group and
//!   `cdiv(min(window - 1 + in flight, C), block) + 1` in each sliding one
//!   (`SlidingWindowSpec.max_admission_blocks_per_request`), summed over the groups;
//! - one block of the pool is `BlockPool`'s null block: the start check
//!   (`_check_enough_kv_cache_memory`, after `_pool_bytes_per_block` is taken off) wants
//!   `blocks - 1` to hold one request of `--max-model-len`;
//! - it then says `Maximum concurrency for C tokens per request: blocks / per request` and `KV
//!   cache size: int(that × C) tokens` (`get_max_concurrency_for_kv_cache_config`,
//!   `get_kv_cache_capacity`), the null block counted in.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::kv::layer_bytes_per_token;
use super::{
    kv_heads_on_rank, weights_on, Broken, CacheRules, KvPerToken, LayoutFigures, LayoutOutcome, NodeLoad, NodeMemory,
    Placement, Rule,
};
use crate::model::shape::weights::Weights;
use crate::model::shape::ModelShape;
use crate::reporter::Bytes;

/// The model's layers in vLLM's cache groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VllmCache {
    /// Tokens a block holds.
    pub block_size: u64,
    /// The sliding layers' window (0: none).
    pub window: u64,
    /// Tokens in flight a sliding layer keeps beyond its window.
    pub in_flight: u64,
    pub groups: Vec<CacheGroup>,
}

/// One group: its layers share a block table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheGroup {
    pub sliding: bool,
    pub layers: Vec<u32>,
}

/// The cache as vLLM will say it at start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheFigures {
    pub block_size: u64,
    /// Blocks every rank allocates, the null block among them.
    pub blocks: u64,
    /// Blocks a request of the context takes (over every group).
    pub blocks_per_request: u64,
    /// `KV cache size: N tokens`.
    pub tokens: u64,
    /// `Maximum concurrency for C tokens per request: X` as vLLM prints X (`%.2f`).
    pub max_concurrency: String,
}

impl VllmCache {
    /// `shape`'s layers grouped as vLLM groups them, blocks of `block_size` tokens, a sliding layer
    /// keeping `in_flight` tokens beyond its window.
    pub fn of(shape: &ModelShape, block_size: u64, in_flight: u64) -> VllmCache {
        let (sliding, full): (Vec<u32>, Vec<u32>) = (0..shape.layers).partition(|&layer| shape.is_sliding(layer));
        let window = shape.sliding.as_ref().map_or(0, |sliding| sliding.window);
        let block_size = block_size.max(1);
        let groups = match (full.is_empty(), sliding.is_empty()) {
            (_, true) => vec![CacheGroup { sliding: false, layers: full }],
            (true, false) => vec![CacheGroup { sliding: true, layers: sliding }],
            (false, false) => {
                let (fewer, more) = (full.len().min(sliding.len()), full.len().max(sliding.len()));
                // `max_num_layers < min_num_layers * 1.5`, in integers.
                let size = if 2 * more < 3 * fewer { more } else { fewer };
                let mut groups = dealt(&full, size, false);
                groups.extend(dealt(&sliding, size, true));
                groups
            }
        };
        VllmCache { block_size, window, in_flight, groups }
    }

    /// Layers of the widest group among `layers` (a rank's): pages a block holds on that rank.
    pub fn widest(&self, layers: &Range<u32>) -> u64 {
        let count = |group: &CacheGroup| group.layers.iter().filter(|layer| layers.contains(layer)).count();
        self.groups.iter().map(count).max().unwrap_or(0) as u64
    }

    /// Blocks a request of `context` tokens takes.
    pub fn blocks_per_request(&self, context: u64) -> u64 {
        let block = self.block_size;
        let sliding = self.window.saturating_sub(1).saturating_add(self.in_flight).min(context).div_ceil(block) + 1;
        self.groups.iter().map(|group| if group.sliding { sliding } else { context.div_ceil(block) }).sum()
    }

    /// The longest context up to `ceiling` a pool of `blocks` (the null block among them) holds
    /// one request of; 0 when not even one token.
    pub fn longest_context(&self, blocks: u64, ceiling: u64) -> u64 {
        let usable = blocks.saturating_sub(1);
        let fits = |context: u64| self.blocks_per_request(context) <= usable;
        if ceiling == 0 || !fits(1) {
            return 0;
        }
        let (mut fitting, mut beyond) = (1u64, ceiling.saturating_add(1));
        if fits(ceiling) {
            return ceiling;
        }
        while beyond - fitting > 1 {
            let middle = fitting + (beyond - fitting) / 2;
            if fits(middle) {
                fitting = middle;
            } else {
                beyond = middle;
            }
        }
        fitting
    }

    /// Tokens a sliding layer keeps at most (whole blocks), 0 without sliding layers.
    pub fn sliding_tokens(&self) -> u64 {
        if !self.groups.iter().any(|group| group.sliding) {
            return 0;
        }
        (self.window.saturating_sub(1).saturating_add(self.in_flight).div_ceil(self.block_size) + 1)
            .saturating_mul(self.block_size)
    }

    /// What vLLM says of a pool of `blocks` at `context`.
    pub fn figures(&self, blocks: u64, context: u64) -> CacheFigures {
        let per_request = self.blocks_per_request(context).max(1);
        // Python's float arithmetic, as vLLM does it: int(blocks / per_request * context).
        let concurrency = blocks as f64 / per_request as f64;
        CacheFigures {
            block_size: self.block_size,
            blocks,
            blocks_per_request: per_request,
            tokens: (concurrency * context as f64) as u64,
            max_concurrency: format!("{concurrency:.2}"),
        }
    }
}

/// `layers` dealt into `cdiv(n, size)` groups, the i-th taking `layers[i::groups]`.
fn dealt(layers: &[u32], size: usize, sliding: bool) -> Vec<CacheGroup> {
    let count = layers.len().div_ceil(size.max(1));
    (0..count)
        .map(|first| CacheGroup { sliding, layers: layers.iter().skip(first).step_by(count).copied().collect() })
        .collect()
}

/// A layout's outcome under vLLM: every node's weights, then one KV cache size for every rank
/// (the tightest node's room after its weights and the runtime), in whole blocks; the longest
/// context that leaves one request of it beside the null block, capped by what was asked or the
/// model's own; and what vLLM will say of it.
pub fn outcome(
    shape: &ModelShape,
    weights: &Weights,
    nodes: &[NodeMemory],
    placements: &[Placement],
    rules: &CacheRules,
    cache: &VllmCache,
) -> LayoutOutcome {
    let needed = rules.needed(shape);
    let (ceiling, ceiling_by) = rules.ceiling(shape);
    let mut loads = Vec::new();
    let mut pages = Vec::new();
    let mut broken = Vec::new();
    let mut needs = 0u64;
    for (node, placement) in nodes.iter().zip(placements) {
        let weights_bytes = weights_on(shape, weights, placement);
        let kv_heads = kv_heads_on_rank(shape, placement.tp);
        let page = cache.block_size.saturating_mul(layer_bytes_per_token(shape, kv_heads, rules.dtype));
        let block_bytes = page.saturating_mul(cache.widest(&placement.layers));
        let least_cache = block_bytes.saturating_mul(cache.blocks_per_request(needed).saturating_add(1));
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
        pages.push(block_bytes);
        loads.push(NodeLoad {
            node: node.node.clone(),
            stage: placement.stage,
            rank: placement.rank,
            first_layer: placement.layers.start,
            layers: placement.layers.end.saturating_sub(placement.layers.start),
            weights_bytes,
            kv_per_token: KvPerToken::of(shape, placement.layers.clone(), kv_heads, rules.dtype),
            window_tokens: cache.sliding_tokens(),
            free_for_kv_bytes: room.saturating_sub(weights_bytes),
            kv_cache_bytes: 0,
            context_tokens: 0,
        });
    }
    if !broken.is_empty() {
        return LayoutOutcome::Breaks { rules: broken, needs_bytes: Some(needs) };
    }
    // One --kv-cache-memory-bytes for every rank: what the tightest node can give.
    let budget = loads.iter().map(|load| load.free_for_kv_bytes).min().unwrap_or(0);
    let blocks_on = |block_bytes: u64| budget.checked_div(block_bytes).unwrap_or(u64::MAX);
    let tightest = (0..loads.len()).min_by_key(|&at| blocks_on(pages[at]));
    let blocks = tightest.map_or(0, |at| blocks_on(pages[at]));
    let context = cache.longest_context(blocks, ceiling);
    let by = match tightest {
        Some(at) if context < ceiling => format!("the memory of {}", loads[at].node),
        _ => ceiling_by,
    };
    if context < needed {
        return LayoutOutcome::Breaks {
            rules: vec![Broken {
                rule: Rule::Context,
                message: format!(
                    "the weights fit, but {by} leaves {blocks} blocks of {} tokens, a cache for requests of {context} \
                     tokens (one block is vLLM's null block), fewer than the {needed} a request needs",
                    cache.block_size
                ),
            }],
            needs_bytes: Some(needs),
        };
    }
    for (load, block_bytes) in loads.iter_mut().zip(&pages) {
        load.kv_cache_bytes = blocks.saturating_mul(*block_bytes);
        load.context_tokens = cache.longest_context(blocks_on(*block_bytes), ceiling);
    }
    LayoutOutcome::Fits(LayoutFigures {
        nodes: loads,
        context_tokens: context,
        limited_by: by,
        cache: Some(cache.figures(blocks, context)),
    })
}

#[cfg(test)]
mod tests;
