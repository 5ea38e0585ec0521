//! The gate's answers, token by token, and how each engine gives its tokens.
//!
//! The completion request asks `logprobs: TOP_LOGPROBS` and `return_token_ids: true`; each server
//! answers with its own fields and ignores the other's:
//! - vLLM: `choices[0].token_ids` (the ids, with `return_token_ids`), and OpenAI's completion
//!   logprobs: `logprobs.tokens` (each token's text; `token_id:N` when the server runs with
//!   `--return-tokens-as-token-ids`) beside `logprobs.token_logprobs`, and `logprobs.top_logprobs`,
//!   one map per token from the text of each of the most likely tokens to its log-probability;
//! - llama.cpp's server: `logprobs.content[]`, one object per token with its `id`, `token` (text),
//!   `logprob` and `top_logprobs[]` (objects of the same shape; its `n_probs`, which it reads from
//!   `logprobs`). It folds a token that ends inside a UTF-8 character into the next entry, so there
//!   an index counts its entries: the same in every run of the same model, so the comparison holds.
//!
//! So ids are compared wherever the server gives them, texts otherwise.

use serde::{Deserialize, Serialize};

use crate::bench::api::{Choice, TopLogprobs};
use crate::bench::key::{EngineRef, ModelIdentity};

/// The format of a kept gate run.
pub const GATE_FORMAT: u32 = 1;

/// The most likely tokens asked for at each place: as many as vLLM's own tests compare greedy
/// outputs with (`num_logprobs` 5 in tests/models/language/generation), within vLLM's default
/// `--max-logprobs` (20).
pub const TOP_LOGPROBS: u32 = 5;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GateToken {
    pub id: Option<u32>,
    pub text: String,
    pub logprob: Option<f64>,
    /// The most likely tokens at this place, as the server ranked them (empty in runs kept
    /// before they were asked for, or from a server that gives none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top: Vec<Alternative>,
}

/// One of the most likely tokens at a place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Alternative {
    pub id: Option<u32>,
    pub text: String,
    pub logprob: Option<f64>,
}

impl GateToken {
    /// The same token: by id when both have one, else by text.
    pub fn same_as(&self, other: &GateToken) -> bool {
        same(self.id, &self.text, other.id, &other.text)
    }

    /// `other` is among the tokens this answer ranked most likely here.
    pub fn ranks(&self, other: &GateToken) -> bool {
        self.top.iter().any(|alternative| same(alternative.id, &alternative.text, other.id, &other.text))
    }

    /// The token alone, without its alternatives.
    pub fn alone(&self) -> Alternative {
        Alternative { id: self.id, text: self.text.clone(), logprob: self.logprob }
    }
}

fn same(a_id: Option<u32>, a_text: &str, b_id: Option<u32>, b_text: &str) -> bool {
    match (a_id, b_id) {
        (Some(a), Some(b)) => a == b,
        _ => a_text == b_text,
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
            .map(|token| GateToken {
                id: token.id,
                text: token.token.clone(),
                logprob: token.logprob,
                top: token
                    .top_logprobs
                    .iter()
                    .map(|top| Alternative { id: top.id, text: top.token.clone(), logprob: top.logprob })
                    .collect(),
            })
            .collect());
    }
    let texts = logprobs.and_then(|logprobs| logprobs.tokens.as_ref());
    let values = logprobs.and_then(|logprobs| logprobs.token_logprobs.as_ref());
    let tops = logprobs.and_then(|logprobs| logprobs.top_logprobs.as_ref());
    let count = match (&choice.token_ids, texts) {
        (Some(ids), _) => ids.len(),
        (None, Some(texts)) => texts.len(),
        (None, None) => {
            return Err(format!(
                "the answer has no tokens: neither vLLM's `token_ids` nor any `logprobs` (does the server return \
                 log-probabilities? vLLM needs --max-logprobs {TOP_LOGPROBS} or more)"
            ))
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
            let top = tops.and_then(|tops| tops.get(index)).and_then(Option::as_ref).map_or_else(Vec::new, ranked);
            GateToken { id, text, logprob, top }
        })
        .collect())
}

