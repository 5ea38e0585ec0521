//! OpenAI's model list, the answer to `GET /v1/models` (OpenAI's API reference, "List models"):
//! `{"object": "list", "data": [{"id": …, "object": "model", "created": …, "owned_by": …}, …]}`,
//! as vLLM's API server and llama-server give it, each entry with what its engine adds (vLLM's
//! `max_model_len`, `root`, `parent`; llama-server's `meta`), and as the router gives it back.
//! The launch's probe, the bench and the router read it here, and only here.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenAiModels {
    /// `"list"`; not required of an engine.
    #[serde(default = "list")]
    pub object: String,
    pub data: Vec<OpenAiModel>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenAiModel {
    /// The name requests ask for the model by.
    pub id: String,
    /// Everything else said of it (OpenAI's `object`, `created`, `owned_by`, and the engine's own
    /// fields), kept as given.
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

fn list() -> String {
    "list".into()
}

impl OpenAiModels {
    pub fn new(data: Vec<OpenAiModel>) -> OpenAiModels {
        OpenAiModels { object: list(), data }
    }

    /// Read an answer's body; an error (serde's words) when it is not the list.
    pub fn parse(body: &[u8]) -> Result<OpenAiModels, serde_json::Error> {
        serde_json::from_slice(body)
    }

    /// The ids, in the order listed (an engine lists the model it serves first).
    pub fn ids(self) -> Vec<String> {
        self.data.into_iter().map(|model| model.id).collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn both_engines_lists_are_read_and_written_back_whole() {
        let vllm = br#"{"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model","created":17,"owned_by":"vllm",
            "root":"Qwen/Qwen3-8B","max_model_len":4096},{"id":"sql-lora","object":"model","parent":"Qwen/Qwen3-8B"}]}"#;
        let list = OpenAiModels::parse(vllm).unwrap();
        assert_eq!(list.data[0].fields["max_model_len"], json!(4096));
        assert_eq!(serde_json::to_value(&list).unwrap(), serde_json::from_slice::<Value>(vllm).unwrap());
        assert_eq!(list.ids(), ["Qwen/Qwen3-8B", "sql-lora"]);
        let llama =
            br#"{"models":[{"name":"coder"}],"object":"list","data":[{"id":"coder","meta":{"n_vocab":32000}}]}"#;
        assert_eq!(OpenAiModels::parse(llama).unwrap().ids(), ["coder"]);
        // An engine need not say "object".
        assert_eq!(OpenAiModels::parse(br#"{"data":[{"id":"b"}]}"#).unwrap().object, "list");
    }

    #[test]
    fn what_is_not_the_list_is_an_error() {
        for odd in ["not json", "{}", r#"{"data":"x"}"#, r#"{"data":[7]}"#, r#"{"data":[{"name":"m"}]}"#, "[1]"] {
            assert!(OpenAiModels::parse(odd.as_bytes()).is_err(), "{odd}");
        }
        assert_eq!(OpenAiModels::parse(br#"{"data":[]}"#).unwrap().ids(), Vec::<String>::new());
    }
}
