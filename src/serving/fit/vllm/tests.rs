use super::*;
use crate::model::shape::fixtures::{self, shape_of, with_weights};
use crate::model::shape::{config, Sizing};
use crate::serving::fit::vllm_build::VllmBuild;
use crate::toolbox::status::VllmLabels;

const GIB: u64 = 1 << 30;

/// The image's vLLM: `version` on `device`, as its labels say.
fn build(version: &str, device: &str) -> VllmBuild {
    VllmBuild::of(Some(&VllmLabels { version: Some(version.into()), device: Some(device.into()) }), "")
}

fn rocm() -> VllmBuild {
    build("0.32.0", "rocm")
}

/// `count` nodes whose GTT is `gtt_gib`, nothing in use, 4 GiB reserved.
fn nodes(count: usize, gtt_gib: u64) -> Vec<NodeMemory> {
    (1..=count).map(|i| NodeMemory::new(&format!("node{i}"), gtt_gib * GIB, 0, 4 * GIB)).collect()
}

fn roce() -> Transport {
    Transport::Roce { device: "rocep194s0f0".into(), port: 1, netdev: "enp194s0np0".into(), gid_index: 1 }
}

fn thunderbolt() -> Transport {
    Transport::ThunderboltTcp { netdev: "thunderbolt0".into() }
}

fn planned(shape: &ModelShape, nodes: &[NodeMemory], transport: &Transport) -> Fit {
    fit(shape, nodes, transport, &VllmRules::new(shape, None, rocm()).expect("rules"))
}

/// The value of `flag` in `args`.
fn arg<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.windows(2).find(|pair| pair[0] == flag).map(|pair| pair[1].as_str())
}

fn rules_of(broken: &[Broken]) -> Vec<Rule> {
    broken.iter().map(|b| b.rule).collect()
}

#[test]
fn three_roce_nodes_never_ask_for_tensor_parallel_3_of_a_64_head_model() {
    let shape = with_weights(fixtures::QWEN3_32B);
    let fit = planned(&shape, &nodes(3, 120), &roce());
    let tp3 = fit.layout(3, 1, 1, false).expect("TP 3 is listed");
    let LayoutOutcome::Breaks { rules, .. } = &tp3.outcome else { panic!("TP 3 must break: {tp3:?}") };
    // 64 heads and 8 KV heads over 3 ranks, and an MLP of 25600.
    assert_eq!(rules_of(rules), vec![Rule::AttentionHeads, Rule::KvHeads, Rule::Width]);
    assert!(rules[0]
        .message
        .contains("Total number of attention heads (64) must be divisible by tensor parallel size (3)"));
    let chosen = fit.chosen_layout().expect("a layout");
    assert_eq!((chosen.tp, chosen.pp), (1, 3));
    assert!(!fit.engine_args.windows(2).any(|w| w[0] == "--tensor-parallel-size" && w[1] == "3"));
    assert!(fit.engine_args.windows(2).any(|w| w[0] == "--pipeline-parallel-size" && w[1] == "3"));
    // 64 layers over 3 stages: 21 each, the one left to the stage before the last.
    let figures = chosen.fits().expect("figures");
    let layers: Vec<u32> = figures.nodes.iter().map(|n| n.layers).collect();
    assert_eq!(layers, vec![21, 22, 21]);
    let why = &fit.chosen.as_ref().expect("chosen").why;
    assert!(why.contains("TP 3 × PP 1: its 64 attention heads"), "{why}");
    let fewer = fit.fewer_nodes.expect("it fits one node");
    assert!(fewer.contains("fits on 1 of the 3 nodes"), "{fewer}");
}

