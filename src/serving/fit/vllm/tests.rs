use super::*;
use crate::model::shape::fixtures::{self, shape_of, with_weights};
use crate::model::shape::{config, Sizing};

const GIB: u64 = 1 << 30;

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

fn planned(shape: &ModelShape, nodes: &[NodeMemory], transport: &Transport) -> Plan {
    plan(shape, nodes, transport, &VllmRules::new(shape, None).expect("rules"))
}

fn rules_of(broken: &[Broken]) -> Vec<Rule> {
    broken.iter().map(|b| b.rule).collect()
}

#[test]
fn three_roce_nodes_never_ask_for_tensor_parallel_3_of_a_64_head_model() {
    let shape = with_weights(fixtures::QWEN3_32B);
    let plan = planned(&shape, &nodes(3, 120), &roce());
    let tp3 = plan.layout(3, 1, 1, false).expect("TP 3 is listed");
    let Outcome::Breaks { rules, .. } = &tp3.outcome else { panic!("TP 3 must break: {tp3:?}") };
    // 64 heads and 8 KV heads over 3 ranks, and an MLP of 25600.
    assert_eq!(rules_of(rules), vec![Rule::AttentionHeads, Rule::KvHeads, Rule::Width]);
    assert!(rules[0]
        .message
        .contains("Total number of attention heads (64) must be divisible by tensor parallel size (3)"));
    let chosen = plan.chosen_layout().expect("a layout");
    assert_eq!((chosen.tp, chosen.pp), (1, 3));
    assert!(!plan.engine_args.windows(2).any(|w| w[0] == "--tensor-parallel-size" && w[1] == "3"));
    assert!(plan.engine_args.windows(2).any(|w| w[0] == "--pipeline-parallel-size" && w[1] == "3"));
    // 64 layers over 3 stages: 21 each, the one left to the stage before the last.
    let figures = chosen.fits().expect("figures");
    let layers: Vec<u32> = figures.nodes.iter().map(|n| n.layers).collect();
    assert_eq!(layers, vec![21, 22, 21]);
    let why = &plan.chosen.as_ref().expect("chosen").why;
    assert!(why.contains("TP 3 × PP 1: its 64 attention heads"), "{why}");
    let fewer = plan.fewer_nodes.expect("it fits one node");
    assert!(fewer.contains("fits on 1 of the 3 nodes"), "{fewer}");
}

#[test]
fn two_roce_nodes_take_tensor_parallel_and_the_models_own_context() {
    let shape = with_weights(fixtures::QWEN3_32B);
    let plan = planned(&shape, &nodes(2, 120), &roce());
    let chosen = plan.chosen_layout().expect("a layout");
    assert_eq!((chosen.tp, chosen.pp), (2, 1));
    let figures = chosen.fits().expect("figures");
    // Each rank: the embedding and the head cut in two, 777,912,320 and 777,917,440 (with the
    // final norm); each layer's query, output and MLP halved (954,204,160 / 2), its 8 KV heads
    // four a rank (20,971,520 / 2), its norms whole (20,992): 487,608,832 × 64 = 31,206,965,248.
    // Total 32,762,795,008 bytes.
    assert!(figures.nodes.iter().all(|n| n.weights_bytes == 32_762_795_008), "{figures:?}");
    // The cache: 4 KV heads of 128, K and V, bf16 = 2,048 bytes a layer, 131,072 a token. The
    // 116 GiB usable less 2 GiB for the runtime less the weights leave 89,643,772,928 bytes:
    // 683,927 tokens, more than the model's 40,960.
    assert_eq!(figures.nodes[0].kv_per_token.full_bytes, 131_072);
    assert_eq!(figures.nodes[0].context_tokens, 683_927);
    assert_eq!(figures.context_tokens, 40_960);
    assert_eq!(figures.limited_by, "the model's own maximum");
    // At 40,960 tokens: 5 GiB of cache a node.
    assert_eq!(figures.kv_cache_bytes(), 5 * GIB);
    let args = plan.engine_args.join(" ");
    assert_eq!(
        args,
        "--tensor-parallel-size 2 --pipeline-parallel-size 1 --max-model-len 40960 --kv-cache-memory-bytes 5368709120"
    );
    assert_eq!(plan.kv_cache_dtype.name, "bfloat16");
    assert!(plan.kv_cache_dtype.why.contains("auto"), "{}", plan.kv_cache_dtype.why);
}

