//! The gate's answers, token by token, and how each engine gives its tokens.
//!
//! The completion request asks `logprobs: 1` and `return_token_ids: true`; each server answers
//! with its own fields and ignores the other's:
//! - vLLM: `choices[0].token_ids` (the ids, with `return_token_ids`), and OpenAI's completion
//!   logprobs: `logprobs.tokens` (each token's text; `token_id:N` when the server runs with
//!   `--return-tokens-as-token-ids`) beside `logprobs.token_logprobs`;
//! - llama.cpp's server: `logprobs.content[]`, one object per token with its `id`, `token` (text)
//!   and `logprob` (its `n_probs`, which it reads from `logprobs`). It folds a token that ends
//!   inside a UTF-8 character into the next entry, so there an index counts its entries: the same
//!   in every run of the same model, so the comparison holds.
//!
//! So ids are compared wherever the server gives them, texts otherwise.

use serde::{Deserialize, Serialize};

use crate::bench::api::Choice;
use crate::bench::key::{EngineRef, ModelIdentity};

/// The format of a kept gate run.
pub const GATE_FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateToken {
    pub id: Option<u32>,
    pub text: String,
    pub logprob: Option<f64>,
}

impl GateToken {
    /// The same token: by id when both have one, else by text.
    pub fn same_as(&self, other: &GateToken) -> bool {
        match (self.id, other.id) {
            (Some(a), Some(b)) => a == b,
            _ => self.text == other.text,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateAnswer {
    /// The prompt's id in its set.
    pub prompt: String,
    pub text: String,
    pub tokens: Vec<GateToken>,
}

/// One endpoint's answers to one prompt set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateRun {
    pub format: u32,
    pub prompt_set: u32,
    pub fingerprint: String,
    pub model: ModelIdentity,
    pub engine: EngineRef,
    pub image: String,
    /// How it was served ("TP2 PP1 on 2 nodes over RoCE", "one node alone").
    pub layout: String,
    pub endpoint: String,
    pub taken_at: String,
    pub answers: Vec<GateAnswer>,
}

/// The tokens of a choice, from whichever fields its server filled.
pub fn tokens_of(choice: &Choice) -> Result<Vec<GateToken>, String> {
    let logprobs = choice.logprobs.as_ref();
    if let Some(content) = logprobs.and_then(|logprobs| logprobs.content.as_ref()) {
        return Ok(content
            .iter()
            .map(|token| GateToken { id: token.id, text: token.token.clone(), logprob: token.logprob })
            .collect());
    }
    let texts = logprobs.and_then(|logprobs| logprobs.tokens.as_ref());
    let values = logprobs.and_then(|logprobs| logprobs.token_logprobs.as_ref());
    let count = match (&choice.token_ids, texts) {
        (Some(ids), _) => ids.len(),
        (None, Some(texts)) => texts.len(),
        (None, None) => {
            return Err("the answer has no tokens: neither vLLM's `token_ids` nor any `logprobs` (does the server \
                 return log-probabilities? vLLM needs --max-logprobs 1 or more)"
                .into())
        }
    };
    Ok((0..count)
        .map(|index| {
            let text = texts.and_then(|texts| texts.get(index)).cloned().unwrap_or_default();
            let id = choice
                .token_ids
                .as_ref()
                .and_then(|ids| ids.get(index).copied())
                .or_else(|| text.strip_prefix("token_id:").and_then(|id| id.parse().ok()));
            let logprob = values.and_then(|values| values.get(index).copied().flatten());
            GateToken { id, text, logprob }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::api::Completion;

    fn choice(json: &str) -> Choice {
        serde_json::from_str::<Completion>(json).unwrap().choices.remove(0)
    }

    #[test]
    fn vllm_ids_texts_and_logprobs() {
        let tokens = tokens_of(&choice(
            r#"{"choices":[{"text":" Paris is","token_ids":[3681,338],
            "logprobs":{"tokens":[" Paris"," is"],"token_logprobs":[-0.25,null],"text_offset":[0,6],"top_logprobs":[]}}]}"#,
        ))
        .unwrap();
        assert_eq!(
            tokens,
            vec![
                GateToken { id: Some(3681), text: " Paris".into(), logprob: Some(-0.25) },
                GateToken { id: Some(338), text: " is".into(), logprob: None },
            ]
        );
        let as_ids = tokens_of(&choice(
            r#"{"choices":[{"text":"x","logprobs":{"tokens":["token_id:42"],"token_logprobs":[-1.0]}}]}"#,
        ))
        .unwrap();
        assert_eq!(as_ids[0].id, Some(42));
    }

    #[test]
    fn llama_cpp_content_and_no_tokens_at_all() {
        let tokens = tokens_of(&choice(
            r#"{"choices":[{"text":" Paris","logprobs":{"content":[{"id":3681,"token":" Paris","bytes":[32],"logprob":-0.5,"top_logprobs":[]}]}}]}"#,
        ))
        .unwrap();
        assert_eq!(tokens, vec![GateToken { id: Some(3681), text: " Paris".into(), logprob: Some(-0.5) }]);
        let error = tokens_of(&choice(r#"{"choices":[{"text":" Paris"}]}"#)).unwrap_err();
        assert!(error.contains("no tokens"));
    }

    #[test]
    fn tokens_are_the_same_by_id_else_by_text() {
        let a = GateToken { id: Some(1), text: "a".into(), logprob: None };
        assert!(a.same_as(&GateToken { id: Some(1), text: "b".into(), logprob: None }));
        assert!(!a.same_as(&GateToken { id: Some(2), text: "a".into(), logprob: None }));
        assert!(a.same_as(&GateToken { id: None, text: "a".into(), logprob: None }));
    }
}