#[test]
fn two_roce_nodes_take_tensor_parallel_and_give_the_cache_all_the_rest() {
    let shape = with_weights(fixtures::QWEN3_32B);
    let fit = planned(&shape, &nodes(2, 120), &roce());
    let chosen = fit.chosen_layout().expect("a layout");
    assert_eq!((chosen.tp, chosen.pp), (2, 1));
    let figures = chosen.fits().expect("figures");
    // Each rank: the embedding and the head cut in two, 777,912,320 and 777,917,440 (with the
    // final norm); each layer's query, output and MLP halved (954,204,160 / 2), its 8 KV heads
    // four a rank (20,971,520 / 2), its norms whole (20,992): 487,608,832 × 64 = 31,206,965,248.
    // Total 32,762,795,008 bytes.
    assert!(figures.nodes.iter().all(|n| n.weights_bytes == 32_762_795_008), "{figures:?}");
    // The cache: 4 KV heads of 128, K and V, bf16 = 2,048 bytes a layer and token, 131,072 a
    // token. The 116 GiB usable less 2 GiB for the runtime less the weights leave 89,643,772,928
    // bytes for it: blocks of 16 tokens × 2,048 × 64 layers = 2,097,152 bytes, 42,745 of them
    // (89,642,762,240 bytes), all of it, not one request's worth.
    assert_eq!(figures.nodes[0].kv_per_token.full_bytes, 131_072);
    assert_eq!(figures.nodes[0].free_for_kv_bytes, 89_643_772_928);
    assert_eq!(figures.kv_cache_bytes(), 42_745 * 2_097_152);
    // The model's 40,960 tokens take 2,560 blocks: 42,745 / 2,560 = 16.697… requests at once,
    // int(16.697265625 × 40,960) = 683,920 tokens, as vLLM will say them.
    assert_eq!(figures.context_tokens, 40_960);
    assert_eq!(figures.limited_by, "the model's own maximum");
    let cache = figures.cache.as_ref().expect("vLLM's figures");
    assert_eq!((cache.blocks, cache.blocks_per_request, cache.tokens), (42_745, 2_560, 683_920));
    assert_eq!(cache.max_concurrency, "16.70");
    // What the service takes, 32,762,795,008 + 2 GiB + 89,642,762,240 = 124,553,040,896 bytes,
    // is 0.96665… of the 120 GiB GTT: 0.9667, which vLLM's start check finds free.
    assert_eq!(
        fit.engine_args.join(" "),
        "--tensor-parallel-size 2 --pipeline-parallel-size 1 --max-model-len 40960 --kv-cache-memory-bytes \
         89642762240 --gpu-memory-utilization 0.9667"
    );
    assert_eq!(fit.kv_cache_dtype.name, "bfloat16");
    assert!(fit.kv_cache_dtype.why.contains("auto"), "{}", fit.kv_cache_dtype.why);
    assert!(
        fit.notes[0].starts_with("vLLM 0.32.0 on ROCm, as the image's labels say: blocks of 16"),
        "{:?}",
        fit.notes
    );
}

#[test]
fn thunderbolt_splits_the_layers_instead() {
    let shape = with_weights(fixtures::LLAMA_3_3_70B);
    let fit = planned(&shape, &nodes(2, 120), &thunderbolt());
    let chosen = fit.chosen_layout().expect("a layout");
    assert_eq!((chosen.tp, chosen.pp), (1, 2));
    assert!(fit.chosen.as_ref().is_some_and(|c| c.why.contains("Thunderbolt TCP")), "{:?}", fit.chosen);
    let figures = chosen.fits().expect("figures");
    // A layer in bf16: q and o 8192² each, k and v 1024 × 8192 each, the MLP 3 × 28672 × 8192, two
    // norms of 8192: 855,654,400 parameters, 1,711,308,800 bytes; 40 a stage = 68,452,352,000.
    // Stage 0 adds the embedding, 128256 × 8192 × 2 = 2,101,346,304; stage 1 the head and the norm.
    assert_eq!(figures.nodes[0].weights_bytes, 68_452_352_000 + 2_101_346_304);
    assert_eq!(figures.nodes[1].weights_bytes, 68_452_352_000 + 2_101_346_304 + 16_384);
    // 40 layers × 8 KV heads × 128 × 2 (K, V) × 2 bytes = 163,840 a token; a block of 16 tokens
    // 2,621,440 bytes. The last stage has less room (114 GiB less 70,553,714,688 bytes of weights:
    // 51,852,853,248), and its 19,780 blocks are every rank's.
    assert_eq!(figures.nodes[1].kv_per_token.full_bytes, 163_840);
    assert_eq!((figures.context_tokens, figures.kv_cache_bytes()), (131_072, 19_780 * 2_621_440));
    // The model's 131,072 tokens take 8,192 blocks: 19,780 / 8,192 = 2.41x, 316,480 tokens.
    let cache = figures.cache.as_ref().expect("vLLM's figures");
    assert_eq!((cache.tokens, cache.max_concurrency.as_str()), (316_480, "2.41"));
}

