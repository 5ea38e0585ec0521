use super::*;
use crate::model::shape::fixtures::{self, GgufBuilder};

/// A small llama-architecture model's header: 2 layers, n_embd 256, 4 heads / 2 KV heads.
fn small_llama() -> GgufBuilder {
    GgufBuilder::default()
        .string("general.architecture", "llama")
        .u32("general.alignment", 32)
        .u32("general.file_type", 15)
        .u32("llama.block_count", 2)
        .u32("llama.context_length", 8192)
        .u32("llama.embedding_length", 256)
        .u32("llama.feed_forward_length", 512)
        .u32("llama.attention.head_count", 4)
        .u32("llama.attention.head_count_kv", 2)
        .f32("llama.rope.freq_base", 10000.0)
        .string_array("tokenizer.ggml.tokens", &["<unk>", "<s>", "</s>", "a", "b"])
        .tensor("token_embd.weight", &[256, 5], 0)
        .tensor("blk.0.attn_q.weight", &[256, 256], 12)
        .tensor("blk.0.attn_k.weight", &[256, 128], 8)
        .tensor("blk.0.attn_v.weight", &[256, 128], 8)
        .tensor("blk.0.attn_norm.weight", &[256], 0)
        .tensor("blk.1.ffn_down.weight", &[512, 256], 14)
        .tensor("output_norm.weight", &[256], 0)
        .tensor("output.weight", &[256, 5], 1)
}

#[test]
fn every_value_type_is_read() {
    let bytes = GgufBuilder::default()
        .raw("u8", 0, &[200])
        .raw("i8", 1, &[0xff])
        .raw("u16", 2, &[1, 2])
        .raw("i16", 3, &(-300i16).to_le_bytes())
        .u32("u32", 7)
        .i32("i32", -7)
        .f32("f32", 0.5)
        .bool("bool", true)
        .string("string", "héllo")
        .u32_array("array", &[1, 2, 3])
        .string_array("strings", &["x", "yz"])
        .u64("u64", u64::MAX)
        .raw("i64", 11, &i64::MIN.to_le_bytes())
        .raw("f64", 12, &1.25f64.to_le_bytes())
        .build();
    let header = parse(&bytes).expect("a header");
    let keys = &header.keys;
    assert_eq!(keys["u8"], Value::Unsigned(200));
    assert_eq!(keys["i8"], Value::Signed(-1));
    assert_eq!(keys["u16"], Value::Unsigned(513));
    assert_eq!(keys["i16"], Value::Signed(-300));
    assert_eq!((keys["u32"].count(), keys["i32"].clone()), (Some(7), Value::Signed(-7)));
    assert_eq!((keys["f32"].clone(), keys["bool"].clone()), (Value::Float(0.5), Value::Bool(true)));
    assert_eq!(keys["string"].as_str(), Some("héllo"));
    let three = Some(vec![Value::Unsigned(1), Value::Unsigned(2), Value::Unsigned(3)]);
    assert_eq!(keys["array"], Value::Array { len: 3, items: three });
    assert_eq!(keys["strings"], Value::Array { len: 2, items: None }, "strings are stepped over, counted");
    assert_eq!((keys["u64"].count(), keys["i64"].count()), (Some(u64::MAX), None));
    assert_eq!(keys["f64"], Value::Float(1.25));
    assert_eq!((header.version, header.tensors.len(), header.data_offset), (3, 0, bytes.len() as u64));
}

