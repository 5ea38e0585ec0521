//! A candidate's answers against the reference's, prompt by prompt, token by token, as vLLM's own
//! tests compare greedy outputs (`check_logprobs_close`, tests/models/utils.py): where the tokens
//! first differ, each must be among the other's most likely tokens, and that prompt's comparison
//! ends there. A different summation order (layers split over RPC, tensor parallel, another
//! thread count) legitimately flips such a near-tie, and from there the texts part; a token the
//! other did not rank fails the prompt. So does the log-probability of a token both chose when it
//! moved by more than the tolerance (where both runs have them). Only runs of the same model
//! identity and the same prompt set are ever compared.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::answer::{Alternative, GateRun, GateToken};
use crate::error::{Error, Result};

/// Tokens of context shown before and after a difference.
const CONTEXT_BEFORE: usize = 8;
const CONTEXT_AFTER: usize = 4;

/// How far a chosen token's log-probability may move between images. Greedy decoding on another
/// kernel build, RCCL or TP layout shifts log-probabilities by hundredths of a nat; a tenth (the
/// token's probability changing by ~10%) is beyond what numerics alone explain.
pub const DEFAULT_LOGPROB_TOLERANCE: f64 = 0.1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateVerdict {
    pub passed: bool,
    /// Tokens compared, all prompts together.
    pub compared_tokens: usize,
    /// The largest log-probability change among tokens both chose (none without log-probabilities).
    pub max_logprob_delta: Option<f64>,
    pub logprob_tolerance: f64,
    pub reference_image: String,
    pub candidate_image: String,
    pub reference_layout: String,
    pub candidate_layout: String,
    pub mismatches: Vec<Mismatch>,
    /// The prompts whose comparison ended at a near-tie (passed).
    #[serde(default)]
    pub ties: Vec<Tie>,
}

/// Where one prompt's answers parted at a near-tie: each chose a token the other ranked among its
/// most likely; nothing after it is compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tie {
    pub prompt: String,
    /// Index of the token (0 = the first generated token).
    pub index: usize,
    pub reference_token: Alternative,
    pub candidate_token: Alternative,
}

impl fmt::Display for Tie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let logprob = |token: &Alternative| token.logprob.map_or(String::new(), |logprob| format!(" ({logprob:.3})"));
        write!(
            f,
            "prompt {:?}: token {}: reference {:?}{}, candidate {:?}{}, each among the other's most likely",
            self.prompt,
            self.index,
            self.reference_token.text,
            logprob(&self.reference_token),
            self.candidate_token.text,
            logprob(&self.candidate_token)
        )
    }
}

/// The first difference in one prompt's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mismatch {
    pub prompt: String,
    /// Index of the first token that differs (0 = the first generated token).
    pub index: usize,
    pub kind: MismatchKind,
    pub reference_token: Option<GateToken>,
    pub candidate_token: Option<GateToken>,
    /// The reference's and the candidate's text around it, the token in ⟦ ⟧.
    pub reference_context: String,
    pub candidate_context: String,
    pub reference_image: String,
    pub candidate_image: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum MismatchKind {
    /// Another token was chosen.
    Token,
    /// One answer ended before the other.
    Length,
    /// The same token, with a log-probability moved by `delta` nats.
    Logprob { delta: f64 },
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            MismatchKind::Token => format!("token {} differs", self.index),
            MismatchKind::Length => format!("the answers end differently at token {}", self.index),
            MismatchKind::Logprob { delta } => {
                format!("token {}'s log-probability moved by {delta:.3} nats", self.index)
            }
        };
        write!(
            f,
            "prompt {:?}: {what}: reference (image {}) {:?}, candidate (image {}) {:?}",
            self.prompt, self.reference_image, self.reference_context, self.candidate_image, self.candidate_context
        )
    }
}