#[test]
fn thunderbolt_splits_the_layers_instead() {
    let shape = with_weights(fixtures::LLAMA_3_3_70B);
    let plan = planned(&shape, &nodes(2, 120), &thunderbolt());
    let chosen = plan.chosen_layout().expect("a layout");
    assert_eq!((chosen.tp, chosen.pp), (1, 2));
    assert!(plan.chosen.as_ref().is_some_and(|c| c.why.contains("Thunderbolt TCP")), "{:?}", plan.chosen);
    let figures = chosen.fits().expect("figures");
    // A layer in bf16: q and o 8192² each, k and v 1024 × 8192 each, the MLP 3 × 28672 × 8192, two
    // norms of 8192: 855,654,400 parameters, 1,711,308,800 bytes; 40 a stage = 68,452,352,000.
    // Stage 0 adds the embedding, 128256 × 8192 × 2 = 2,101,346,304; stage 1 the head and the norm.
    assert_eq!(figures.nodes[0].weights_bytes, 68_452_352_000 + 2_101_346_304);
    assert_eq!(figures.nodes[1].weights_bytes, 68_452_352_000 + 2_101_346_304 + 16_384);
    // 40 layers × 8 KV heads × 128 × 2 (K, V) × 2 bytes = 163,840 a token; at the model's 131,072
    // tokens 20 GiB a node.
    assert_eq!(figures.nodes[1].kv_per_token.full_bytes, 163_840);
    assert_eq!((figures.context_tokens, figures.kv_cache_bytes()), (131_072, 20 * GIB));
}

#[test]
fn a_model_too_big_for_the_nodes_is_refused_with_the_numbers() {
    // Qwen3-235B-A22B in bf16 (470 GB) on two 120 GiB nodes.
    let shape = with_weights(fixtures::QWEN3_235B_A22B);
    let total = shape.weights.as_ref().map_or(0, |w| w.total_bytes);
    assert!(total > 470_000_000_000, "{total}");
    let plan = planned(&shape, &nodes(2, 120), &roce());
    assert!(plan.chosen.is_none() && plan.engine_args.is_empty());
    let refusal = plan.refusal.expect("refused");
    assert_eq!(refusal.has_bytes, 116 * GIB);
    // The least demanding layout holds at least half the weights on a node.
    assert!(refusal.needs_bytes > total / 2 && refusal.needs_bytes < total / 2 + 8 * GIB, "{}", refusal.needs_bytes);
    assert!(
        refusal.message.contains("GiB per node") && refusal.message.contains("116.0 GiB usable"),
        "{}",
        refusal.message
    );
    assert!(plan
        .layouts
        .iter()
        .all(|l| matches!(&l.outcome, Outcome::Breaks { rules, .. } if rules.iter().any(|r| r.rule == Rule::Memory))));
}

#[test]
fn gpt_oss_keeps_its_sliding_layers_to_the_window_and_a_batch() {
    let shape = with_weights(fixtures::GPT_OSS_120B);
    let rules = VllmRules::new(&shape, None).expect("rules");
    // (128 - 1 + 8192) / 16 rounded up = 520 blocks, one more: 521 × 16 = 8,336 tokens.
    assert_eq!(window_tokens(&shape, &rules), 8_336);
    assert!(rules.kv_cache_dtype.why.contains("names no dtype"), "{}", rules.kv_cache_dtype.why);
    let plan = plan(&shape, &nodes(1, 120), &roce(), &rules);
    let figures = plan.chosen_layout().and_then(Layout::fits).expect("it fits one node");
    // 18 full layers and 18 sliding, 2,048 bytes a token each; at 131,072 tokens:
    // 36,864 × 131,072 + 36,864 × 8,336 = 4,831,838,208 + 307,298,304 = 5,139,136,512 bytes.
    assert_eq!(figures.context_tokens, 131_072);
    assert_eq!(figures.kv_cache_bytes(), 5_139_136_512);
    // The MXFP4 experts: 36 layers × 1,694,269,440 bytes, whole on one node.
    assert!(figures.nodes[0].weights_bytes > 36 * 1_694_269_440);
}