#[test]
fn a_small_model_by_hand() {
    let builder = small_llama();
    let header = parse(&builder.build()).expect("a header");
    // Bytes by ggml's block sizes: token_embd F32 256×5×4 = 5120; attn_q Q4_K 65536/256 × 144 = 36,864;
    // attn_k, attn_v Q8_0 32768/32 × 34 = 34,816 each; attn_norm 1024; ffn_down Q6_K 131072/256 × 210 =
    // 107,520; output_norm 1024; output F16 256×5×2 = 2560.
    let bytes: Vec<u64> = header.tensors.iter().map(|t| t.bytes).collect();
    assert_eq!(bytes, vec![5120, 36_864, 34_816, 34_816, 1024, 107_520, 1024, 2560]);
    // Offsets at 32-byte alignment: every size above is a multiple of 32 already.
    assert_eq!(header.tensors[5].offset, 5120 + 36_864 + 2 * 34_816 + 1024);
    assert_eq!(header.data_bytes, builder.data_bytes());
    let Sizing::Sized(shape) = shape(&header, &[]).expect("a shape") else { panic!("sized") };
    assert_eq!((shape.architecture.as_str(), shape.layers, shape.hidden_size), ("llama", 2, 256));
    assert_eq!((shape.attention_heads, shape.kv_heads, shape.head_dim, shape.vocab_size), (4, 2, 64, 5));
    assert_eq!((shape.max_context, shape.intermediate_size), (8192, 512));
    assert_eq!(shape.dtype.as_deref(), Some("gguf Q4_K_M"));
    assert!(!shape.tied_embeddings, "it has an output.weight");
    let weights = shape.weights.expect("weights");
    assert_eq!((weights.embedding_bytes, weights.output_bytes), (5120, 1024 + 2560));
    let first = weights.layers[0];
    assert_eq!((first.split_bytes, first.kv_bytes, first.replicated_bytes), (36_864, 69_632, 1024));
    assert_eq!(weights.layers[1].split_bytes, 107_520);
    assert_eq!(weights.total_bytes, 5120 + 36_864 + 2 * 34_816 + 1024 + 107_520 + 1024 + 2560);
}

#[test]
fn an_mxfp4_moe_with_sliding_layers() {
    let header = GgufBuilder::default()
        .string("general.architecture", "gpt-oss")
        .u32("gpt-oss.block_count", 4)
        .u32("gpt-oss.context_length", 131072)
        .u32("gpt-oss.embedding_length", 2880)
        .u32("gpt-oss.feed_forward_length", 2880)
        .u32("gpt-oss.attention.head_count", 64)
        .u32("gpt-oss.attention.head_count_kv", 8)
        .u32("gpt-oss.attention.key_length", 64)
        .u32("gpt-oss.attention.value_length", 64)
        .u32("gpt-oss.attention.sliding_window", 128)
        .u32("gpt-oss.expert_count", 128)
        .u32("gpt-oss.expert_used_count", 4)
        .u32("gpt-oss.expert_feed_forward_length", 2880)
        .tensor("blk.0.ffn_up_exps.weight", &[2880, 2880, 128], 39)
        .build();
    let header = parse(&header).expect("a header");
    // MXFP4: 32 values in 17 bytes; 2880×2880×128 / 32 × 17 = 564,019,200 bytes.
    assert_eq!(header.tensors[0].bytes, 564_019_200);
    let Sizing::Sized(shape) = shape(&header, &[]).expect("a shape") else { panic!("sized") };
    let moe = shape.moe.clone().expect("experts");
    assert_eq!((moe.experts, moe.experts_per_token, moe.expert_width), (128, 4, 2880));
    // llama.cpp's pattern for gpt-oss (load_swa_pattern(ml, 2)): of every 2 layers the first slides.
    assert_eq!(shape.sliding.clone().expect("a window").layers, vec![0, 2]);
    assert_eq!(shape.weights.expect("weights").layers[0].expert_bytes, 564_019_200);
}

#[test]
fn a_deepseek_gguf_has_latent_attention_only_with_its_mla_widths() {
    let bf16 = crate::serving::fit::KvCacheDtype::named("f16", "llama.cpp's default").expect("f16");
    let per_token =
        |shape: &ModelShape| crate::serving::fit::kv::layer_bytes_per_token(shape, shape.kv_heads.into(), &bf16);
    // Converted since llama.cpp's MLA: the latent, 512 + 64 values a token and layer.
    let header = parse(&fixtures::deepseek_v3_gguf(true).build()).expect("a header");
    let Sizing::Sized(latent) = shape(&header, &[]).expect("a shape") else { panic!("sized") };
    let mla = latent.mla.clone().expect("latent attention");
    assert_eq!((mla.kv_lora_rank, mla.qk_rope_head_dim, mla.qk_nope_head_dim, mla.v_head_dim), (512, 64, 128, 128));
    assert_eq!((latent.kv_heads, latent.head_dim, latent.v_head_dim), (1, 576, 512));
    assert_eq!(per_token(&latent), 1152);
    assert_eq!(legacy_mla(&header), None);
    // Converted before: no `*_mla` widths, and llama.cpp caches the 128 full heads of 192 + 128
    // values: 128 × 320 × 2 = 81,920 bytes a token and layer, 71 times the latent's.
    let header = parse(&fixtures::deepseek_v3_gguf(false).build()).expect("a header");
    let Sizing::Sized(heads) = shape(&header, &[]).expect("a shape") else { panic!("sized") };
    assert_eq!(heads.mla, None, "no latent attention as llama.cpp runs it");
    assert_eq!((heads.kv_heads, heads.head_dim, heads.v_head_dim), (128, 192, 128));
    assert_eq!(per_token(&heads), 81_920);
    assert_eq!(per_token(&heads) / per_token(&latent), 71);
    let said = legacy_mla(&header).expect("said");
    assert!(said.contains("128 full heads of 192 + 128") && said.contains("key_length_mla"), "{said}");
}