#[test]
fn a_model_too_big_for_the_nodes_is_refused_with_the_numbers() {
    // Qwen3-235B-A22B in bf16 (470 GB) on two 120 GiB nodes.
    let shape = with_weights(fixtures::QWEN3_235B_A22B);
    let total = shape.weights.as_ref().map_or(0, |w| w.total_bytes);
    assert!(total > 470_000_000_000, "{total}");
    let fit = planned(&shape, &nodes(2, 120), &roce());
    assert!(fit.chosen.is_none() && fit.engine_args.is_empty());
    let refusal = fit.refusal.expect("refused");
    assert_eq!(refusal.has_bytes, 116 * GIB);
    // The least demanding layout holds at least half the weights on a node.
    assert!(refusal.needs_bytes > total / 2 && refusal.needs_bytes < total / 2 + 8 * GIB, "{}", refusal.needs_bytes);
    assert!(
        refusal.message.contains("GiB per node") && refusal.message.contains("116.00 GiB usable"),
        "{}",
        refusal.message
    );
    assert!(fit.layouts.iter().all(
        |l| matches!(&l.outcome, LayoutOutcome::Breaks { rules, .. } if rules.iter().any(|r| r.rule == Rule::Memory))
    ));
}

#[test]
fn gpt_oss_keeps_its_sliding_layers_to_the_window_and_what_is_in_flight() {
    let shape = with_weights(fixtures::GPT_OSS_120B);
    let rules = VllmRules::new(&shape, None, rocm()).expect("rules");
    assert!(rules.kv_cache_dtype.why.contains("names no dtype"), "{}", rules.kv_cache_dtype.why);
    let one = fit(&shape, &nodes(1, 120), &roce(), &rules);
    let figures = one.chosen_layout().and_then(Layout::fits).expect("it fits one node");
    // 18 full layers and 18 sliding, 8 KV heads of 64: 2,048 bytes a layer and token, a page of
    // 16 tokens 32,768 bytes; one group of each kind, 18 pages a block: 589,824 bytes.
    // On ROCm 0.32 a sliding layer keeps its window of 128 and two batches of 8,192 in flight
    // (async scheduling): cdiv(127 + 16,384, 16) + 1 = 1,033 blocks, 16,528 tokens.
    assert_eq!(figures.nodes[0].window_tokens, 16_528);
    // A request of the model's 131,072 tokens: 8,192 + 1,033 = 9,225 blocks.
    let cache = figures.cache.as_ref().expect("vLLM's figures");
    assert_eq!((figures.context_tokens, cache.blocks_per_request), (131_072, 9_225));
    // The MXFP4 experts: 36 layers × 1,694,269,440 bytes, whole on one node; the rest of the
    // 114 GiB (less 2 GiB for the runtime) is blocks of 589,824 bytes.
    let weights = figures.nodes[0].weights_bytes;
    assert!(weights > 36 * 1_694_269_440);
    assert_eq!(cache.blocks, (114 * GIB - weights) / 589_824);
    assert_eq!(figures.kv_cache_bytes(), cache.blocks * 589_824);
    // vLLM is told the batch the sliding layers were sized with.
    assert_eq!(arg(&one.engine_args, "--max-num-batched-tokens"), Some("8192"));
    assert!(one.notes.iter().any(|n| n.contains("sliding-window layers keep 16528 tokens")), "{:?}", one.notes);
    // vLLM 0.13 (before vllm#47728) kept one batch: cdiv(127 + 8,192, 16) + 1 = 521 blocks.
    let old = VllmRules::new(&shape, None, build("v0.13.0", "rocm")).expect("rules");
    let old = fit(&shape, &nodes(1, 120), &roce(), &old);
    let figures = old.chosen_layout().and_then(Layout::fits).expect("it fits");
    assert_eq!(figures.nodes[0].window_tokens, 521 * 16);
}

