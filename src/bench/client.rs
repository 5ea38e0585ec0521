//! A client of one OpenAI-compatible endpoint (vLLM's or llama.cpp's server): streamed
//! completions stamped message by message, whole completions, `/v1/models` and `/tokenize`. Every
//! step is bounded (connecting, each wait for the next bytes, the whole request), and every error
//! names the URL, what was asked and what the server answered. The API key is a [`Secret`]: it
//! travels only in the `Authorization` header, which is marked sensitive, and nothing here
//! formats it.

use std::time::{Duration, Instant};

use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Response, StatusCode};

use super::api::{Completion, CompletionRequest, Detokenized, Tokenized};
use super::exchange::StreamedCompletion;
use super::key::EngineRef;
use super::sse::SseParser;
use crate::error::{Error, Result};
use crate::secret::Secret;
use crate::serving::openai_models::OpenAiModels;

/// The most of an error answer read, to quote it.
const ERROR_BODY_LIMIT: usize = 4096;
/// The most of a whole (non-streamed) answer read: a gate answer is a few kilobytes.
const BODY_LIMIT: usize = 16 << 20;

/// Where the API is, and its key.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `http://HOST:PORT/v1`, no trailing slash.
    base: String,
    api_key: Option<Secret>,
}

impl Endpoint {
    /// `http://HOST:PORT` or `http://HOST:PORT/v1` (what `launch` prints).
    pub fn new(url: &str, api_key: Option<Secret>) -> Result<Endpoint> {
        let trimmed = url.trim().trim_end_matches('/');
        let parsed = reqwest::Url::parse(trimmed).map_err(|e| {
            Error::Usage(format!("{url:?} is not an endpoint URL ({e}). Fix: give it as http://HOST:PORT/v1"))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(Error::Usage(format!(
                "{url:?} is not an http(s) endpoint. Fix: give it as http://HOST:PORT/v1"
            )));
        }
        let base = if trimmed.ends_with("/v1") { trimmed.to_string() } else { format!("{trimmed}/v1") };
        Ok(Endpoint { base, api_key })
    }

    /// `http://HOST:PORT/v1`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `http://HOST:PORT`: where the servers' own routes (`/tokenize`, `/health`) are.
    pub fn root(&self) -> &str {
        self.base.strip_suffix("/v1").unwrap_or(&self.base)
    }
}

/// How long each step may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    /// The longest wait for the next bytes of an answer (a long prefill under load stays well
    /// below it).
    pub idle: Duration,
    /// The longest one request may take, its whole answer included.
    pub request: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(10),
            idle: Duration::from_secs(300),
            request: Duration::from_secs(1800),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    endpoint: Endpoint,
    timeouts: Timeouts,
}