#[test]
fn hybrid_and_unknown_architectures_are_not_guessed() {
    for arch in ["qwen3next", "mamba2", "jamba"] {
        let header = parse(&GgufBuilder::default().string("general.architecture", arch).build()).expect("a header");
        match shape(&header, &[]).expect("no error") {
            Sizing::CannotSize { why, .. } => assert!(why.contains("hybrid"), "{why}"),
            other => panic!("{arch}: {other:?}"),
        }
    }
    let header = parse(&GgufBuilder::default().string("general.architecture", "t5").build()).expect("a header");
    assert!(matches!(shape(&header, &[]), Ok(Sizing::CannotSize { .. })));
}

#[test]
fn a_short_start_says_how_much_more_it_needs() {
    let bytes = small_llama().build();
    for cut in [0, 3, 10, 30, bytes.len() / 2, bytes.len() - 40] {
        match parse(&bytes[..cut]) {
            Err(HeaderError::Truncated { needed, have, .. }) => {
                assert!(needed > cut as u64 && have == cut as u64, "{cut}: needs {needed}")
            }
            other => panic!("{cut}: {other:?}"),
        }
    }
}

#[test]
fn claims_past_any_real_model_are_refused_without_allocating() {
    let start = |tensors: u64, kvs: u64| {
        let mut bytes = b"GGUF".to_vec();
        bytes.extend_from_slice(&3u32.to_le_bytes());
        bytes.extend_from_slice(&tensors.to_le_bytes());
        bytes.extend_from_slice(&kvs.to_le_bytes());
        bytes
    };
    let error = parse(&start(1 << 63, 0)).expect_err("2^63 tensors");
    assert!(matches!(error, HeaderError::TooLarge { .. }), "{error}");
    let error = parse(&start(0, u64::MAX)).expect_err("2^64 keys");
    assert!(matches!(error, HeaderError::TooLarge { .. }), "{error}");
    // A 100 GB string value.
    let mut string = start(0, 1);
    string.extend_from_slice(&1u64.to_le_bytes());
    string.push(b'k');
    string.extend_from_slice(&8u32.to_le_bytes());
    string.extend_from_slice(&100_000_000_000u64.to_le_bytes());
    let error = parse(&string).expect_err("a 100 GB string");
    assert!(matches!(error, HeaderError::TooLarge { claimed: 100_000_000_000, .. }), "{error}");
    // An array of 2^60 u64 and one of 2^62 strings.
    for item_type in [10u32, 8] {
        let mut array = start(0, 1);
        array.extend_from_slice(&1u64.to_le_bytes());
        array.push(b'k');
        array.extend_from_slice(&9u32.to_le_bytes());
        array.extend_from_slice(&item_type.to_le_bytes());
        array.extend_from_slice(&(1u64 << 62).to_le_bytes());
        let error = parse(&array).expect_err("a huge array");
        assert!(matches!(error, HeaderError::TooLarge { .. }), "{error}");
    }
    // A tensor of 2^62 × 2^62 elements: its size overflows.
    let mut tensor = start(1, 0);
    tensor.extend_from_slice(&1u64.to_le_bytes());
    tensor.push(b't');
    tensor.extend_from_slice(&2u32.to_le_bytes());
    tensor.extend_from_slice(&(1u64 << 62).to_le_bytes());
    tensor.extend_from_slice(&(1u64 << 62).to_le_bytes());
    tensor.extend_from_slice(&0u32.to_le_bytes());
    tensor.extend_from_slice(&0u64.to_le_bytes());
    let error = parse(&tensor).expect_err("an overflowing tensor");
    assert!(error.to_string().contains("overflows"), "{error}");
}