#[test]
fn gemma_3_is_sized_by_its_groups_and_its_vision_tower_is_on_every_stage() {
    // gemma-3-27b-it: the text config names no vocabulary or context; transformers' defaults
    // (262,208 and 131,072) stand.
    let mut shape = shape_of(fixtures::GEMMA_3_27B_IT);
    assert_eq!((shape.vocab_size, shape.max_context), (262_208, 131_072));
    // Weights from the config, a 400 MiB vision tower beside them.
    let mut weights = crate::model::shape::weights::Weights::estimated(&shape);
    weights.other_bytes = 400 << 20;
    shape.weights = Some(weights);
    let rules = VllmRules::new(&shape, None, rocm()).expect("rules");
    let split = fit(&shape, &nodes(2, 120), &thunderbolt(), &rules);
    let figures = split.chosen_layout().and_then(Layout::fits).expect("PP 2 fits");
    // vLLM builds the tower on both stages: 400 MiB beside the layers on stage 1 too, with the
    // output norm and the tied embedding as the head (262,208 × 5,376 × 2 bytes).
    let pp2 = split.layout(1, 2, 1, false).and_then(Layout::fits).expect("PP 2");
    assert_eq!(figures, pp2);
    let estimated = crate::model::shape::weights::Weights::estimated(&shape_of(fixtures::GEMMA_3_27B_IT));
    let stage1_layers: u64 = estimated.layers[31..].iter().map(|l| l.total()).sum();
    let head = estimated.embedding_bytes;
    assert_eq!(head, 262_208 * 5_376 * 2);
    assert_eq!(pp2.nodes[1].weights_bytes, stage1_layers + estimated.output_bytes + head + (400 << 20));
    // 16 KV heads of 128: 8,192 bytes a layer and token, a page of 16 tokens 131,072 bytes; each
    // stage's widest group has 5 layers (vllm_cache's tests): blocks of 655,360 bytes.
    let cache = pp2.cache.as_ref().expect("vLLM's figures");
    assert_eq!(pp2.kv_cache_bytes(), cache.blocks * 655_360);
    // A request of 131,072: 8,192 blocks in the full group; each of the 6 sliding groups its
    // window of 1024 and PP + 1 = 3 batches of 8,192 in flight: cdiv(1023 + 24,576, 16) + 1 = 1,601.
    assert_eq!(cache.blocks_per_request, 8_192 + 6 * 1_601);
}

#[test]
fn deepseek_v3_is_sized_by_its_latent_cache() {
    let shape = with_weights(fixtures::DEEPSEEK_V3);
    let fit = planned(&shape, &nodes(8, 120), &roce());
    let chosen = fit.chosen_layout().expect("a layout");
    assert_eq!((chosen.tp, chosen.pp, chosen.expert_parallel), (8, 1, false));
    let figures = chosen.fits().expect("figures");
    // 61 layers × (512 + 64) × 2 bytes = 70,272 a token on every rank, whatever the TP: blocks of
    // 16 tokens, 1,124,352 bytes; the model's 163,840 tokens take 10,240 of them.
    assert!(figures.nodes.iter().all(|n| n.kv_per_token.full_bytes == 70_272));
    let cache = figures.cache.as_ref().expect("vLLM's figures");
    assert_eq!((figures.context_tokens, cache.blocks_per_request), (163_840, 10_240));
    assert_eq!(figures.kv_cache_bytes(), cache.blocks * 1_124_352);
    // The MTP layer is not loaded: the weights on a node are under an eighth of the checkpoint's.
    let weights = shape.weights.as_ref().expect("weights");
    assert!(figures.nodes[0].weights_bytes * 8 < weights.total_bytes, "{figures:?}");
    assert!(weights.skipped_bytes > 0);
}

#[test]
fn expert_parallel_deals_the_experts_out() {
    let shape = with_weights(fixtures::QWEN3_235B_A22B);
    let fit = planned(&shape, &nodes(4, 128), &roce());
    let ep = fit.layout(1, 1, 4, true).expect("EP over DP 4").fits().expect("it fits");
    let tp4 = fit.layout(4, 1, 1, false).expect("TP 4").fits().expect("it fits");
    let weights = shape.weights.as_ref().expect("weights");
    // EP: attention whole on every node, a quarter of the experts (32 of 128) each.
    let expected: u64 = weights
        .layers
        .iter()
        .map(|l| l.split_bytes + l.kv_bytes + l.replicated_bytes + l.expert_bytes / 4)
        .sum::<u64>()
        + weights.embedding_bytes
        + weights.output_bytes;
    assert_eq!(ep.nodes[0].weights_bytes, expected);
    assert!(ep.nodes[0].weights_bytes > tp4.nodes[0].weights_bytes, "attention is replicated under EP");
    // TP 4 with 4 KV heads: one a rank; EP keeps all 4 on every node.
    assert_eq!(tp4.nodes[0].kv_per_token.full_bytes * 4, ep.nodes[0].kv_per_token.full_bytes);
    assert_eq!(fit.chosen_layout().map(|l| (l.tp, l.expert_parallel)), Some((4, false)));
}