impl ApiClient {
    pub fn new(endpoint: Endpoint, timeouts: Timeouts) -> Result<ApiClient> {
        let http = reqwest::Client::builder()
            .connect_timeout(timeouts.connect)
            .read_timeout(timeouts.idle)
            .timeout(timeouts.request)
            .tcp_nodelay(true)
            .build()
            .map_err(|e| Error::Internal(format!("cannot build the HTTP client: {e}")))?;
        Ok(ApiClient { http, endpoint, timeouts })
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The names `/v1/models` lists (the first is what vLLM's bench uses when not told).
    pub async fn served_models(&self) -> Result<Vec<String>> {
        let url = format!("{}/models", self.endpoint.base);
        let request = self.authorized(self.http.get(&url));
        let body = self.read_whole(request, &format!("GET {url}"), "the model list").await?;
        let list = OpenAiModels::parse(&body).map_err(|e| {
            super::error::endpoint(
                &format!("GET {url}"),
                "the model list",
                &format!("not a model list ({e}): {}", String::from_utf8_lossy(&body)),
                "check that the URL is the OpenAI-compatible endpoint (`…/v1`) of vLLM or llama.cpp's server",
            )
        })?;
        Ok(list.ids())
    }

    /// The server's own tokens for `text`, with the model's special tokens (BOS) or without.
    /// vLLM and llama.cpp both answer `POST /tokenize` with `{"tokens": […]}`; their requests differ.
    pub async fn tokenize(&self, engine: EngineRef, model: &str, text: &str, add_special: bool) -> Result<Vec<u32>> {
        let url = format!("{}/tokenize", self.endpoint.root());
        let what = format!("tokenize a {}-character text for {engine}", text.chars().count());
        let fix = format!("check that the endpoint is served by {engine}");
        let request = engine.tokenize_request(model, text, add_special);
        let tokenized: Tokenized = self.post(&url, &request, &what, "a token list", &fix).await?;
        Ok(tokenized.tokens)
    }

    /// The server's text for `tokens` (`POST /detokenize`, which vLLM and llama.cpp both have).
    pub async fn detokenize(&self, model: &str, tokens: &[u32]) -> Result<String> {
        let url = format!("{}/detokenize", self.endpoint.root());
        let what = format!("detokenize {} tokens", tokens.len());
        let fix = "check that the endpoint is served by vLLM or llama.cpp's server, or bench with --prompts token-ids";
        let request = serde_json::json!({ "model": model, "tokens": tokens });
        let detokenized: Detokenized = self.post(&url, &request, &what, "a text", fix).await?;
        Ok(detokenized.prompt)
    }

    /// A completion in one answer (`stream: false`).
    pub async fn complete(&self, request: &CompletionRequest) -> Result<Completion> {
        let url = format!("{}/completions", self.endpoint.base);
        let what = describe(request);
        let fix = "check that the URL is the OpenAI-compatible endpoint (`…/v1`) of vLLM or llama.cpp's server";
        let completion: Completion = self.post(&url, request, &what, "a completion", fix).await?;
        if let Some(error) = completion.error {
            return Err(super::error::endpoint(
                &format!("POST {url}"),
                &what,
                &error.to_string(),
                "see the server's log",
            ));
        }
        Ok(completion)
    }

    /// A streamed completion, each message stamped as it arrives. Never an error: a request
    /// that fails is a failed request in the figures, with its reason.
    pub async fn stream(&self, request: &CompletionRequest) -> StreamedCompletion {
        let url = format!("{}/completions", self.endpoint.base);
        let body = match serde_json::to_vec(request) {
            Ok(body) => body,
            Err(e) => return StreamedCompletion::failed(Instant::now(), format!("cannot encode the request: {e}")),
        };
        let (sent, answer) = send(self.post_json(&url, body)).await;
        let mut response = match answer {
            Ok(response) => response,
            Err(error) => return StreamedCompletion::failed(sent, self.transport_failure(&url, &error)),
        };
        if response.status() != StatusCode::OK {
            let why = answer_of(response).await;
            return StreamedCompletion::failed(sent, format!("POST {url}: {why}"));
        }
        let mut stream = StreamedCompletion::new(sent);
        let mut parser = SseParser::new();
        loop {
            match response.chunk().await {
                Ok(Some(bytes)) => {
                    let at = Instant::now();
                    for message in parser.push(&bytes) {
                        stream.receive(at, message);
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    stream.fail(self.transport_failure(&url, &error));
                    break;
                }
            }
        }
        let at = Instant::now();
        for message in parser.finish() {
            stream.receive(at, message);
        }
        stream.end();
        stream
    }

    /// POST `request` as JSON to `url` and read the whole answer as a `T`; an answer that is not
    /// one is an error naming what it should have been (`not_a`) and `fix`.
    async fn post<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        request: &impl serde::Serialize,
        what: &str,
        not_a: &str,
        fix: &str,
    ) -> Result<T> {
        let body = serde_json::to_vec(request)
            .map_err(|e| Error::Internal(format!("cannot encode the request to {what}: {e}")))?;
        let answer = self.read_whole(self.post_json(url, body), &format!("POST {url}"), what).await?;
        serde_json::from_slice(&answer).map_err(|e| {
            super::error::endpoint(
                &format!("POST {url}"),
                what,
                &format!("not {not_a} ({e}): {}", String::from_utf8_lossy(&answer)),
                fix,
            )
        })
    }

    fn post_json(&self, url: &str, body: Vec<u8>) -> reqwest::RequestBuilder {
        self.authorized(self.http.post(url).header(CONTENT_TYPE, "application/json").body(body))
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.endpoint.api_key {
            Some(key) => match HeaderValue::from_str(&format!("Bearer {}", key.expose())) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    request.header(AUTHORIZATION, value)
                }
                // A key with a newline or control character cannot be a header: the server will
                // say 401, which names the problem better than a panic.
                Err(_) => request,
            },
            None => request,
        }
    }