/// vLLM's map of one place's most likely tokens, most likely first (`token_id:N` keys give ids).
fn ranked(top: &TopLogprobs) -> Vec<Alternative> {
    let mut alternatives: Vec<Alternative> = top
        .iter()
        .map(|(text, logprob)| Alternative {
            id: text.strip_prefix("token_id:").and_then(|id| id.parse().ok()),
            text: text.clone(),
            logprob: *logprob,
        })
        .collect();
    alternatives.sort_by(|a, b| b.logprob.unwrap_or(f64::MIN).total_cmp(&a.logprob.unwrap_or(f64::MIN)));
    alternatives
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::api::Completion;

    fn choice(json: &str) -> Choice {
        serde_json::from_str::<Completion>(json).unwrap().choices.remove(0)
    }

    fn token(id: Option<u32>, text: &str, logprob: Option<f64>) -> GateToken {
        GateToken { id, text: text.into(), logprob, top: Vec::new() }
    }

    fn alternative(id: Option<u32>, text: &str, logprob: f64) -> Alternative {
        Alternative { id, text: text.into(), logprob: Some(logprob) }
    }

    #[test]
    fn vllm_ids_texts_and_logprobs() {
        let tokens = tokens_of(&choice(
            r#"{"choices":[{"text":" Paris is","token_ids":[3681,338],
            "logprobs":{"tokens":[" Paris"," is"],"token_logprobs":[-0.25,null],"text_offset":[0,6],"top_logprobs":[]}}]}"#,
        ))
        .unwrap();
        assert_eq!(tokens, vec![token(Some(3681), " Paris", Some(-0.25)), token(Some(338), " is", None)]);
        let as_ids = tokens_of(&choice(
            r#"{"choices":[{"text":"x","logprobs":{"tokens":["token_id:42"],"token_logprobs":[-1.0]}}]}"#,
        ))
        .unwrap();
        assert_eq!(as_ids[0].id, Some(42));
    }

    #[test]
    fn vllm_top_logprobs_are_ranked_most_likely_first() {
        let tokens = tokens_of(&choice(
            r#"{"choices":[{"text":" Paris","token_ids":[3681],
            "logprobs":{"tokens":[" Paris"],"token_logprobs":[-0.25],"text_offset":[0],
            "top_logprobs":[{" London":-2.5," Paris":-0.25," Lyon":-1.5}]}}]}"#,
        ))
        .unwrap();
        let texts: Vec<&str> = tokens[0].top.iter().map(|top| top.text.as_str()).collect();
        assert_eq!(texts, [" Paris", " Lyon", " London"]);
        assert!(tokens[0].ranks(&token(Some(1), " Lyon", None)), "by text where the map has no id");
        let as_ids = tokens_of(&choice(
            r#"{"choices":[{"text":"x","logprobs":{"tokens":["token_id:42"],"token_logprobs":[-1.0],
            "top_logprobs":[{"token_id:42":-1.0,"token_id:7":-1.1}]}}]}"#,
        ))
        .unwrap();
        assert_eq!(as_ids[0].top[1], alternative(Some(7), "token_id:7", -1.1));
    }

    #[test]
    fn llama_cpp_content_and_no_tokens_at_all() {
        let tokens = tokens_of(&choice(
            r#"{"choices":[{"text":" Paris","logprobs":{"content":[{"id":3681,"token":" Paris","bytes":[32],"logprob":-0.5,
            "top_logprobs":[{"id":3681,"token":" Paris","bytes":[32],"logprob":-0.5},{"id":17,"token":" Lyon","bytes":[32],"logprob":-0.75}]}]}}]}"#,
        ))
        .unwrap();
        assert_eq!(
            tokens,
            vec![GateToken {
                top: vec![alternative(Some(3681), " Paris", -0.5), alternative(Some(17), " Lyon", -0.75)],
                ..token(Some(3681), " Paris", Some(-0.5))
            }]
        );
        let error = tokens_of(&choice(r#"{"choices":[{"text":" Paris"}]}"#)).unwrap_err();
        assert!(error.contains("no tokens") && error.contains("--max-logprobs 5"), "{error}");
    }

    #[test]
    fn tokens_are_the_same_by_id_else_by_text() {
        let a = token(Some(1), "a", None);
        assert!(a.same_as(&token(Some(1), "b", None)));
        assert!(!a.same_as(&token(Some(2), "a", None)));
        assert!(a.same_as(&token(None, "a", None)));
        let ranked = GateToken { top: vec![alternative(Some(1), "a", -0.1), alternative(Some(9), "z", -0.2)], ..a };
        assert!(ranked.ranks(&token(Some(9), "?", None)) && !ranked.ranks(&token(Some(8), "z", None)));
    }
}