#[test]
fn tensor_parallel_rules_as_vllm_checks_them() {
    let qwen_moe = shape_of(fixtures::QWEN3_235B_A22B);
    // 4 KV heads at TP 8: one a rank, replicated twice; allowed.
    assert!(tensor_parallel_rules(&qwen_moe, 8, false).is_empty());
    let six = tensor_parallel_rules(&qwen_moe, 6, false);
    assert_eq!(rules_of(&six), vec![Rule::AttentionHeads, Rule::KvHeads]);
    assert!(six[1].message.contains("not a multiple of its 4 KV heads"), "{}", six[1].message);
    // DeepSeek-V3's FP8 blocks of 128: at TP 32 its expert width 2048 is 64 a rank.
    let deepseek = shape_of(fixtures::DEEPSEEK_V3);
    assert!(tensor_parallel_rules(&deepseek, 16, false).is_empty());
    let thirty_two = tensor_parallel_rules(&deepseek, 32, false);
    assert!(
        thirty_two.iter().any(|b| b.rule == Rule::QuantizationGroup && b.message.contains("FP8 block of 128")),
        "{thirty_two:?}"
    );
    // A GPTQ model with groups of 128 and an MLP of 29568 (Qwen2-72B): 14,784 a rank at TP 2.
    let gptq = config::parse(
        br#"{"architectures": ["Qwen2ForCausalLM"], "hidden_size": 8192, "num_hidden_layers": 80,
        "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 29568, "vocab_size": 152064,
        "max_position_embeddings": 32768, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}}"#,
    );
    let Ok(Sizing::Sized(gptq)) = gptq else { panic!("{gptq:?}") };
    assert!(tensor_parallel_rules(&gptq, 1, false).is_empty());
    let two = tensor_parallel_rules(&gptq, 2, false);
    assert_eq!(rules_of(&two), vec![Rule::QuantizationGroup]);
    assert!(two[0].message.contains("14784") && two[0].message.contains("group of 128"), "{}", two[0].message);
    // MXFP4 experts are padded by vLLM: gpt-oss' 2880 at TP 2 is no rule.
    assert!(tensor_parallel_rules(&shape_of(fixtures::GPT_OSS_120B), 2, false).is_empty());
}

#[test]
fn layers_and_experts_bound_the_splits() {
    let small_moe = config::parse(
        br#"{"architectures": ["MixtralForCausalLM"], "hidden_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 1024, "vocab_size": 1000,
        "max_position_embeddings": 32768, "num_local_experts": 2, "num_experts_per_tok": 1, "torch_dtype": "bfloat16"}"#,
    );
    let Ok(Sizing::Sized(shape)) = small_moe else { panic!("{small_moe:?}") };
    let fit = planned(&shape, &nodes(4, 16), &roce());
    let LayoutOutcome::Breaks { rules, .. } = &fit.layout(1, 4, 1, false).expect("PP 4").outcome else {
        panic!("PP 4")
    };
    assert!(rules.iter().any(|r| r.rule == Rule::Layers && r.message.contains("its 2 layers")), "{rules:?}");
    let LayoutOutcome::Breaks { rules, .. } = &fit.layout(1, 1, 4, true).expect("EP 4").outcome else { panic!("EP 4") };
    assert!(rules.iter().any(|r| r.rule == Rule::Experts && r.message.contains("its 2 experts")), "{rules:?}");
    assert_eq!(fit.chosen_layout().map(|l| (l.tp, l.pp)), Some((4, 1)));
}

#[test]
fn pipeline_stages_as_get_pp_indices_splits_them() {
    let sizes = |layers, pp| pipeline_stages(layers, pp).iter().map(|r| r.end - r.start).collect::<Vec<u32>>();
    assert_eq!(sizes(32, 4), vec![8, 8, 8, 8]);
    assert_eq!(sizes(22, 4), vec![5, 6, 6, 5]);
    assert_eq!(sizes(61, 4), vec![15, 15, 16, 15]);
    assert_eq!(sizes(61, 2), vec![31, 30]);
    assert_eq!(sizes(5, 3), vec![2, 2, 1]);
    assert_eq!(sizes(3, 2), vec![2, 1]);
    assert_eq!(pipeline_stages(61, 4).last(), Some(&(46..61)));
}