    /// Send, and read the whole answer of a 200; anything else is an error naming the answer.
    async fn read_whole(&self, request: reqwest::RequestBuilder, method_url: &str, what: &str) -> Result<Vec<u8>> {
        let url = method_url.split_once(' ').map_or(method_url, |(_, url)| url);
        let (_, answer) = send(request).await;
        let response = answer.map_err(|error| {
            super::error::endpoint(method_url, what, &self.transport_failure(url, &error), &self.reach_fix())
        })?;
        let status = response.status();
        if status != StatusCode::OK {
            let why = answer_of(response).await;
            let fix = if status == StatusCode::UNAUTHORIZED {
                "the server wants an API key: pass the one it was started with (--api-key-file FILE)".to_string()
            } else {
                "see the server's log (`strix-toolbox logs`)".to_string()
            };
            return Err(super::error::endpoint(method_url, what, &why, &fix));
        }
        read_limited(response, BODY_LIMIT).await.map_err(|error| {
            super::error::endpoint(method_url, what, &self.transport_failure(url, &error), &self.reach_fix())
        })
    }

    fn reach_fix(&self) -> String {
        format!("check that the server answers at {} (`strix-toolbox status`)", self.endpoint.base)
    }

    /// Why nothing (or not all) came back, with the limit that was hit.
    fn transport_failure(&self, url: &str, error: &reqwest::Error) -> String {
        let mut why = if error.is_connect() {
            format!("cannot connect to {url}")
        } else if error.is_timeout() {
            format!(
                "no answer in time (connect {} s, {} s between bytes, {} s in all)",
                self.timeouts.connect.as_secs(),
                self.timeouts.idle.as_secs(),
                self.timeouts.request.as_secs()
            )
        } else {
            format!("the exchange with {url} failed")
        };
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            why.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        why
    }
}

/// Send `request`; when the connection fails before any answer (a kept-alive connection the
/// server had just closed: llama.cpp's server does that now and then), send it once more on a new
/// one. Returns when the answered attempt was sent, so a retried request's clock starts at its
/// retry.
async fn send(request: reqwest::RequestBuilder) -> (Instant, reqwest::Result<Response>) {
    let again = request.try_clone();
    let sent = Instant::now();
    match (request.send().await, again) {
        (Err(error), Some(again)) if !error.is_timeout() => (Instant::now(), again.send().await),
        (answer, _) => (sent, answer),
    }
}

/// `HTTP 401 Unauthorized: {body}`.
async fn answer_of(response: Response) -> String {
    let status = response.status();
    let body = read_limited(response, ERROR_BODY_LIMIT).await.unwrap_or_default();
    let body = String::from_utf8_lossy(&body);
    format!("HTTP {status}: {}", super::error::excerpt(&body))
}

async fn read_limited(mut response: Response, limit: usize) -> reqwest::Result<Vec<u8>> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= limit {
            break;
        }
    }
    Ok(body)
}

/// What a completion request asked, for errors.
fn describe(request: &CompletionRequest) -> String {
    format!(
        "a completion of {} tokens from {} for model {}",
        request.max_tokens,
        request.prompt.describe(),
        request.model
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_normalized_to_the_v1_base() {
        let endpoint = Endpoint::new("http://127.0.0.1:8080", None).unwrap();
        assert_eq!(endpoint.base(), "http://127.0.0.1:8080/v1");
        assert_eq!(endpoint.root(), "http://127.0.0.1:8080");
        assert_eq!(Endpoint::new("http://10.0.0.1:8000/v1/", None).unwrap().base(), "http://10.0.0.1:8000/v1");
        assert!(Endpoint::new("127.0.0.1:8080", None).is_err());
        assert!(Endpoint::new("ftp://host/v1", None).is_err());
    }

    #[test]
    fn the_key_never_shows_in_debug_output() {
        let endpoint = Endpoint::new("http://127.0.0.1:8080", Some(Secret::new("sk-very-secret".into()))).unwrap();
        let client = ApiClient::new(endpoint, Timeouts::default()).unwrap();
        assert!(!format!("{client:?}").contains("sk-very-secret"));
        let request = client.authorized(client.http.get("http://127.0.0.1:8080/v1/models")).build().unwrap();
        assert!(!format!("{request:?}").contains("sk-very-secret"));
        assert_eq!(request.headers()[AUTHORIZATION].to_str().unwrap(), "Bearer sk-very-secret");
    }
}
