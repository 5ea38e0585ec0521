use super::*;
use crate::model::shape::fixtures::{safetensors_header, TensorSpec};

fn file(json: &str) -> Vec<u8> {
    let mut bytes = (json.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(json.as_bytes());
    bytes
}

#[test]
fn a_header_as_the_safetensors_crate_writes_it() {
    let tensors = [
        TensorSpec { name: "model.embed_tokens.weight".into(), dtype: "BF16", shape: vec![151936, 5120] },
        TensorSpec { name: "model.layers.0.self_attn.k_proj.weight".into(), dtype: "BF16", shape: vec![1024, 5120] },
        TensorSpec {
            name: "model.layers.0.mlp.experts.gate_up_proj_blocks".into(),
            dtype: "U8",
            shape: vec![128, 5760, 90, 16],
        },
        TensorSpec { name: "model.layers.0.self_attn.sinks".into(), dtype: "F4", shape: vec![64] },
    ];
    let (bytes, data) = safetensors_header(&tensors);
    let header = parse(&bytes).expect("a header");
    // 151936×5120×2 + 1024×5120×2 + 128×5760×90×16 + 64/2 = 1,555,824,640 + 10,485,760 + 1,061,683,200 + 32.
    assert_eq!(data, 2_627_993_632);
    assert_eq!(header.data_bytes, data);
    assert_eq!(header.header_bytes, bytes.len() as u64);
    assert_eq!(header.tensors.len(), 4);
    assert_eq!(header.tensors[2].bytes, 1_061_683_200);
    assert_eq!(header.tensors[3].bytes, 32, "F4 is half a byte an element");
    assert_eq!(header.tensors[0].shape, vec![151936, 5120]);
}

#[test]
fn a_short_start_says_how_much_more_it_needs() {
    let json = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
    let bytes = file(json);
    match parse(&bytes[..4]) {
        Err(HeaderError::Truncated { needed: 8, .. }) => {}
        other => panic!("{other:?}"),
    }
    match parse(&bytes[..20]) {
        Err(HeaderError::Truncated { needed, .. }) => assert_eq!(needed, bytes.len() as u64),
        other => panic!("{other:?}"),
    }
    assert!(parse(&bytes).is_ok());
}

#[test]
fn what_the_format_forbids_is_refused() {
    for (json, says) in [
        (r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}"#, "do not follow"),
        (r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#, "96 bits"),
        (r#"{"a":{"dtype":"Q9","shape":[2],"data_offsets":[0,8]}}"#, "unknown dtype"),
        (r#"{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}"#, "not its JSON"),
        (r#"{"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}}"#, "dimensions"),
        (r#"{"a":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,8]}}"#, "overflows"),
        (
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}"#,
            "twice",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
            "do not follow",
        ),
        (r#"["a"]"#, "start with"),
        (r#"{"a":{"dtype":"F32","shape":[2]}}"#, "not its JSON"),
    ] {
        let error = parse(&file(json)).expect_err(json);
        assert!(error.to_string().contains(says), "{json}: {error}");
    }
    let metadata = r#"{"__metadata__":{"format":"pt"},"a":{"dtype":"BOOL","shape":[],"data_offsets":[0,1]}}"#;
    assert_eq!(parse(&file(metadata)).expect("metadata is skipped").tensors.len(), 1, "a scalar has one element");
}

#[test]
fn a_length_past_the_bound_is_refused_before_reading_it() {
    for claimed in [HEADER_LIMIT + 1, u64::MAX, 1 << 63] {
        let error = header_length(&claimed.to_le_bytes()).expect_err("too long");
        assert!(matches!(error, HeaderError::TooLarge { .. }), "{error}");
    }
    assert_eq!(header_length(&HEADER_LIMIT.to_le_bytes()).expect("the bound itself"), HEADER_LIMIT);
    assert!(header_length(&1u64.to_le_bytes()).is_err());
}

#[test]
fn an_index_names_its_shards_once() {
    let index = br#"{"metadata": {"total_size": 65524246528},
        "weight_map": {"lm_head.weight": "model-00017-of-00017.safetensors",
                       "model.embed_tokens.weight": "model-00001-of-00017.safetensors",
                       "model.norm.weight": "model-00017-of-00017.safetensors"}}"#;
    let index = parse_index(index).expect("an index");
    assert_eq!(index.total_size, Some(65_524_246_528));
    assert_eq!(index.shards, vec!["model-00001-of-00017.safetensors", "model-00017-of-00017.safetensors"]);
    assert_eq!(index.tensors, 3);
    for (index, says) in [
        (r#"{"weight_map": {"a": "../../etc/passwd.safetensors"}}"#, "not a .safetensors file"),
        (r#"{"weight_map": {"a": "/abs.safetensors"}}"#, "not a .safetensors file"),
        (r#"{"weight_map": {"a": "model.bin"}}"#, "not a .safetensors file"),
        (r#"{"weight_map": {}}"#, "empty"),
        (r#"{"metadata": {"total_size": -5}, "weight_map": {"a": "m.safetensors"}}"#, "not a byte count"),
        (r#"{"weight_map": 3}"#, "not an index"),
    ] {
        let error = parse_index(index.as_bytes()).expect_err(index);
        assert!(error.to_string().contains(says), "{index}: {error}");
    }
    assert_eq!(parse_index(br#"{"weight_map": {"a": "m.safetensors"}}"#).expect("no total").total_size, None);
}