#[test]
fn what_the_format_forbids_is_refused() {
    let mut wrong_magic = small_llama().build();
    wrong_magic[0] = b'X';
    let mut version_one = small_llama().build();
    version_one[4] = 1;
    let mut version_four = small_llama().build();
    version_four[4] = 4;
    let cases = [
        (wrong_magic, "magic"),
        (version_one, "version 1"),
        (version_four, "version 4"),
        (GgufBuilder::default().u32("a", 1).u32("a", 2).build(), "twice"),
        (GgufBuilder::default().raw("b", 7, &[2]).build(), "bool 2"),
        (GgufBuilder::default().raw("v", 13, &[0; 8]).build(), "value type 13"),
        (GgufBuilder::default().u32("general.alignment", 24).build(), "power of 2"),
        (GgufBuilder::default().tensor("t", &[64], 4).build(), "unknown ggml type 4"),
        (GgufBuilder::default().tensor("t", &[100], 12).build(), "not a multiple"),
        (GgufBuilder::default().tensor(&"n".repeat(64), &[32], 0).build(), "claims 64"),
        (GgufBuilder::default().tensor("t", &[1, 1, 1, 1, 1], 0).build(), "5 dimensions"),
        (GgufBuilder::default().tensor("t", &[32], 0).tensor("t", &[32], 0).build(), "twice"),
    ];
    for (bytes, says) in cases {
        let error = parse(&bytes).expect_err(says);
        assert!(error.to_string().contains(says), "{says}: {error}");
    }
    // An offset out of place: the second tensor's offset rewritten.
    let mut moved = GgufBuilder::default().tensor("a", &[32], 0).tensor("b", &[32], 0).build();
    let offset_at = (0..moved.len() - 8).rev().find(|&i| moved[i..i + 8] == 128u64.to_le_bytes()).expect("b's offset");
    moved[offset_at..offset_at + 8].copy_from_slice(&96u64.to_le_bytes());
    let error = parse(&moved).expect_err("a moved tensor");
    assert!(error.to_string().contains("offset"), "{error}");
}

#[test]
fn the_tests_tiny_llama_as_gguf_py_writes_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let gguf = fixtures::tiny_llama(dir.path(), 6);
    let bytes = std::fs::read(&gguf).expect("read the GGUF");
    let header = parse(&bytes).expect("the tiny llama's header");
    assert_eq!((header.version, header.tensors.len()), (3, 2 + 9 * 6 + 1));
    let Sizing::Sized(shape) = shape(&header, &[]).expect("a shape") else { panic!("sized") };
    // tiny_llama.py: n_embd 96, 6 heads / 2 KV heads (head dim 16), FFN 256, context 4096,
    // the llama SPM vocabulary (32000 tokens), float32.
    assert_eq!((shape.layers, shape.hidden_size, shape.attention_heads, shape.kv_heads), (6, 96, 6, 2));
    assert_eq!((shape.head_dim, shape.intermediate_size, shape.max_context, shape.vocab_size), (16, 256, 4096, 32000));
    let weights = shape.weights.expect("weights");
    // F32: token_embd and output 32000×96×4 = 12,288,000 each; a layer: norms 2×384, q and o 96×96×4 ×2
    // = 73,728, k and v 96×32×4 ×2 = 24,576, gate/up/down 96×256×4 ×3 = 294,912 → 393,984.
    assert_eq!(weights.embedding_bytes, 12_288_000);
    assert_eq!(weights.output_bytes, 12_288_000 + 384);
    assert_eq!(weights.layers[0].total(), 393_984);
    assert_eq!(weights.layers[0].kv_bytes, 24_576);
    assert_eq!(weights.total_bytes, 2 * 12_288_000 + 384 + 6 * 393_984);
    // The data ends where the file does.
    assert_eq!(header.data_offset + header.data_bytes, bytes.len() as u64);
}

#[test]
fn llama_cpp_vocabulary_files_are_read() {
    let models = fixtures::llama_cpp().join("models");
    let mut read = 0;
    for entry in std::fs::read_dir(&models).expect("llama.cpp's models") {
        let path = entry.expect("an entry").path();
        if path.extension().is_none_or(|e| e != "gguf") {
            continue;
        }
        let bytes = std::fs::read(&path).expect("read a vocabulary");
        let header = parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(header.tensors.is_empty(), "{}: a vocabulary has no tensors", path.display());
        let Some(Value::Array { len, .. }) = header.keys.get("tokenizer.ggml.tokens") else {
            panic!("{}: no tokens", path.display())
        };
        assert!(*len > 1000, "{}: {len} tokens", path.display());
        assert!(header.keys.get("general.architecture").and_then(Value::as_str).is_some());
        read += 1;
    }
    assert!(read >= 1, "no ggml-vocab-*.gguf in {}", models.display());
}
