use super::*;
use crate::model::shape::fixtures::{self, shape_of};
use crate::model::shape::weights::Weights;

fn sized(json: &str) -> ModelShape {
    match parse(json.as_bytes()) {
        Ok(Sizing::Sized(shape)) => *shape,
        other => panic!("expected a shape: {other:?}"),
    }
}

fn cannot(json: &str) -> String {
    match parse(json.as_bytes()) {
        Ok(Sizing::CannotSize { why, .. }) => why,
        other => panic!("expected 'cannot size': {other:?}"),
    }
}

#[test]
fn qwen3_32b_as_published() {
    let shape = shape_of(fixtures::QWEN3_32B);
    assert_eq!(shape.architecture, "Qwen3ForCausalLM");
    assert_eq!((shape.layers, shape.hidden_size, shape.attention_heads, shape.kv_heads), (64, 5120, 64, 8));
    assert_eq!((shape.head_dim, shape.v_head_dim, shape.intermediate_size), (128, 128, 25600));
    assert_eq!((shape.vocab_size, shape.max_context), (151936, 40960));
    assert_eq!(shape.dtype.as_deref(), Some("bfloat16"));
    assert!(!shape.tied_embeddings);
    // `use_sliding_window: false`: no layer slides although max_window_layers is set.
    assert_eq!((shape.sliding, shape.moe, shape.mla, shape.quantization), (None, None, None, None));
}

#[test]
fn llama_3_3_70b_as_published() {
    let shape = shape_of(fixtures::LLAMA_3_3_70B);
    assert_eq!((shape.layers, shape.hidden_size, shape.attention_heads, shape.kv_heads), (80, 8192, 64, 8));
    assert_eq!((shape.head_dim, shape.intermediate_size, shape.vocab_size), (128, 28672, 128256));
    assert_eq!(shape.max_context, 131072);
}

#[test]
fn qwen3_235b_is_a_mixture_of_experts() {
    let shape = shape_of(fixtures::QWEN3_235B_A22B);
    let moe = shape.moe.clone().expect("experts");
    assert_eq!((moe.experts, moe.experts_per_token, moe.expert_width, moe.shared_width), (128, 8, 1536, 0));
    assert!(moe.dense_layers.is_empty(), "decoder_sparse_step 1 and no mlp_only_layers: every layer routes");
    assert_eq!((shape.layers, shape.attention_heads, shape.kv_heads), (94, 64, 4));
}

#[test]
fn gpt_oss_120b_has_mxfp4_experts_and_sliding_layers() {
    let shape = shape_of(fixtures::GPT_OSS_120B);
    let moe = shape.moe.clone().expect("experts");
    // num_local_experts and experts_per_token / num_experts_per_tok: gpt-oss' names.
    assert_eq!((moe.experts, moe.experts_per_token, moe.expert_width), (128, 4, 2880));
    let quantization = shape.quantization.clone().expect("quantization_config");
    assert_eq!(quantization.method, "mxfp4");
    let sliding = shape.sliding.clone().expect("layer_types");
    assert_eq!(sliding.window, 128);
    // layer_types: 18 × [sliding, full]: the even layers slide.
    assert_eq!(sliding.layers, (0..36).filter(|l| l % 2 == 0).collect::<Vec<u32>>());
    assert!(shape.is_sliding(0) && !shape.is_sliding(1));
    assert_eq!((shape.head_dim, shape.kv_heads, shape.dtype.clone()), (64, 8, None));
}

#[test]
fn deepseek_v3_has_latent_attention_dense_first_layers_and_fp8_blocks() {
    let shape = shape_of(fixtures::DEEPSEEK_V3);
    let mla = shape.mla.clone().expect("MLA");
    assert_eq!((mla.kv_lora_rank, mla.qk_rope_head_dim, mla.qk_nope_head_dim, mla.v_head_dim), (512, 64, 128, 128));
    assert_eq!(mla.q_lora_rank, Some(1536));
    assert_eq!((shape.head_dim, shape.v_head_dim), (192, 128));
    let moe = shape.moe.clone().expect("experts");
    assert_eq!((moe.experts, moe.experts_per_token, moe.expert_width, moe.shared_width), (256, 8, 2048, 2048));
    assert_eq!(moe.dense_layers, vec![0, 1, 2], "first_k_dense_replace: 3");
    let quantization = shape.quantization.clone().expect("fp8");
    assert_eq!((quantization.method.as_str(), quantization.block), ("fp8", Some([128, 128])));
}

