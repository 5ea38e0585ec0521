//! One streamed completion as it arrived: when it was sent, when each message with a choice came
//! (vLLM's client stamps exactly those: its TTFT is the first, its ITLs the gaps between the
//! next ones, its latency the last), the text, and the token counts the server reported.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::api::{Completion, Usage};
use super::sse::SseMessage;

/// What the client saw of one streamed request.
#[derive(Debug, Clone)]
pub struct StreamedCompletion {
    pub sent: Instant,
    /// When each message carrying a choice arrived (even an empty text counts, as in vLLM).
    pub arrivals: Vec<Instant>,
    pub text: String,
    /// The server's own counts (vLLM in a last message without choices when asked with
    /// `stream_options.include_usage`; llama.cpp in its last message, beside its choice).
    pub usage: Option<Usage>,
    /// `[DONE]` came.
    pub done: bool,
    /// Why the request failed, if it did.
    pub error: Option<String>,
}

impl StreamedCompletion {
    pub fn new(sent: Instant) -> StreamedCompletion {
        StreamedCompletion { sent, arrivals: Vec::new(), text: String::new(), usage: None, done: false, error: None }
    }

    pub fn failed(sent: Instant, error: String) -> StreamedCompletion {
        StreamedCompletion { error: Some(error), ..StreamedCompletion::new(sent) }
    }

    /// One message, arrived at `at`.
    pub fn receive(&mut self, at: Instant, message: SseMessage) {
        let data = match message {
            SseMessage::Done => {
                self.done = true;
                return;
            }
            SseMessage::Data(data) => data,
        };
        let completion: Completion = match serde_json::from_str(&data) {
            Ok(completion) => completion,
            Err(error) => {
                self.fail(format!(
                    "a streamed message is not a completion ({error}): {}",
                    super::error::excerpt(&data)
                ));
                return;
            }
        };
        if let Some(error) = completion.error {
            self.fail(format!(
                "the server reported an error mid-stream: {}",
                super::error::excerpt(&error.to_string())
            ));
        }
        if let Some(choice) = completion.choices.first() {
            self.arrivals.push(at);
            self.text.push_str(choice.text.as_deref().unwrap_or(""));
        }
        if completion.usage.is_some() {
            self.usage = completion.usage;
        }
    }

    /// The first failure is the one that explains.
    pub fn fail(&mut self, why: String) {
        self.error.get_or_insert(why);
    }

    /// The stream ended: a stream that never carried a choice failed, as vLLM counts it.
    pub fn end(&mut self) {
        if self.arrivals.is_empty() {
            self.fail("the stream ended without a single token".into());
        }
    }

    /// This request's figures; `origin` is when its load level began, `prompt_tokens` how many it
    /// sent as ids (0 for a text), counted only when the server's usage does not say.
    pub fn outcome(&self, origin: Instant, prompt_tokens: u64) -> RequestOutcome {
        let start = self.sent.saturating_duration_since(origin).as_secs_f64();
        let (Some(first), Some(last), None) = (self.arrivals.first(), self.arrivals.last(), &self.error) else {
            return RequestOutcome {
                success: false,
                start,
                ttft: 0.0,
                itl: Vec::new(),
                latency: 0.0,
                output_tokens: 0,
                prompt_tokens,
                error: self.error.clone().or_else(|| Some("no token arrived".into())),
            };
        };
        let seconds = |later: &Instant, earlier: &Instant| later.saturating_duration_since(*earlier).as_secs_f64();
        RequestOutcome {
            success: true,
            start,
            ttft: seconds(first, &self.sent),
            itl: self.arrivals.windows(2).map(|pair| seconds(&pair[1], &pair[0])).collect(),
            latency: seconds(last, &self.sent),
            // Without the server's count, one per message (vLLM would tokenize the text instead).
            output_tokens: self.usage.map_or(self.arrivals.len() as u64, |usage| usage.completion_tokens),
            // The server's count, as vLLM's bench reads it: a text prompt's is only the server's.
            prompt_tokens: self.usage.map_or(prompt_tokens, |usage| usage.prompt_tokens),
            error: None,
        }
    }
}