#[test]
fn deepseek_v3_is_sized_by_its_latent_cache() {
    let shape = with_weights(fixtures::DEEPSEEK_V3);
    let plan = planned(&shape, &nodes(8, 120), &roce());
    let chosen = plan.chosen_layout().expect("a layout");
    assert_eq!((chosen.tp, chosen.pp, chosen.expert_parallel), (8, 1, false));
    let figures = chosen.fits().expect("figures");
    // 61 layers × (512 + 64) × 2 bytes = 70,272 a token on every rank, whatever the TP; at the
    // model's 163,840 tokens 11,513,364,480 bytes.
    assert!(figures.nodes.iter().all(|n| n.kv_per_token.full_bytes == 70_272));
    assert_eq!((figures.context_tokens, figures.kv_cache_bytes()), (163_840, 11_513_364_480));
    // The MTP layer is not loaded: the weights on a node are under an eighth of the checkpoint's.
    let weights = shape.weights.as_ref().expect("weights");
    assert!(figures.nodes[0].weights_bytes * 8 < weights.total_bytes, "{figures:?}");
    assert!(weights.skipped_bytes > 0);
}

#[test]
fn expert_parallel_deals_the_experts_out() {
    let shape = with_weights(fixtures::QWEN3_235B_A22B);
    let plan = planned(&shape, &nodes(4, 128), &roce());
    let ep = plan.layout(1, 1, 4, true).expect("EP over DP 4").fits().expect("it fits");
    let tp4 = plan.layout(4, 1, 1, false).expect("TP 4").fits().expect("it fits");
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
    assert_eq!(plan.chosen_layout().map(|l| (l.tp, l.expert_parallel)), Some((4, false)));
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
    let plan = planned(&shape, &nodes(4, 16), &roce());
    let Outcome::Breaks { rules, .. } = &plan.layout(1, 4, 1, false).expect("PP 4").outcome else { panic!("PP 4") };
    assert!(rules.iter().any(|r| r.rule == Rule::Layers && r.message.contains("its 2 layers")), "{rules:?}");
    let Outcome::Breaks { rules, .. } = &plan.layout(1, 1, 4, true).expect("EP 4").outcome else { panic!("EP 4") };
    assert!(rules.iter().any(|r| r.rule == Rule::Experts && r.message.contains("its 2 experts")), "{rules:?}");
    assert_eq!(plan.chosen_layout().map(|l| (l.tp, l.pp)), Some((4, 1)));
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
fn the_cache_dtype_is_named_with_why() {
    let qwen = shape_of(fixtures::QWEN3_32B);
    let fp8 = kv_cache_dtype(&qwen, Some("fp8")).expect("fp8");
    assert_eq!((fp8.block_bytes, fp8.why.as_str()), (1, "--kv-cache-dtype fp8"));
    assert_eq!(kv_cache_dtype(&qwen, Some("auto")).expect("auto").name, "bfloat16");
    let error = kv_cache_dtype(&qwen, Some("q4")).expect_err("unknown");
    assert!(matches!(error, Error::Usage(_)) && error.to_string().contains("Fix:"), "{error}");
}

#[test]
fn plans_serialize_every_size_in_bytes() {
    let shape = with_weights(fixtures::QWEN3_32B);
    let plan = planned(&shape, &nodes(2, 120), &roce());
    let json = serde_json::to_value(&plan).expect("json");
    assert_eq!(json["layouts"][1]["outcome"]["outcome"], "fits");
    assert_eq!(json["layouts"][1]["outcome"]["context_tokens"], 40_960);
    let back: Plan = serde_json::from_value(json).expect("back");
    assert_eq!(back, plan);
}
