use super::*;
use crate::model::shape::fixtures::{self, shape_of, with_weights};
use crate::model::shape::{gguf, Sizing};
use crate::serving::fit::{kv_heads_on_rank, llama_log, weights_on, KvPerToken};

const GIB: u64 = 1 << 30;

#[test]
fn layers_go_to_devices_as_llama_cpp_assigns_them() {
    // -ts 3,1 on a 6-layer model: split points 0.75 and 1 over 7 slots (6 layers and the output):
    // il / 7 < 0.75 for il ≤ 5, so every layer on the first device and the output on the second,
    // as the real llama-server's log shows (2.25 MiB of layers, 11.72 MiB of output).
    assert_eq!(layer_devices(6, &[3, 1]), vec![0, 0, 0, 0, 0, 0, 1]);
    // Even: 3/7 < 0.5 ≤ 4/7.
    assert_eq!(layer_devices(6, &[1, 1]), vec![0, 0, 0, 0, 1, 1, 1]);
    assert_eq!(layer_devices(2, &[1]), vec![0, 0, 0]);
    assert_eq!(layer_devices(2, &[0, 0]), vec![0, 0, 0], "no memory anywhere: all on the first");
}

#[test]
fn the_plan_of_the_tiny_llama_matches_what_llama_server_said() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = fixtures::tiny_llama(dir.path(), 6);
    let bytes = std::fs::read(&path).expect("the GGUF");
    let header = gguf::parse(&bytes).expect("its header");
    let Ok(Sizing::Sized(shape)) = gguf::shape(&header, &[]) else { panic!("sized") };
    let weights = shape.weights.clone().expect("weights");
    // The run in tests/fixtures/engine-logs: two RPC servers, -ts 3,1, -c 2048, the head on the CPU.
    let said = llama_log::parse(include_str!("../../../../tests/fixtures/engine-logs/llama-server-rpc-ts-3-1.log"));
    let places = placements(&shape, 2, None, &[3, 1]);
    let f16 = LlamaRules::default().kv_cache_dtype;
    for (place, device) in places.iter().zip(["RPC0[127.0.0.1:50152]", "RPC0[127.0.0.1:50153]"]) {
        let buffers = said.device(device).expect("the device's lines");
        let planned = weights_on(&shape, &weights, place);
        // llama.cpp prints MiB with two decimals: within 0.005 MiB.
        assert!(
            planned.abs_diff(buffers.model_bytes) <= 5243,
            "{device}: planned {planned}, said {}",
            buffers.model_bytes
        );
        let cache = KvPerToken::of(&shape, place.layers.clone(), kv_heads_on_rank(&shape, 1), &f16).bytes_at(2048, 0);
        assert_eq!(cache, buffers.kv_bytes, "{device}");
    }
    // 6 layers × 393,984 = 2,363,904 bytes (2.25 MiB), the output 12,288,384 (11.72 MiB); the cache
    // 6 layers × 2 KV heads × 16 × 2 (K, V) × 2 bytes × 2048 cells = 1,572,864.
    assert_eq!(weights_on(&shape, &weights, &places[0]), 2_363_904);
    // The token embedding is the CPU's (llama.cpp keeps the input layer there).
    let cpu = said.device("CPU_Mapped").expect("the CPU's weights");
    assert!(
        weights.embedding_bytes.abs_diff(cpu.model_bytes) <= 5243,
        "{} {}",
        weights.embedding_bytes,
        cpu.model_bytes
    );
}

