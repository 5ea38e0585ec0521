use super::*;
use crate::model::shape::fixtures::{self, shape_of};
use crate::model::shape::weights::{LayerWeights, WeightSource};

fn roce() -> Transport {
    Transport::Roce { device: "rocep194s0f0".into(), port: 1, netdev: "enp194s0np0".into(), gid_index: 1 }
}

#[test]
fn kv_heads_split_then_replicate() {
    let shape = shape_of(fixtures::LLAMA_3_3_70B);
    let heads: Vec<u64> = [1, 2, 4, 8, 16].iter().map(|&tp| kv_heads_on_rank(&shape, tp)).collect();
    assert_eq!(heads, vec![8, 4, 2, 1, 1]);
}

#[test]
fn weights_on_a_node_by_hand() {
    let mut shape = shape_of(fixtures::QWEN3_235B_A22B);
    shape.layers = 2;
    let layer = LayerWeights { split_bytes: 1000, kv_bytes: 400, expert_bytes: 12_800, replicated_bytes: 10 };
    let weights = Weights {
        source: WeightSource::Headers,
        total_bytes: 0,
        tensors: 0,
        embedding_bytes: 600,
        output_bytes: 602,
        layers: vec![layer; 2],
        other_bytes: 0,
        skipped_bytes: 0,
        output_head: true,
    };
    let tp8 = Placement {
        stage: 0,
        rank: 0,
        layers: 0..2,
        tp: 8,
        experts: ExpertCut::Width(8),
        embedding: true,
        output: false,
        tied_output: false,
        beside_layers: false,
    };
    // TP 8 with 4 KV heads: the split part /8 = 125, the KV projections /4 (one head a rank,
    // replicated) = 100, replicated 10, experts /8 = 1600: 1835 a layer, 3670 for two; embedding /8 = 75.
    assert_eq!(weights_on(&shape, &weights, &tp8), 3670 + 75);
    // Expert parallel over 3 ranks: the busiest holds ceil(128 / 3) = 43 of 128 experts:
    // 12,800 × 43 / 128 = 4300 a layer; attention whole at TP 1: 1000 + 400 + 10.
    let ep = Placement { tp: 1, experts: ExpertCut::Whole { ranks: 3 }, embedding: false, output: true, ..tp8 };
    assert_eq!(weights_on(&shape, &weights, &ep), 2 * (1410 + 4300) + 602);
}

#[test]
fn the_link_orders_the_layouts() {
    let fits = |tp, pp, dp, expert_parallel| Layout {
        tp,
        pp,
        dp,
        expert_parallel,
        outcome: LayoutOutcome::Fits(LayoutFigures {
            nodes: Vec::new(),
            context_tokens: 4096,
            limited_by: String::new(),
            cache: None,
        }),
    };
    let breaks = |tp, pp| Layout {
        tp,
        pp,
        dp: 1,
        expert_parallel: false,
        outcome: LayoutOutcome::Breaks {
            rules: vec![Broken { rule: Rule::AttentionHeads, message: "heads".into() }],
            needs_bytes: None,
        },
    };
    let four = vec![fits(1, 4, 1, false), fits(2, 2, 1, false), fits(4, 1, 1, false), fits(1, 1, 4, true)];
    let tcp = Transport::ThunderboltTcp { netdev: "thunderbolt0".into() };
    assert_eq!(choose(&four, &roce(), 4).map(|c| c.layout), Some(2), "RoCE: tensor parallel 4");
    assert_eq!(choose(&four, &tcp, 4).map(|c| c.layout), Some(0), "TCP: pipeline parallel 4");
    let no_tp = vec![breaks(4, 1), fits(2, 2, 1, false), fits(1, 4, 1, false), fits(1, 1, 4, true)];
    let chosen = choose(&no_tp, &roce(), 4).expect("a layout");
    assert_eq!(chosen.layout, 3, "RoCE, TP 4 broken: expert parallel before mixed");
    assert!(chosen.why.contains("expert parallel") && chosen.why.contains("TP 4 × PP 1: heads"), "{}", chosen.why);
    let dense = vec![breaks(4, 1), fits(2, 2, 1, false), fits(1, 4, 1, false)];
    assert_eq!(choose(&dense, &roce(), 4).map(|c| c.layout), Some(1), "then the most tensor parallel");
    assert_eq!(choose(&[breaks(4, 1)], &roce(), 4), None);
}

#[test]
fn a_refusal_says_what_is_needed_and_what_there_is() {
    let nodes = vec![NodeMemory::new("a", 100 << 30, 0, 4 << 30), NodeMemory::new("b", 90 << 30, 0, 4 << 30)];
    let memory = Layout {
        tp: 2,
        pp: 1,
        dp: 1,
        expert_parallel: false,
        outcome: LayoutOutcome::Breaks {
            rules: vec![Broken { rule: Rule::Memory, message: "a: too big".into() }],
            needs_bytes: Some(240 << 30),
        },
    };
    let refusal = refusal(&[memory], &nodes, 4096);
    assert_eq!((refusal.needs_bytes, refusal.has_bytes), (240 << 30, 86 << 30));
    assert!(
        refusal.message.contains("needs 240.00 GiB per node") && refusal.message.contains("86.00 GiB"),
        "{}",
        refusal.message
    );
    assert!(refusal.fix.contains("quantized") && refusal.fix.contains("--max-model-len"), "{}", refusal.fix);
}
