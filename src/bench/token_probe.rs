//! The watch's probe of an engine: a one-token greedy completion at the engine's own port, with a
//! deadline, asked on the node that runs it (the engine listens on the cluster link, which the
//! machine driving the cluster may not reach). Whether it answered, was refused, or took the
//! request and said nothing in time (what a stopped or deadlocked engine does).

use std::net::SocketAddr;
use std::time::Duration;

use crate::watch::ProbeOutcome;

/// The probe's prompt and length: one token proves the engine generates.
const PROBE_PROMPT: &str = "Hello";
const PROBE_TOKENS: u32 = 1;
/// The most of a probe's answer read.
const PROBE_BODY_LIMIT: usize = 1 << 20;

/// `POST /v1/completions` for one token, greedy: passed when it answers 200 with a choice; timed
/// out when it took the request and said nothing whole within the deadline.
/// `bearer`: the engine's API key, when it has one.
pub async fn token_probe(
    address: SocketAddr,
    served_model: &str,
    bearer: Option<&str>,
    deadline: Duration,
) -> ProbeOutcome {
    let client = match reqwest::Client::builder().connect_timeout(deadline).timeout(deadline).tcp_nodelay(true).build()
    {
        Ok(client) => client,
        Err(error) => return ProbeOutcome::Failed(format!("cannot build the HTTP client: {error}")),
    };
    let body = serde_json::json!({
        "model": served_model,
        "prompt": PROBE_PROMPT,
        "max_tokens": PROBE_TOKENS,
        "temperature": 0.0,
    });
    let url = format!("http://{address}/v1/completions");
    let mut request = client.post(&url).header("content-type", "application/json").body(body.to_string());
    if let Some(bearer) = bearer {
        request = request.bearer_auth(bearer);
    }
    let sent = request.send().await;
    let mut answer = match sent {
        Ok(answer) => answer,
        Err(error) => return failed_request(&url, &error),
    };
    let status = answer.status();
    let mut text = Vec::new();
    loop {
        match answer.chunk().await {
            Ok(Some(chunk)) if text.len() + chunk.len() <= PROBE_BODY_LIMIT => text.extend_from_slice(&chunk),
            Ok(Some(_)) => return ProbeOutcome::Failed(format!("{url} answered more than {PROBE_BODY_LIMIT} bytes")),
            Ok(None) => break,
            Err(error) => return failed_request(&url, &error),
        }
    }
    judge(&url, status.as_u16(), &text)
}

fn failed_request(url: &str, error: &reqwest::Error) -> ProbeOutcome {
    if error.is_timeout() && !error.is_connect() {
        return ProbeOutcome::TimedOut;
    }
    let why = if error.is_connect() { "nothing answers there".to_string() } else { error.to_string() };
    ProbeOutcome::Failed(format!("POST {url}: {why}"))
}

/// A 200 with at least one choice passes; anything else fails, saying what came.
fn judge(url: &str, status: u16, body: &[u8]) -> ProbeOutcome {
    let text = String::from_utf8_lossy(body);
    let excerpt: String = text.chars().take(200).collect();
    if status != 200 {
        return ProbeOutcome::Failed(format!("POST {url} answered {status}: {excerpt}"));
    }
    let value: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    match value["choices"].as_array() {
        Some(choices) if !choices.is_empty() => ProbeOutcome::Passed,
        _ => ProbeOutcome::Failed(format!("POST {url} answered no completion: {excerpt}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_with_a_choice_passes_and_anything_else_says_what_came() {
        let url = "http://192.168.2.1:8001/v1/completions";
        assert_eq!(judge(url, 200, br#"{"choices":[{"text":" world"}]}"#), ProbeOutcome::Passed);
        assert_eq!(
            judge(url, 503, b"{\"error\":\"Loading model\"}"),
            ProbeOutcome::Failed(format!("POST {url} answered 503: {{\"error\":\"Loading model\"}}"))
        );
        let ProbeOutcome::Failed(why) = judge(url, 200, b"{\"choices\":[]}") else { panic!("no choice passed") };
        assert!(why.contains("no completion"), "{why}");
        assert!(matches!(judge(url, 200, b"\xff\xfe"), ProbeOutcome::Failed(_)));
    }
}
