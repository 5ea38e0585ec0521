//! Prompts of `--input-len` tokens without a tokenizer on this side, sent as token ids or as
//! text ([`PromptForm`]).
//!
//! The server tokenizes a fixed passage once (`POST /tokenize`, which vLLM and llama.cpp both
//! have). A prompt is the model's leading special tokens (its BOS, as tokenizing with special
//! tokens shows them), then the passage's tokens from an offset that differs per request, repeated
//! as needed: exactly `input_len` tokens as the engine counts them, requests differing from their
//! first token after the special ones (within two tokens for up to n² requests, n the passage's
//! length in tokens), so no engine serves one request's prefill from another's prefix cache. The
//! ids are the model's own, so they are valid for any model either server runs.
//!
//! Sent as ids (`prompt: [ids]`), both servers take them as given. Sent as text, as vLLM's bench
//! sends its random prompts (ids → text → ids again, cut or filled to length), the ids after the
//! special ones are decoded by the server (`POST /detokenize`), and the text is tokenized again
//! until it comes back at the length; the server adds the special tokens itself.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::client::ApiClient;
use super::key::EngineRef;
use crate::error::{Error, Result};

/// How a request carries its prompt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromptForm {
    /// The prompt's tokens as text, which the server tokenizes again, as vLLM's random prompts
    /// are sent: what `vllm bench serve` measures, tokenizing included. The text is made so it
    /// tokenizes back to the length asked; where a tokenizer will not, the server's own count of
    /// each prompt is reported.
    Text,
    /// Exactly the token ids (`prompt: [ids]`), nothing left to tokenize. Results kept before
    /// prompts had a form were sent this way.
    #[default]
    TokenIds,
}

impl std::fmt::Display for PromptForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PromptForm::Text => "text",
            PromptForm::TokenIds => "token ids",
        })
    }
}

/// How many times a text prompt is decoded and tokenized again to reach its length (vLLM's
/// `gen_prompt_decode_to_target_len` tries as often).
const TEXT_ROUNDS: usize = 10;

/// The passage the prompts are cut from: plain prose, any model's vocabulary has it.
pub const PASSAGE: &str = "The harbour town woke slowly. Fishermen hauled their nets along the quay while gulls \
argued over scraps, and the baker on the corner opened his shutters to let out the smell of bread. \
Up the hill, the schoolmaster walked his usual route, counting the steps between the church and \
the old stone bridge, a habit he had kept for thirty years. By noon the market square was full: \
merchants sold wool, copper pots, apples from the valley and salt from the flats beyond the \
lighthouse. Children ran between the stalls, and an old woman told anyone who would listen that \
the winter would be long, because the swallows had left early and the river ran low.";

/// The special tokens a prompt starts with, and the passage to fill it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptTokens {
    prefix: Vec<u32>,
    passage: Vec<u32>,
}

impl PromptTokens {
    /// Ask the server: the passage with and without the model's special tokens.
    pub async fn from_server(client: &ApiClient, engine: EngineRef, model: &str) -> Result<PromptTokens> {
        let with_special = client.tokenize(engine, model, PASSAGE, true).await?;
        let plain = client.tokenize(engine, model, PASSAGE, false).await?;
        PromptTokens::from_tokenized(&with_special, plain)
    }

    /// From the passage tokenized with special tokens and without: what the first has in front
    /// of the second is the prefix every prompt of this model starts with.
    pub fn from_tokenized(with_special: &[u32], plain: Vec<u32>) -> Result<PromptTokens> {
        if plain.is_empty() {
            return Err(Error::Internal("the server tokenized the passage into no tokens".into()));
        }
        let prefix = match with_special.len().checked_sub(plain.len()) {
            Some(extra) if with_special[extra..] == plain[..] => with_special[..extra].to_vec(),
            // Special tokens at the end only (or none): nothing in front.
            _ => Vec::new(),
        };
        Ok(PromptTokens { prefix, passage: plain })
    }

    /// The fewest tokens a prompt can have: the prefix and one token of the passage.
    pub fn shortest(&self) -> usize {
        self.prefix.len() + 1
    }

    /// Request `index`'s prompt of exactly `input_len` tokens.
    pub fn prompt(&self, index: usize, input_len: usize) -> Result<Vec<u32>> {
        if input_len < self.shortest() {
            return Err(Error::Usage(format!(
                "--input-len {input_len} is too short: this model's prompts start with {} special token(s). Fix: use --input-len {} or more",
                self.prefix.len(),
                self.shortest()
            )));
        }
        let n = self.passage.len();
        // The first token after the prefix tells the first n requests apart; where the passage
        // resumes after it tells apart the next (up to n²).
        let lead = self.passage[index % n];
        let offset = index / n;
        let mut tokens = self.prefix.clone();
        tokens.push(lead);
        tokens.extend((0..input_len - tokens.len()).map(|k| self.passage[(offset + k) % n]));
        Ok(tokens)
    }