/// One request's figures, as vLLM's `RequestFuncOutput` holds them (seconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestOutcome {
    pub success: bool,
    /// When it was sent, from the start of its level.
    pub start: f64,
    /// Time to the first message with a choice.
    pub ttft: f64,
    /// The gaps between the following ones.
    pub itl: Vec<f64>,
    /// From sending to the last message with a choice.
    pub latency: f64,
    pub output_tokens: u64,
    pub prompt_tokens: u64,
    pub error: Option<String>,
}

impl RequestOutcome {
    /// When each token arrived, from the start of its level (vLLM: start + TTFT + the ITLs).
    pub fn token_times(&self) -> Vec<f64> {
        let mut at = self.start + self.ttft;
        let mut times = vec![at];
        for gap in &self.itl {
            at += gap;
            times.push(at);
        }
        times
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn data(json: &str) -> SseMessage {
        SseMessage::Data(json.to_string())
    }

    #[test]
    fn timings_follow_the_messages_with_choices() {
        let origin = Instant::now();
        let sent = origin + Duration::from_millis(5);
        let mut stream = StreamedCompletion::new(sent);
        stream.receive(sent + Duration::from_millis(100), data(r#"{"choices":[{"text":"a"}]}"#));
        stream.receive(sent + Duration::from_millis(130), data(r#"{"choices":[{"text":""}]}"#));
        stream
            .receive(sent + Duration::from_millis(150), data(r#"{"choices":[{"text":"b","finish_reason":"length"}]}"#));
        // vLLM's usage message has no choice: it is no arrival.
        stream.receive(
            sent + Duration::from_millis(400),
            data(r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}"#),
        );
        stream.receive(sent + Duration::from_millis(401), SseMessage::Done);
        stream.end();
        let outcome = stream.outcome(origin, 7);
        assert!(outcome.success);
        assert!((outcome.start - 0.005).abs() < 1e-9);
        assert!((outcome.ttft - 0.100).abs() < 1e-9);
        assert_eq!(outcome.itl.len(), 2);
        assert!((outcome.itl[0] - 0.030).abs() < 1e-9 && (outcome.itl[1] - 0.020).abs() < 1e-9);
        assert!((outcome.latency - 0.150).abs() < 1e-9);
        assert_eq!(outcome.output_tokens, 3);
        assert_eq!(stream.text, "ab");
        let times = outcome.token_times();
        assert_eq!(times.len(), 3);
        assert!((times[2] - 0.155).abs() < 1e-9);
    }

    #[test]
    fn llama_cpp_usage_beside_its_last_choice_is_read() {
        let sent = Instant::now();
        let mut stream = StreamedCompletion::new(sent);
        stream.receive(sent, data(r#"{"choices":[{"text":"x","finish_reason":null}]}"#));
        stream.receive(
            sent,
            data(r#"{"choices":[{"text":"","finish_reason":"length"}],"usage":{"completion_tokens":1,"prompt_tokens":4,"total_tokens":5}}"#),
        );
        stream.end();
        assert_eq!(stream.outcome(sent, 4).output_tokens, 1);
        assert_eq!(stream.arrivals.len(), 2);
    }

    #[test]
    fn failures_say_why() {
        let sent = Instant::now();
        let mut empty = StreamedCompletion::new(sent);
        empty.receive(sent, SseMessage::Done);
        empty.end();
        let outcome = empty.outcome(sent, 1);
        assert!(!outcome.success);
        assert!(outcome.error.unwrap().contains("without a single token"));

        let mut broken = StreamedCompletion::new(sent);
        broken.receive(sent, data(r#"{"choices":[{"text":"x"}]}"#));
        broken.receive(sent, data(r#"{"error":{"message":"out of memory"}}"#));
        broken.receive(sent, data("not json"));
        let outcome = broken.outcome(sent, 1);
        assert!(!outcome.success);
        assert!(outcome.error.as_deref().unwrap().contains("out of memory"), "{outcome:?}");
    }
}