#[test]
fn the_cache_dtype_is_named_with_why_and_refused_where_the_images_vllm_refuses_it() {
    let qwen = shape_of(fixtures::QWEN3_32B);
    let fp8 = kv_cache_dtype(&qwen, Some("fp8"), &rocm()).expect("fp8");
    assert_eq!((fp8.block_bytes, fp8.why.as_str()), (1, "--kv-cache-dtype fp8"));
    assert_eq!(kv_cache_dtype(&qwen, Some("auto"), &rocm()).expect("auto").name, "bfloat16");
    let error = kv_cache_dtype(&qwen, Some("q4"), &rocm()).expect_err("unknown");
    assert!(matches!(error, Error::Usage(_)) && error.to_string().contains("Fix:"), "{error}");
    // ROCm's vLLM takes fp8 as e4m3 only (CacheConfig.cache_dtype); vLLM has no `int8` cache.
    for refused in ["fp8_e5m2", "int8"] {
        let error = kv_cache_dtype(&qwen, Some(refused), &rocm()).expect_err(refused);
        assert!(error.to_string().contains("vLLM 0.32.0 on ROCm") && error.to_string().contains("fp8_e4m3"), "{error}");
    }
    // The CPU build's backend takes auto and fp8, e5m2 too.
    let cpu = build("0.32.0", "cpu");
    assert_eq!(kv_cache_dtype(&qwen, Some("fp8_e5m2"), &cpu).expect("e5m2 on CPU").block_bytes, 1);
    assert!(kv_cache_dtype(&qwen, Some("fp8_e4m3"), &rocm()).is_ok());
}

#[test]
fn the_plan_is_sized_by_the_images_block_size() {
    // The tiny Llama on vLLM's CPU build, on a node whose whole 1 GiB (less 256 MiB for the
    // runtime, 0 reserved) goes to it: blocks of 128 tokens, 4 layers × 128 × 256 bytes = 131,072.
    let tiny = with_weights(fixtures::TINY_LLAMA_4L);
    let mut rules = VllmRules::new(&tiny, None, build("0.32.0", "cpu")).expect("rules");
    rules.runtime_bytes = 256 << 20;
    let one = vec![NodeMemory::new("node1", GIB, 0, 0)];
    let roomy = fit(&tiny, &one, &thunderbolt(), &rules);
    let figures = roomy.chosen_layout().and_then(Layout::fits).expect("it fits");
    let weights = figures.nodes[0].weights_bytes;
    let blocks = (GIB - (256 << 20) - weights) / 131_072;
    let cache = figures.cache.as_ref().expect("vLLM's figures");
    assert_eq!((cache.block_size, cache.blocks, cache.blocks_per_request), (128, blocks, 32));
    assert_eq!(figures.kv_cache_bytes(), blocks * 131_072);
    let bytes = (blocks * 131_072).to_string();
    assert_eq!(arg(&roomy.engine_args, "--kv-cache-memory-bytes"), Some(bytes.as_str()));
    assert!(
        roomy.notes[0].starts_with("vLLM 0.32.0 on CPU, as the image's labels say: blocks of 128"),
        "{:?}",
        roomy.notes
    );
    // Asked for more than the model's 4096: the model's.
    assert_eq!(figures.context_tokens, 4096);
    // A pool of exactly one request and its null block: 33 blocks hold 4096 tokens; 32 hold 3968.
    let tight = vec![NodeMemory::new("node1", (256 << 20) + weights + 32 * 131_072, 0, 0)];
    rules.min_context = 1;
    let tight = fit(&tiny, &tight, &thunderbolt(), &rules);
    let figures = tight.chosen_layout().and_then(Layout::fits).expect("it fits");
    assert_eq!((figures.context_tokens, figures.limited_by.as_str()), (3968, "the memory of node1"));
    assert_eq!(figures.cache.as_ref().map(|c| c.max_concurrency.as_str()), Some("1.03"), "32 / 31 blocks");
}