impl GateVerdict {
    /// The error a failed gate is, naming every mismatch (none when it passed).
    pub fn failure(&self) -> Option<Error> {
        if self.passed {
            return None;
        }
        let lines: Vec<String> = self.mismatches.iter().map(|mismatch| format!("  {mismatch}")).collect();
        Some(Error::Verification {
            message: format!(
                "the gate failed: {} of the prompts answer differently on image {} ({}) than the reference on image {} ({}):\n{}",
                self.mismatches.len(),
                self.candidate_image,
                self.candidate_layout,
                self.reference_image,
                self.reference_layout,
                lines.join("\n")
            ),
            fix: Some(
                "keep the previous image (`strix-toolbox rollback`, or `cluster refresh` to its digest); compare with one node \
                 serving alone (`--reference single-node`) to tell the image from the cluster"
                    .into(),
            ),
        })
    }
}

/// Compare `candidate` with `reference`.
pub fn compare(reference: &GateRun, candidate: &GateRun, tolerance: f64) -> Result<GateVerdict> {
    if reference.model != candidate.model {
        return Err(Error::Internal(format!(
            "the gate compared {} with a reference of another model ({})",
            candidate.model, reference.model
        )));
    }
    if reference.fingerprint != candidate.fingerprint {
        return Err(Error::Internal(format!(
            "the gate compared prompt set v{} with a reference of prompt set v{}",
            candidate.prompt_set, reference.prompt_set
        )));
    }
    let mut verdict = GateVerdict {
        passed: true,
        compared_tokens: 0,
        max_logprob_delta: None,
        logprob_tolerance: tolerance,
        reference_image: reference.image.clone(),
        candidate_image: candidate.image.clone(),
        reference_layout: reference.layout.clone(),
        candidate_layout: candidate.layout.clone(),
        mismatches: Vec::new(),
        ties: Vec::new(),
    };
    for expected in &reference.answers {
        let empty = Vec::new();
        let got = candidate
            .answers
            .iter()
            .find(|answer| answer.prompt == expected.prompt)
            .map_or(&empty, |answer| &answer.tokens);
        match first_difference(&expected.tokens, got, tolerance, &mut verdict) {
            Difference::None => {}
            Difference::Tie(index) => verdict.ties.push(Tie {
                prompt: expected.prompt.clone(),
                index,
                reference_token: expected.tokens.get(index).map(GateToken::alone).unwrap_or_default(),
                candidate_token: got.get(index).map(GateToken::alone).unwrap_or_default(),
            }),
            Difference::Mismatch(index, kind) => verdict.mismatches.push(Mismatch {
                prompt: expected.prompt.clone(),
                index,
                kind,
                reference_token: expected.tokens.get(index).cloned(),
                candidate_token: got.get(index).cloned(),
                reference_context: context(&expected.tokens, index),
                candidate_context: context(got, index),
                reference_image: reference.image.clone(),
                candidate_image: candidate.image.clone(),
            }),
        }
    }
    verdict.passed = verdict.mismatches.is_empty();
    Ok(verdict)
}

/// How one prompt's answers compare.
enum Difference {
    None,
    /// They part at this token, a near-tie.
    Tie(usize),
    Mismatch(usize, MismatchKind),
}

fn first_difference(
    expected: &[GateToken],
    got: &[GateToken],
    tolerance: f64,
    verdict: &mut GateVerdict,
) -> Difference {
    for (index, (want, have)) in expected.iter().zip(got).enumerate() {
        verdict.compared_tokens += 1;
        if !want.same_as(have) {
            // Each among the other's most likely: a near-tie; the texts part from here.
            return if want.ranks(have) && have.ranks(want) {
                Difference::Tie(index)
            } else {
                Difference::Mismatch(index, MismatchKind::Token)
            };
        }
        if let (Some(a), Some(b)) = (want.logprob, have.logprob) {
            let delta = (a - b).abs();
            verdict.max_logprob_delta = Some(verdict.max_logprob_delta.map_or(delta, |max: f64| max.max(delta)));
            if delta > tolerance {
                return Difference::Mismatch(index, MismatchKind::Logprob { delta });
            }
        }
    }
    if expected.len() != got.len() {
        return Difference::Mismatch(expected.len().min(got.len()), MismatchKind::Length);
    }
    Difference::None
}