#[test]
fn three_devices_of_different_memory_split_the_layers_by_it() {
    // Llama-3.3-70B in bf16 on devices whose GTT is 120, 96 and 64 GiB (4 GiB reserved, 1 GiB for the
    // runtime), the head the last (llama.cpp lists its RPC servers first).
    let shape = with_weights(fixtures::LLAMA_3_3_70B);
    let devices = vec![
        NodeMemory::new("node2", 120 * GIB, 0, 4 * GIB),
        NodeMemory::new("node3", 96 * GIB, 0, 4 * GIB),
        NodeMemory::new("node1", 64 * GIB, 0, 4 * GIB),
    ];
    let rules = LlamaRules::default();
    // Room in MiB: 115, 91 and 59 GiB; the head's less the embedding (128256 × 8192 × 2 bytes = 2004 MiB).
    let split = tensor_split(&devices, Some(2), 2_101_346_304, rules.runtime_bytes);
    assert_eq!(split, vec![117_760, 93_184, 60_416 - 2004]);
    let fit = fit(&shape, &devices, Some(2), &rules);
    let figures = fit.chosen_layout().and_then(Layout::fits).expect("it fits");
    // 81 slots; split points 117,760 / 269,356 = 0.437 and 210,944 / 269,356 = 0.783: layers 0-35 on
    // the first device (35 / 81 < 0.437 ≤ 36 / 81), 36-63 on the second, 64-79 and the output on the third.
    let layers: Vec<(u32, u32)> = figures.nodes.iter().map(|n| (n.first_layer, n.layers)).collect();
    assert_eq!(layers, vec![(0, 36), (36, 28), (64, 16)]);
    // 1,711,308,800 bytes a layer; the third also the head and norm (2,101,362,688) and the embedding.
    assert_eq!(figures.nodes[0].weights_bytes, 36 * 1_711_308_800);
    assert_eq!(figures.nodes[2].weights_bytes, 16 * 1_711_308_800 + 2_101_362_688 + 2_101_346_304);
    // f16 cache: 8 KV heads × 128 × 2 × 2 = 4,096 bytes a layer and token.
    let per_token: Vec<u64> = figures.nodes.iter().map(|n| n.kv_per_token.full_bytes).collect();
    assert_eq!(per_token, vec![36 * 4096, 28 * 4096, 16 * 4096]);
    assert_eq!(figures.context_tokens, 131_072);
    assert_eq!(fit.engine_args.join(" "), "--tensor-split 117760,93184,58412 -c 131072");
}

#[test]
fn a_context_that_does_not_reach_the_models_is_a_multiple_of_256() {
    let shape = with_weights(fixtures::LLAMA_3_3_70B);
    // One device of 150 GiB GTT: 150 - 4 reserved - 1 for the runtime = 145 GiB = 155,692,564,480
    // bytes of room; all the weights (the embedding on this, the head's, host too) 141,107,412,992;
    // free 14,585,151,488 / (80 layers × 4,096) = 44,510 tokens, down to a multiple of 256: 44,288.
    let devices = vec![NodeMemory::new("node1", 150 * GIB, 0, 4 * GIB)];
    let fit = fit(&shape, &devices, Some(0), &LlamaRules::default());
    let figures = fit.chosen_layout().and_then(Layout::fits).expect("it fits");
    assert_eq!(figures.nodes[0].weights_bytes, 141_107_412_992);
    assert_eq!(figures.nodes[0].context_tokens, 44_510);
    assert_eq!(figures.context_tokens, 44_288);
    assert_eq!(fit.engine_args, vec!["-c", "44288"]);
}

#[test]
fn too_little_memory_is_refused() {
    let shape = with_weights(fixtures::LLAMA_3_3_70B);
    let devices = vec![NodeMemory::new("a", 48 * GIB, 0, 4 * GIB), NodeMemory::new("b", 48 * GIB, 0, 4 * GIB)];
    let fit = fit(&shape, &devices, Some(1), &LlamaRules::default());
    assert!(fit.chosen.is_none() && fit.engine_args.is_empty());
    let refusal = fit.refusal.expect("refused");
    assert!(refusal.message.contains("44.00 GiB usable"), "{}", refusal.message);
}

#[test]
fn sliding_layers_keep_their_window_for_every_slot() {
    // gpt-oss: 128 × 4 slots + 512 = 1024 cells.
    let shape = shape_of(fixtures::GPT_OSS_120B);
    assert_eq!(window_tokens(&shape, &LlamaRules::default()), 1024);
    assert_eq!(window_tokens(&shape_of(fixtures::QWEN3_32B), &LlamaRules::default()), 0);
}
