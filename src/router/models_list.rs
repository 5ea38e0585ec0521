//! `GET /v1/models` through the router: one list of every service, each entry as its engine
//! describes its model (vLLM's `max_model_len`, `root`; llama-server's `meta`), with the `id` the
//! router routes by and its state (`"status": {"value": "serving"}`; `starting`, `stopping` or
//! `stopped` for one started on demand: the shape llama-server's own router mode gives its
//! models' states, tools/server/server-models.cpp). An engine that did not answer, or a service
//! that does not serve now, still has its entry, with OpenAI's four fields and its state.
//! Engines' lists are read, and this one written, as [`crate::serving::openai_models`].

use serde_json::{json, Map};

use crate::serving::openai_models::{OpenAiModel, OpenAiModels};

/// What the router says for a service whose engine listed nothing it could read.
const OWNED_BY: &str = "strix-toolbox";

/// The merged list: `answers` are each service's name, its engine's list when it answered one,
/// and its state. An engine lists the model it serves first (vLLM lists LoRA adapters after it;
/// the router routes by the service, not by adapter), so its first entry stands for it.
pub fn merged_models(answers: Vec<(&str, Option<OpenAiModels>, &str)>) -> OpenAiModels {
    let data = answers
        .into_iter()
        .map(|(name, answer, state)| {
            let first = answer.and_then(|list| list.data.into_iter().next());
            let mut fields = first.map(|model| model.fields).unwrap_or_else(|| {
                let mut fields = Map::new();
                fields.insert("object".into(), json!("model"));
                fields.insert("created".into(), json!(0));
                fields.insert("owned_by".into(), json!(OWNED_BY));
                fields
            });
            fields.insert("status".into(), json!({"value": state}));
            OpenAiModel { id: name.to_string(), fields }
        })
        .collect();
    OpenAiModels::new(data)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// An engine's answer, read as the router reads it.
    fn read(answer: Value) -> Option<OpenAiModels> {
        OpenAiModels::parse(answer.to_string().as_bytes()).ok()
    }

    #[test]
    fn each_service_is_its_engines_entry_under_the_name_it_is_routed_by() {
        let vllm = json!({"object": "list", "data": [
            {"id": "Qwen/Qwen3-8B", "object": "model", "created": 17, "owned_by": "vllm", "max_model_len": 4096},
            {"id": "sql-lora", "object": "model", "created": 17, "owned_by": "vllm", "parent": "Qwen/Qwen3-8B"},
        ]});
        let llama = json!({"models": [{"name": "coder"}], "object": "list", "data": [
            {"id": "coder", "object": "model", "created": 18, "owned_by": "llamacpp", "meta": {"n_vocab": 32000}},
        ]});
        let merged = merged_models(vec![
            ("qwen", read(vllm), "serving"),
            ("coder", read(llama), "serving"),
            ("down", None, "serving"),
            ("later", None, "stopped"),
        ]);
        let serving = json!({"value": "serving"});
        assert_eq!(
            json!(merged),
            json!({"object": "list", "data": [
                {"id": "qwen", "object": "model", "created": 17, "owned_by": "vllm", "max_model_len": 4096,
                 "status": serving},
                {"id": "coder", "object": "model", "created": 18, "owned_by": "llamacpp", "meta": {"n_vocab": 32000},
                 "status": serving},
                {"id": "down", "object": "model", "created": 0, "owned_by": "strix-toolbox", "status": serving},
                {"id": "later", "object": "model", "created": 0, "owned_by": "strix-toolbox",
                 "status": {"value": "stopped"}},
            ]})
        );
    }

    #[test]
    fn an_answer_without_a_list_counts_as_none() {
        for odd in [json!({}), json!({"data": []}), json!({"data": "x"}), json!({"data": [7]}), json!([1])] {
            let merged = json!(merged_models(vec![("m", read(odd.clone()), "starting")]));
            assert_eq!(
                merged["data"][0],
                json!({"id": "m", "object": "model", "created": 0, "owned_by": OWNED_BY, "status": {"value": "starting"}}),
                "{odd}"
            );
        }
        assert_eq!(json!(merged_models(Vec::new())), json!({"object": "list", "data": []}));
    }
}
