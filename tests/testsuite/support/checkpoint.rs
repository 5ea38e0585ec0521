//! A dense model's Hub checkpoint from its published config.json (tests/fixtures/model-configs):
//! the tensors its safetensors shards hold, named and shaped as transformers' Llama and Qwen3
//! checkpoints name and shape them (the embedding, each layer's norms, q/k/v/o projections, Qwen3's
//! q/k norms and the gate/up/down MLP, the final norm, the output head unless tied), in bf16, in
//! shards of about `shard_bytes` with `model.safetensors.index.json`. Each shard is a sparse
//! [`HubFile`]: its real header and size, its data zeros never held in memory.

use std::path::Path;

use serde_json::json;

use super::hub::HubFile;

/// The published config.json of a model in tests/fixtures/model-configs.
pub fn config(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/model-configs").join(format!("{name}.json"));
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The checkpoint of `config_json` (a dense Llama or Qwen3 model): config.json, its shards and
/// index; and the weights' bytes all together.
pub fn dense_checkpoint(config_json: &str, shard_bytes: u64) -> (Vec<HubFile>, u64) {
    let config: serde_json::Value = serde_json::from_str(config_json).expect("a config.json");
    let number = |key: &str| config[key].as_u64().unwrap_or_else(|| panic!("{key} in the config"));
    let (h, v, layers) = (number("hidden_size"), number("vocab_size"), number("num_hidden_layers"));
    let (heads, kv) = (number("num_attention_heads"), number("num_key_value_heads"));
    let d = config["head_dim"].as_u64().unwrap_or(h / heads);
    let i = number("intermediate_size");
    let qwen3 = config["architectures"][0].as_str().is_some_and(|a| a.starts_with("Qwen3"));
    let mut tensors: Vec<(String, Vec<u64>)> = vec![("model.embed_tokens.weight".into(), vec![v, h])];
    for layer in 0..layers {
        let p = format!("model.layers.{layer}");
        tensors.push((format!("{p}.input_layernorm.weight"), vec![h]));
        tensors.push((format!("{p}.post_attention_layernorm.weight"), vec![h]));
        for (projection, rows) in [("q_proj", heads * d), ("k_proj", kv * d), ("v_proj", kv * d)] {
            tensors.push((format!("{p}.self_attn.{projection}.weight"), vec![rows, h]));
        }
        tensors.push((format!("{p}.self_attn.o_proj.weight"), vec![h, heads * d]));
        if qwen3 {
            tensors.push((format!("{p}.self_attn.q_norm.weight"), vec![d]));
            tensors.push((format!("{p}.self_attn.k_norm.weight"), vec![d]));
        }
        for (projection, shape) in [("gate_proj", [i, h]), ("up_proj", [i, h]), ("down_proj", [h, i])] {
            tensors.push((format!("{p}.mlp.{projection}.weight"), shape.to_vec()));
        }
    }
    tensors.push(("model.norm.weight".into(), vec![h]));
    if !config["tie_word_embeddings"].as_bool().unwrap_or(false) {
        tensors.push(("lm_head.weight".into(), vec![v, h]));
    }
    let bytes = |shape: &[u64]| shape.iter().product::<u64>() * 2;
    let mut shards: Vec<Vec<(String, Vec<u64>)>> = vec![Vec::new()];
    let mut in_shard = 0;
    for tensor in tensors {
        if in_shard > 0 && in_shard + bytes(&tensor.1) > shard_bytes {
            shards.push(Vec::new());
            in_shard = 0;
        }
        in_shard += bytes(&tensor.1);
        shards.last_mut().expect("a shard").push(tensor);
    }
    let count = shards.len();
    let mut files = vec![HubFile::new("config.json", config_json)];
    let mut weight_map = serde_json::Map::new();
    let mut total = 0;
    for (index, shard) in shards.iter().enumerate() {
        let name = format!("model-{:05}-of-{count:05}.safetensors", index + 1);
        let mut header = serde_json::Map::new();
        header.insert("__metadata__".into(), json!({ "format": "pt" }));
        let mut offset = 0;
        for (tensor, shape) in shard {
            let end = offset + bytes(shape);
            header.insert(tensor.clone(), json!({ "dtype": "BF16", "shape": shape, "data_offsets": [offset, end] }));
            weight_map.insert(tensor.clone(), json!(name));
            offset = end;
        }
        let text = serde_json::to_vec(&header).expect("a header");
        let mut head = (text.len() as u64).to_le_bytes().to_vec();
        head.extend_from_slice(&text);
        let size = head.len() as u64 + offset;
        files.push(HubFile::sparse(&name, head, size));
        total += offset;
    }
    let index = json!({ "metadata": { "total_size": total }, "weight_map": weight_map });
    files.push(HubFile::new("model.safetensors.index.json", serde_json::to_vec(&index).expect("an index")));
    (files, total)
}