    /// Request `index`'s prompt as text: its tokens after the special ones (which the server adds
    /// when it tokenizes a text prompt) decoded by the server, then, as vLLM does for its random
    /// prompts, tokenized again and cut or filled from the passage until the text tokenizes to the
    /// length asked, at most [`TEXT_ROUNDS`] times.
    pub async fn text(
        &self,
        client: &ApiClient,
        engine: EngineRef,
        model: &str,
        index: usize,
        input_len: usize,
    ) -> Result<String> {
        let tokens = self.prompt(index, input_len)?;
        let mut body = tokens[self.prefix.len()..].to_vec();
        let target = body.len();
        let mut text = String::new();
        for _ in 0..TEXT_ROUNDS {
            text = client.detokenize(model, &body).await?;
            let again = client.tokenize(engine, model, &text, false).await?;
            if again.len() == target {
                break;
            }
            body = self.to_length(again, target, index);
        }
        Ok(text)
    }

    /// `tokens` cut to `target`, or filled up to it with the passage as request `index`'s prompt
    /// has it at each place (after its lead token, the passage from its offset on).
    fn to_length(&self, mut tokens: Vec<u32>, target: usize, index: usize) -> Vec<u32> {
        let n = self.passage.len();
        let offset = index / n;
        while tokens.len() < target {
            // Place k of the body holds the passage's token offset + k - 1.
            tokens.push(self.passage[(offset + tokens.len() + n - 1) % n]);
        }
        tokens.truncate(target);
        tokens
    }
}

/// Where a run's prompt indices start: from the clock's nanoseconds. Prompts repeat every n²
/// indices (n: the passage's length in tokens, ~130), so two runs of r requests share a prompt
/// only when their starts come within r of each other modulo n²: for 32, about 1 in 260.
pub fn run_start() -> usize {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    (now.as_nanos() % (1 << 30)) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> PromptTokens {
        PromptTokens::from_tokenized(&[1, 10, 11, 12, 13], vec![10, 11, 12, 13]).unwrap()
    }

    #[test]
    fn the_prefix_is_what_special_tokens_add_in_front() {
        assert_eq!(tokens().prefix, vec![1]);
        let no_bos = PromptTokens::from_tokenized(&[10, 11], vec![10, 11]).unwrap();
        assert!(no_bos.prefix.is_empty());
        let eos_after = PromptTokens::from_tokenized(&[10, 11, 2], vec![10, 11]).unwrap();
        assert!(eos_after.prefix.is_empty());
        assert!(PromptTokens::from_tokenized(&[1], vec![]).is_err());
    }

    #[test]
    fn prompts_have_exactly_the_length_and_differ_early() {
        let source = tokens();
        for input_len in [2, 3, 4, 9, 100] {
            let prompt = source.prompt(0, input_len).unwrap();
            assert_eq!(prompt.len(), input_len);
            assert_eq!(prompt[0], 1);
        }
        assert!(source.prompt(0, 1).is_err());
        // 4 passage tokens: the first 4 requests differ in their first token after the BOS (nothing
        // beyond it for an engine's prefix cache to share), and 16 differ within two.
        let firsts: std::collections::BTreeSet<u32> = (0..4).map(|i| source.prompt(i, 6).unwrap()[1]).collect();
        assert_eq!(firsts.len(), 4);
        let starts: std::collections::BTreeSet<Vec<u32>> =
            (0..16).map(|i| source.prompt(i, 6).unwrap()[1..3].to_vec()).collect();
        assert_eq!(starts.len(), 16);
        assert_eq!(source.prompt(5, 6).unwrap(), source.prompt(5, 6).unwrap());
    }

    #[test]
    fn a_text_that_tokenized_to_another_length_is_cut_or_filled_from_the_passage() {
        let source = tokens();
        assert_eq!(source.to_length(vec![10, 11, 12, 13, 10], 3, 0), vec![10, 11, 12]);
        // Request 0's body is its lead token (10), then the passage from its start: 10 11 12 …
        assert_eq!(source.to_length(vec![11], 4, 0), vec![11, 10, 11, 12]);
        assert_eq!(source.to_length(Vec::new(), 2, 5).len(), 2);
    }

    #[test]
    fn a_run_from_another_start_sends_other_prompts() {
        let source = tokens();
        let start = run_start();
        assert!(start < 1 << 30);
        let earlier: Vec<Vec<u32>> = (1..4).map(|i| source.prompt(i, 6).unwrap()).collect();
        // 4 passage tokens: indices 16 apart are the first that repeat a prompt.
        let later: Vec<Vec<u32>> = (5..8).map(|i| source.prompt(i, 6).unwrap()).collect();
        assert!(later.iter().all(|prompt| !earlier.contains(prompt)));
        assert_eq!(source.prompt(start + 3, 6).unwrap().len(), 6);
    }
}