#[test]
fn the_start_check_passes_beside_another_service() {
    // Another service holds 40 GiB of a node's 120: 120 - 40 - 4 reserved = 76 GiB usable.
    let shape = with_weights(fixtures::QWEN3_32B);
    let beside = vec![NodeMemory::new("node1", 120 * GIB, 40 * GIB, 4 * GIB)];
    let fit = planned(&shape, &beside, &roce());
    let figures = fit.chosen_layout().and_then(Layout::fits).expect("it fits");
    let share: f64 = arg(&fit.engine_args, "--gpu-memory-utilization").expect("a share").parse().expect("a number");
    let takes = figures.nodes[0].weights_bytes + 2 * GIB + figures.kv_cache_bytes();
    // At least what the service takes, and no more than the 80 GiB vLLM will find free at start
    // (request_memory: free >= total × share).
    assert!(share * (120 * GIB) as f64 >= takes as f64, "{share}");
    assert!(share * (120 * GIB) as f64 <= (80 * GIB) as f64, "{share}");
    // One rank holds all 8 KV heads: blocks of 16 × 4,096 × 64 = 4,194,304 bytes.
    assert!(takes <= 76 * GIB && takes > 76 * GIB - 4_194_304, "all of the 76 GiB but part of a block: {takes}");
    // --keep-free 5: 5 GiB fewer for the cache.
    let keeping = vec![NodeMemory::new("node1", 120 * GIB, 40 * GIB, 4 * GIB).keeping_free(5 * GIB)];
    let kept = planned(&shape, &keeping, &roce());
    let less = kept.chosen_layout().and_then(Layout::fits).expect("it fits").kv_cache_bytes();
    let fewer = figures.kv_cache_bytes() - less;
    assert!(fewer > 5 * GIB - 4_194_304 && fewer < 5 * GIB + 4_194_304, "{fewer}");
}

#[test]
fn the_partition_and_the_mla_switch_of_the_environment_are_the_plans() {
    // VLLM_PP_LAYER_PARTITION=50,30 for Llama-3.3-70B over two nodes: the first stage holds 50.
    let shape = with_weights(fixtures::LLAMA_3_3_70B);
    let mut rules = VllmRules::new(&shape, None, rocm()).expect("rules");
    rules.pp_layer_partition = Some(vec![50, 30]);
    let split = fit(&shape, &nodes(2, 120), &thunderbolt(), &rules);
    let pp2 = split.layout(1, 2, 1, false).and_then(Layout::fits).expect("PP 2");
    assert_eq!(pp2.nodes.iter().map(|n| n.layers).collect::<Vec<_>>(), [50, 30]);
    // TP 2 has one stage: vLLM refuses a partition of two.
    let LayoutOutcome::Breaks { rules: broken, .. } = &split.layout(2, 1, 1, false).expect("TP 2").outcome else {
        panic!("TP 2 breaks")
    };
    assert!(broken[0].message.contains("VLLM_PP_LAYER_PARTITION names 2 stages"), "{broken:?}");
    let error = check_partition(&shape, &[40, 41]).expect_err("81 layers of 80");
    assert!(error.to_string().contains("gives 81 layers") && error.to_string().contains("80"), "{error}");
    assert!(check_partition(&shape, &[80, 0]).is_err(), "an empty stage");
    // VLLM_MLA_DISABLE=1 for DeepSeek-V3: 128 heads of 192 for the key and the value (padded to
    // it), 8 heads a rank at TP 16 (of 8): 2 × 16 × 192 × 2 = 12,288 bytes a layer and token at
    // TP 8, 61 layers: 749,568 a token, 10.7 times the latent cache's 70,272.
    let deepseek = shape_of(fixtures::DEEPSEEK_V3);
    let mut rules = VllmRules::new(&deepseek, None, rocm()).expect("rules");
    rules.mla_disabled = true;
    let served = as_served(&deepseek, &rules);
    assert_eq!((served.kv_heads, served.head_dim, served.v_head_dim, served.mla.is_none()), (128, 192, 192, true));
    let unlatent = fit(&deepseek, &nodes(8, 120), &roce(), &rules);
    let tp8 = unlatent.layout(8, 1, 1, false).expect("TP 8");
    let per_token = match &tp8.outcome {
        LayoutOutcome::Fits(figures) => figures.nodes[0].kv_per_token.full_bytes,
        LayoutOutcome::Breaks { .. } => 0,
    };
    assert!(per_token == 0 || per_token == 749_568, "{per_token}");
    assert!(unlatent.notes.iter().any(|n| n.contains("VLLM_MLA_DISABLE=1")), "{:?}", unlatent.notes);
}

