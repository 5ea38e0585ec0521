//! The OpenAI-compatible wire format as vLLM's and llama.cpp's servers speak it, for the fields
//! the bench and the gate use. Both servers take the same completion request, with two fields
//! beyond OpenAI's that each honours and the other ignores: `ignore_eos` (both: vLLM's sampling
//! extension, llama.cpp's `ignore_eos`) and `return_token_ids` (vLLM's; llama.cpp returns the ids
//! in its `logprobs.content[].id` instead). A prompt may be a list of token ids: both use it as
//! given, without adding a BOS (vLLM's `TokensPrompt`; llama.cpp's `tokenize_input_subprompt`).
//! The model list (`GET /v1/models`) is read in [`crate::serving::openai_models`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `POST /v1/completions`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompletionRequest {
    pub model: String,
    pub prompt: Prompt,
    pub max_tokens: u32,
    pub temperature: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    pub stream: bool,
    /// With streaming: the token counts in a last message (vLLM only sends them when asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ignore_eos: bool,
    /// How many alternatives per token to return with its log-probability (llama.cpp reads it
    /// as `n_probs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<u32>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub return_token_ids: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Prompt {
    Text(String),
    Tokens(Vec<u32>),
}

impl Prompt {
    /// For error messages: what was asked, without the whole prompt.
    pub fn describe(&self) -> String {
        match self {
            Prompt::Text(text) => format!("a {}-character text prompt", text.chars().count()),
            Prompt::Tokens(tokens) => format!("a prompt of {} token ids", tokens.len()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StreamOptions {
    pub include_usage: bool,
}

/// A completion, whole or one streamed message of it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Completion {
    #[serde(default)]
    pub choices: Vec<Choice>,
    pub usage: Option<Usage>,
    /// vLLM reports a failure inside the stream as a message with `error` (llama.cpp too).
    pub error: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Choice {
    pub text: Option<String>,
    pub finish_reason: Option<String>,
    /// vLLM with `return_token_ids`.
    pub token_ids: Option<Vec<u32>>,
    pub logprobs: Option<Logprobs>,
}

/// The two servers' shapes: vLLM's is OpenAI's completion form (parallel lists of token texts
/// and log-probabilities), llama.cpp's is the chat form (one object per token, with its id).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Logprobs {
    pub tokens: Option<Vec<String>>,
    pub token_logprobs: Option<Vec<Option<f64>>>,
    /// vLLM's most likely tokens at each place.
    pub top_logprobs: Option<Vec<Option<TopLogprobs>>>,
    pub content: Option<Vec<TokenLogprob>>,
}

/// vLLM's most likely tokens at one place: their texts (or `token_id:N`) to log-probabilities.
pub type TopLogprobs = BTreeMap<String, Option<f64>>;

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TokenLogprob {
    pub id: Option<u32>,
    pub token: String,
    pub logprob: Option<f64>,
    /// llama.cpp's most likely tokens at this place, each in this shape (without its own list).
    #[serde(default)]
    pub top_logprobs: Vec<TopLogprob>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TopLogprob {
    pub id: Option<u32>,
    pub token: String,
    pub logprob: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// `POST /tokenize` answers `{"tokens": [...]}` on both servers (the request bodies differ).
#[derive(Debug, Clone, Deserialize)]
pub struct Tokenized {
    pub tokens: Vec<u32>,
}

/// `POST /detokenize` answers the text as `{"prompt": …}` on vLLM, `{"content": …}` on
/// llama.cpp's server; both read `{"tokens": […]}` (llama.cpp ignores the `model` beside it).
#[derive(Debug, Clone, Deserialize)]
pub struct Detokenized {
    #[serde(alias = "content")]
    pub prompt: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_carries_only_what_was_asked() {
        let request = CompletionRequest {
            model: "m".into(),
            prompt: Prompt::Tokens(vec![1, 2, 3]),
            max_tokens: 4,
            temperature: 0.0,
            seed: None,
            stream: true,
            stream_options: Some(StreamOptions { include_usage: true }),
            ignore_eos: true,
            logprobs: None,
            return_token_ids: false,
        };
        let json: serde_json::Value = serde_json::to_value(&request).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"model": "m", "prompt": [1, 2, 3], "max_tokens": 4, "temperature": 0.0,
                "stream": true, "stream_options": {"include_usage": true}, "ignore_eos": true})
        );
    }

    #[test]
    fn both_servers_logprob_shapes_parse() {
        let vllm: Completion = serde_json::from_str(
            r#"{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" a b","token_ids":[264,293],
            "logprobs":{"text_offset":[0,2],"token_logprobs":[-0.5,-1.25],"tokens":[" a"," b"],"top_logprobs":[{" a":-0.5},{" b":-1.25}]},
            "finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":5,"total_tokens":7,"completion_tokens":2}}"#,
        )
        .unwrap();
        let choice = &vllm.choices[0];
        assert_eq!(choice.token_ids.as_deref(), Some(&[264, 293][..]));
        assert_eq!(choice.logprobs.as_ref().unwrap().token_logprobs.as_deref(), Some(&[Some(-0.5), Some(-1.25)][..]));
        assert_eq!(vllm.usage, Some(Usage { prompt_tokens: 5, completion_tokens: 2 }));

        let llama: Completion = serde_json::from_str(
            r#"{"choices":[{"text":" a","index":0,"logprobs":{"content":[{"id":264,"token":" a","bytes":[32,97],"logprob":-0.5,
            "top_logprobs":[{"id":264,"token":" a","bytes":[32,97],"logprob":-0.5}]}]},"finish_reason":null}],
            "created":1,"model":"m","system_fingerprint":"b1","object":"text_completion","id":"chatcmpl-x"}"#,
        )
        .unwrap();
        let content = llama.choices[0].logprobs.as_ref().unwrap().content.as_ref().unwrap();
        assert_eq!((content[0].id, content[0].token.as_str(), content[0].logprob), (Some(264), " a", Some(-0.5)));
    }
}