/// `…text before⟦token⟧text after…` of `tokens` around `index` (`⟦⟧` past the end).
fn context(tokens: &[GateToken], index: usize) -> String {
    let text =
        |range: std::ops::Range<usize>| tokens[range].iter().map(|token| token.text.as_str()).collect::<String>();
    let start = index.saturating_sub(CONTEXT_BEFORE).min(tokens.len());
    let at = index.min(tokens.len());
    let end = (index + 1 + CONTEXT_AFTER).min(tokens.len());
    let lead = if start > 0 { "…" } else { "" };
    let token = tokens.get(index).map_or(String::new(), |token| token.text.clone());
    let tail = if index < tokens.len() { text(index + 1..end) } else { String::new() };
    let trail = if end < tokens.len() { "…" } else { "" };
    format!("{lead}{}⟦{token}⟧{tail}{trail}", text(start..at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::gate::answer::{GateAnswer, GATE_FORMAT};
    use crate::bench::key::ModelIdentity;

    fn token(id: u32, text: &str, logprob: f64) -> GateToken {
        GateToken { id: Some(id), text: text.into(), logprob: Some(logprob), top: Vec::new() }
    }

    /// `token` with `others` ranked after it.
    fn ranking(token: GateToken, others: &[(u32, &str, f64)]) -> GateToken {
        let mut top = vec![token.alone()];
        top.extend(others.iter().map(|&(id, text, logprob)| Alternative {
            id: Some(id),
            text: text.into(),
            logprob: Some(logprob),
        }));
        GateToken { top, ..token }
    }

    fn run(image: &str, answers: Vec<(&str, Vec<GateToken>)>) -> GateRun {
        GateRun {
            format: GATE_FORMAT,
            prompt_set: 1,
            fingerprint: "f".into(),
            model: ModelIdentity::Gguf { name: "tiny.gguf".into(), sha256: "aa".into() },
            engine: crate::serving::llama::LLAMA_CPP,
            image: image.into(),
            layout: "one node alone".into(),
            endpoint: "http://127.0.0.1:8080/v1".into(),
            taken_at: "2026-11-24T10:00:00Z".into(),
            answers: answers
                .into_iter()
                .map(|(prompt, tokens)| GateAnswer {
                    prompt: prompt.into(),
                    text: tokens.iter().map(|token| token.text.as_str()).collect(),
                    tokens,
                })
                .collect(),
        }
    }

    fn sentence() -> Vec<GateToken> {
        ["The", " capital", " of", " France", " is", " Paris", ",", " a", " city", " of", " light"]
            .iter()
            .enumerate()
            .map(|(index, text)| token(index as u32 + 100, text, -0.5))
            .collect()
    }

    #[test]
    fn the_same_answers_pass() {
        let reference = run("sha256:aaaa", vec![("capital", sentence()), ("count", sentence())]);
        let candidate = run("sha256:bbbb", vec![("capital", sentence()), ("count", sentence())]);
        let verdict = compare(&reference, &candidate, DEFAULT_LOGPROB_TOLERANCE).unwrap();
        assert!(verdict.passed);
        assert_eq!(verdict.compared_tokens, 22);
        assert_eq!(verdict.max_logprob_delta, Some(0.0));
        assert!(verdict.failure().is_none());
    }

    #[test]
    fn the_first_differing_token_is_named_with_both_texts() {
        let mut changed = sentence();
        changed[5] = token(999, " London", -0.7);
        let reference = run("sha256:aaaa", vec![("capital", sentence()), ("count", sentence())]);
        let candidate = run("sha256:bbbb", vec![("capital", changed), ("count", sentence())]);
        let verdict = compare(&reference, &candidate, DEFAULT_LOGPROB_TOLERANCE).unwrap();
        assert!(!verdict.passed);
        assert_eq!(verdict.mismatches.len(), 1);
        let mismatch = &verdict.mismatches[0];
        assert_eq!((mismatch.prompt.as_str(), mismatch.index, mismatch.kind), ("capital", 5, MismatchKind::Token));
        assert_eq!(mismatch.reference_context, "The capital of France is⟦ Paris⟧, a city of…");
        assert_eq!(mismatch.candidate_context, "The capital of France is⟦ London⟧, a city of…");
        let message = verdict.failure().unwrap().to_string();
        assert!(message.contains("prompt \"capital\": token 5 differs"), "{message}");
        assert!(message.contains("sha256:aaaa") && message.contains("sha256:bbbb"), "{message}");
        assert!(message.contains("⟦ London⟧"), "{message}");
    }

    #[test]
    fn a_near_tie_ends_the_prompt_and_passes_but_an_unranked_token_fails() {
        // The reference ranked " Lyon" second; the candidate chose it and ranked " Paris" second.
        let mut reference = sentence();
        reference[5] = ranking(reference[5].clone(), &[(300, " Lyon", -0.52), (301, " Nice", -3.0)]);
        let mut parted = sentence();
        parted[5] = ranking(token(300, " Lyon", -0.51), &[(105, " Paris", -0.53)]);
        for later in &mut parted[6..] {
            *later = token(999, " elsewhere", -2.0);
        }
        let reference_run = run("sha256:aaaa", vec![("capital", reference.clone()), ("count", sentence())]);
        let verdict = compare(
            &reference_run,
            &run("sha256:bbbb", vec![("capital", parted.clone()), ("count", sentence())]),
            DEFAULT_LOGPROB_TOLERANCE,
        )
        .unwrap();
        assert!(verdict.passed, "{:?}", verdict.mismatches);
        assert_eq!(verdict.compared_tokens, 6 + 11, "the tie is compared, nothing after it");
        assert_eq!(verdict.ties.len(), 1);
        let tie = &verdict.ties[0];
        assert_eq!((tie.prompt.as_str(), tie.index), ("capital", 5));
        assert_eq!((tie.reference_token.text.as_str(), tie.candidate_token.text.as_str()), (" Paris", " Lyon"));
        assert!(tie.to_string().contains("token 5: reference \" Paris\" (-0.500), candidate \" Lyon\""), "{tie}");

        // Only one way round is not a tie: the candidate did not rank the reference's token.
        let mut one_way = parted.clone();
        one_way[5] = ranking(token(300, " Lyon", -0.51), &[(302, " Marseille", -0.53)]);
        let verdict =
            compare(&reference_run, &run("sha256:bbbb", vec![("capital", one_way), ("count", sentence())]), 0.1)
                .unwrap();
        assert!(!verdict.passed && verdict.ties.is_empty());
        assert_eq!((verdict.mismatches[0].index, verdict.mismatches[0].kind), (5, MismatchKind::Token));

        // Without alternatives (a reference kept before they were asked for), a flip fails.
        let verdict = compare(
            &run("sha256:aaaa", vec![("capital", sentence())]),
            &run("sha256:bbbb", vec![("capital", parted)]),
            0.1,
        )
        .unwrap();
        assert!(!verdict.passed);
    }

    #[test]
    fn logprob_drift_beyond_the_tolerance_and_short_answers_fail() {
        let mut drifted = sentence();
        drifted[2].logprob = Some(-0.75);
        let reference = run("sha256:aaaa", vec![("capital", sentence())]);
        let verdict = compare(&reference, &run("sha256:bbbb", vec![("capital", drifted.clone())]), 0.3).unwrap();
        assert!(verdict.passed, "0.25 is within 0.3");
        assert_eq!(verdict.max_logprob_delta, Some(0.25));
        let verdict = compare(&reference, &run("sha256:bbbb", vec![("capital", drifted)]), 0.1).unwrap();
        assert!(matches!(verdict.mismatches[0].kind, MismatchKind::Logprob { delta } if (delta - 0.25).abs() < 1e-12));

        let verdict =
            compare(&reference, &run("sha256:bbbb", vec![("capital", sentence()[..3].to_vec())]), 0.1).unwrap();
        assert_eq!((verdict.mismatches[0].index, verdict.mismatches[0].kind), (3, MismatchKind::Length));
        assert_eq!(verdict.mismatches[0].candidate_context, "The capital of⟦⟧");
        let verdict = compare(&reference, &run("sha256:bbbb", vec![]), 0.1).unwrap();
        assert_eq!(verdict.mismatches[0].index, 0);
    }

    #[test]
    fn another_model_is_never_compared() {
        let reference = run("sha256:aaaa", vec![("capital", sentence())]);
        let mut other = run("sha256:aaaa", vec![("capital", sentence())]);
        other.model = ModelIdentity::Gguf { name: "tiny.gguf".into(), sha256: "bb".into() };
        assert!(compare(&reference, &other, 0.1).is_err());
    }
}
