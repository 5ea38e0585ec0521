//! Which service a request is for: its JSON body's `model` field, the one thing the router reads
//! of a body. Every OpenAI-compatible request it routes names its model there (chat completions,
//! completions, embeddings; vLLM's and llama.cpp's `/tokenize` and `/detokenize` take it too).
//! The rest of the body is skipped, not kept (serde's `IgnoredAny`), and the body is forwarded as
//! the client sent it.

use serde::Deserialize;

/// What the body says about its model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestedModel {
    Named(String),
    /// A JSON object without `model` (or with `"model": null`).
    Missing,
    /// Not a JSON object, or its `model` is not a string: serde's reason.
    Invalid(String),
}

#[derive(Deserialize)]
struct ModelField {
    #[serde(default)]
    model: Option<String>,
}

pub fn requested_model(body: &[u8]) -> RequestedModel {
    match serde_json::from_slice::<ModelField>(body) {
        Ok(ModelField { model: Some(model) }) => RequestedModel::Named(model),
        Ok(ModelField { model: None }) => RequestedModel::Missing,
        Err(error) => RequestedModel::Invalid(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_read_and_the_rest_skipped() {
        let body = br#"{"messages": [{"role": "user", "content": "hi"}], "model": "coder", "stream": true}"#;
        assert_eq!(requested_model(body), RequestedModel::Named("coder".into()));
        assert_eq!(requested_model(br#"{"prompt": "hi"}"#), RequestedModel::Missing);
        assert_eq!(requested_model(br#"{"model": null}"#), RequestedModel::Missing);
    }

    #[test]
    fn what_is_not_an_object_with_a_string_model_is_invalid() {
        for body in [&b""[..], b"[1, 2]", br#"{"model": 7}"#, br#"{"model": "a""#, b"\xff\xfe", br#"{"model": "a"} x"#]
        {
            assert!(matches!(requested_model(body), RequestedModel::Invalid(_)), "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn deep_nesting_beside_the_model_is_skipped_without_recursion() {
        // serde_json skips an ignored value with a loop, not by recursing: no stack to overflow.
        // Whether such a body is fit is the engine's to say.
        let body = format!(r#"{{"x": {}{}, "model": "m"}}"#, "[".repeat(1_000_000), "]".repeat(1_000_000));
        assert_eq!(requested_model(body.as_bytes()), RequestedModel::Named("m".into()));
    }
}