#[test]
fn plans_serialize_every_size_in_bytes() {
    let shape = with_weights(fixtures::QWEN3_32B);
    let fit = planned(&shape, &nodes(2, 120), &roce());
    let json = serde_json::to_value(&fit).expect("json");
    assert_eq!(json["layouts"][1]["outcome"]["outcome"], "fits");
    assert_eq!(json["layouts"][1]["outcome"]["context_tokens"], 40_960);
    let back: Fit = serde_json::from_value(json).expect("back");
    assert_eq!(back, fit);
}

#[test]
fn an_asked_context_is_the_ceiling_and_what_every_layout_must_hold() {
    let shape = with_weights(fixtures::QWEN3_32B);
    let mut rules = VllmRules::new(&shape, None, rocm()).expect("rules");
    rules.asked_context = Some(16_384);
    let asked = fit(&shape, &nodes(2, 120), &roce(), &rules);
    let figures = asked.chosen_layout().and_then(Layout::fits).expect("it fits");
    // 16,384 tokens, the cache still all the memory (42,745 blocks): 1,024 blocks a request,
    // 41.74 of them at once.
    assert_eq!((figures.context_tokens, figures.kv_cache_bytes()), (16_384, 42_745 * 2_097_152));
    assert_eq!(figures.limited_by, "the 16384 tokens asked");
    assert_eq!(figures.cache.as_ref().map(|c| c.max_concurrency.as_str()), Some("41.74"));
    // Two nodes of 40 GiB GTT hold the weights at TP 2 (30.5 GiB each), leaving 36 - 2 GiB less
    // 32,762,795,008 bytes = 3,744,427,008 for the cache: 1,785 blocks, 1,784 besides the null
    // block, requests of 28,544 tokens, short of the 40,960 asked.
    rules.asked_context = Some(40_960);
    let tight = fit(&shape, &nodes(2, 40), &roce(), &rules);
    let tp2 = tight.layout(2, 1, 1, false).expect("TP 2");
    let LayoutOutcome::Breaks { rules: broken, .. } = &tp2.outcome else { panic!("the cache is short: {tp2:?}") };
    assert_eq!(rules_of(broken), vec![Rule::Context]);
    assert!(
        broken[0].message.contains("1785 blocks") && broken[0].message.contains("28544 tokens"),
        "{}",
        broken[0].message
    );
    assert!(broken[0].message.contains("fewer than the 40960"), "{}", broken[0].message);
    let refusal = tight.refusal.expect("refused");
    assert!(refusal.message.contains("a cache of 40960 tokens"), "{}", refusal.message);
    // More than the model's own: the model's, said so.
    rules.asked_context = Some(1 << 40);
    let capped = fit(&shape, &nodes(2, 120), &roce(), &rules);
    assert_eq!(capped.chosen_layout().and_then(Layout::fits).map(|f| f.context_tokens), Some(40_960));
    assert!(capped.notes.iter().any(|n| n.contains("more than the model's own 40960")), "{:?}", capped.notes);
}

#[test]
fn a_context_the_memory_sets_leaves_one_request_beside_the_null_block() {
    // Llama-3.3-70B on two 80 GiB nodes at TP 2: the memory, not the model's 131,072, sets the
    // context: the blocks but the null block, 16 tokens each.
    let shape = with_weights(fixtures::LLAMA_3_3_70B);
    let fit = planned(&shape, &nodes(2, 80), &roce());
    let figures = fit.chosen_layout().and_then(Layout::fits).expect("it fits");
    assert!(figures.limited_by.starts_with("the memory of"), "{}", figures.limited_by);
    let cache = figures.cache.as_ref().expect("vLLM's figures");
    assert_eq!(figures.context_tokens, (cache.blocks - 1) * 16);
    assert_eq!((cache.blocks_per_request, cache.max_concurrency.as_str()), (cache.blocks - 1, "1.00"));
    assert!(figures.nodes.iter().all(|n| n.context_tokens >= figures.context_tokens));
}