#[test]
fn hybrid_and_unknown_models_are_not_guessed() {
    let why = cannot(fixtures::QWEN3_NEXT_80B);
    assert!(why.contains("Qwen3NextForCausalLM") && why.contains("hybrid"), "{why}");
    // A hybrid by its keys, whatever it is called.
    let why = cannot(r#"{"architectures": ["LlamaForCausalLM"], "full_attention_interval": 4}"#);
    assert!(why.contains("full_attention_interval"), "{why}");
    let why =
        cannot(r#"{"architectures": ["LlamaForCausalLM"], "layer_types": ["linear_attention", "full_attention"]}"#);
    assert!(why.contains("linear_attention"), "{why}");
    let why = cannot(r#"{"architectures": ["NemotronHForCausalLM"]}"#);
    assert!(why.contains("hybrid"), "{why}");
    let why = cannot(r#"{"architectures": ["FancyNewForCausalLM"], "num_hidden_layers": 2}"#);
    assert!(why.contains("FancyNewForCausalLM") && why.contains("knows how to size"), "{why}");
    let why = cannot(r#"{"architectures": ["DeepseekV3ForCausalLM"], "index_topk": 2048}"#);
    assert!(why.contains("indexer"), "{why}");
}

#[test]
fn a_multimodal_config_is_read_from_its_text_config() {
    let json = r#"{
        "architectures": ["Gemma3ForConditionalGeneration"],
        "text_config": {"hidden_size": 5376, "num_hidden_layers": 62, "num_attention_heads": 32,
            "num_key_value_heads": 16, "head_dim": 128, "intermediate_size": 21504, "vocab_size": 262208,
            "max_position_embeddings": 131072, "sliding_window": 1024, "sliding_window_pattern": 6},
        "vision_config": {"hidden_size": 1152, "num_hidden_layers": 27},
        "torch_dtype": "bfloat16"
    }"#;
    let shape = sized(json);
    assert_eq!((shape.layers, shape.hidden_size, shape.kv_heads), (62, 5376, 16));
    assert!(shape.tied_embeddings, "Gemma ties its embeddings unless it says otherwise");
    let sliding = shape.sliding.expect("Gemma 3 slides");
    // Every 6th layer is global: layers 5, 11, ... 59; 62 - 10 = 52 slide.
    assert_eq!(sliding.layers.len(), 52);
    assert!(!sliding.layers.contains(&5) && sliding.layers.contains(&4) && sliding.layers.contains(&61));
}

#[test]
fn gemma_3s_multimodal_configs_lean_on_transformers_defaults() {
    // gemma-3-27b-it as published: its text_config names no vocab_size or max_position_embeddings;
    // transformers' Gemma3TextConfig fills in 262,208 and 131,072.
    let shape = sized(fixtures::GEMMA_3_27B_IT);
    assert_eq!((shape.vocab_size, shape.max_context), (262_208, 131_072));
    assert_eq!((shape.attention_heads, shape.kv_heads, shape.head_dim), (32, 16, 128), "its own where it names them");
    assert_eq!(shape.sliding.as_ref().map(|s| (s.window, s.layers.len())), Some((1024, 52)));
    // gemma-3-4b-it's text_config names even fewer: 8 heads, 4 KV heads of 256 from the defaults
    // (not hidden_size / heads = 320).
    let four_b = sized(
        r#"{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
            "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
            "torch_dtype": "bfloat16"}"#,
    );
    assert_eq!((four_b.attention_heads, four_b.kv_heads, four_b.head_dim), (8, 4, 256));
    assert_eq!((four_b.vocab_size, four_b.max_context, four_b.layers), (262_208, 131_072, 34));
    // Another family gets no Gemma defaults: a Llama without a vocabulary is refused.
    let error = parse(
        br#"{"architectures": ["LlamaForCausalLM"], "hidden_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "max_position_embeddings": 4096}"#,
    );
    assert!(matches!(error, Err(HeaderError::Invalid { .. })), "{error:?}");
}

#[test]
fn quantization_configs_as_their_tools_write_them() {
    let base = |quantization: &str| {
        format!(
            r#"{{"architectures": ["Qwen2ForCausalLM"], "hidden_size": 5120, "num_hidden_layers": 64,
            "num_attention_heads": 40, "num_key_value_heads": 8, "intermediate_size": 27648, "vocab_size": 152064,
            "max_position_embeddings": 32768, "quantization_config": {quantization}}}"#
        )
    };
    let gptq = sized(&base(r#"{"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": false}"#));
    let q = gptq.quantization.expect("gptq");
    assert_eq!((q.method.as_str(), q.bits, q.group_size), ("gptq", Some(4), Some(128)));
    let per_channel = sized(&base(r#"{"quant_method": "gptq", "bits": 8, "group_size": -1}"#));
    assert_eq!(per_channel.quantization.expect("gptq").group_size, None);
    let awq = sized(&base(r#"{"quant_method": "awq", "w_bit": 4, "q_group_size": 64, "zero_point": true}"#));
    let q = awq.quantization.expect("awq");
    assert_eq!((q.bits, q.group_size), (Some(4), Some(64)));
    let compressed = sized(&base(
        r#"{"quant_method": "compressed-tensors", "format": "pack-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "group_size": 32,
            "strategy": "group", "type": "int"}}},
            "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor"}}"#,
    ));
    let q = compressed.quantization.expect("compressed-tensors");
    assert_eq!((q.bits, q.group_size, q.kv_cache_dtype.as_deref()), (Some(4), Some(32), Some("fp8")));
}

#[test]
fn absurd_numbers_are_refused() {
    let with = |field: &str| {
        format!(
            r#"{{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_attention_heads": 32,
            "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
            "max_position_embeddings": 8192, {field}}}"#
        )
    };
    for (field, says) in [
        (r#""num_hidden_layers": -1"#, "is not a count"),
        (r#""num_hidden_layers": 1e30"#, "is not a count"),
        (r#""num_hidden_layers": 9223372036854775807"#, "claims"),
        (r#""num_hidden_layers": 0"#, "is 0"),
        (r#""num_hidden_layers": 2.5"#, "is not a count"),
        (r#""num_hidden_layers": "32""#, "is not a count"),
    ] {
        let error = parse(with(field).as_bytes()).expect_err(field);
        assert!(error.to_string().contains(says), "{field}: {error}");
    }
    let fine = sized(&with(r#""num_hidden_layers": 32.0"#));
    assert_eq!(fine.layers, 32, "an integral float is a count");
    assert!(parse(&vec![b' '; (CONFIG_LIMIT + 1) as usize]).is_err());
    assert!(parse(b"[1, 2]").is_err());
    assert!(parse(b"{").is_err());
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    assert!(parse(deep.as_bytes()).is_err(), "serde_json's recursion limit refuses deep nesting");
    let kv = with(r#""num_hidden_layers": 2, "num_key_value_heads": 64"#);
    assert!(parse(kv.as_bytes()).is_err(), "more KV heads than heads");
}

#[test]
fn weights_estimated_from_the_config_match_the_hand_count() {
    // Qwen3-32B without q_norm/k_norm (the estimate does not know them), bf16:
    //   per layer: q 8192×5120 + o 5120×8192 = 83,886,080; k, v 1024×5120 ×2 = 10,485,760;
    //   MLP 3 × 25600×5120 = 393,216,000; norms 2 × 5120 = 10,240 → 487,598,080 parameters.
    //   64 layers = 31,206,277,120; embedding and head 151936×5120 ×2 = 1,555,824,640; final norm 5120.
    //   Total 32,762,106,880 parameters × 2 bytes = 65,524,213,760 bytes.
    let weights = Weights::estimated(&shape_of(fixtures::QWEN3_32B));
    assert_eq!(weights.total_bytes, 65_524_213_760);
    assert_eq!(weights.layers[0].kv_bytes, 20_971_520);
    assert_eq!(weights.layers[0].split_bytes, (83_886_080 + 393_216_000) * 2);
    // gpt-oss-120b's experts at 4.25 bits: 128 × 3 × 2880 × 2880 = 3,185,049,600 parameters a layer,
    // × 17/32 bytes = 1,692,057,600 bytes.
    let weights = Weights::estimated(&shape_of(fixtures::GPT_OSS_120B));
    assert_eq!(weights.layers[0].expert_bytes, 1_692_057_600);
}
