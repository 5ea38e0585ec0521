//! The router's own refusals, in OpenAI's error shape, so an OpenAI client raises its usual
//! exception (404 → `NotFoundError`, 401 → `AuthenticationError`, ...) with the message:
//!
//! ```json
//! {"error": {"message": "...", "type": "invalid_request_error", "param": "model", "code": "model_not_found"}}
//! ```
//!
//! As OpenAI answers an unknown model (404, `invalid_request_error`, `model_not_found`) and a wrong
//! key (401, `invalid_request_error`, `invalid_api_key`). vLLM's own 404 says `NotFoundError` with
//! a numeric code and its 401 is a bare `{"error": "Unauthorized"}`; llama-server's 401 is
//! `{"error": {"message": "Invalid API Key", "type": "authentication_error", "code": 401}}`
//! (tools/server/server-http.cpp): clients read the status and `error.message`, which every shape
//! has. A key that may not use the model is OpenAI's 403 for a project without access to it
//! (`invalid_request_error`, `model_not_found`), a key past its rates OpenAI's 429
//! (`rate_limit_exceeded`, its `type` the limit: `requests` or `tokens`) with `Retry-After`. No
//! message carries a request's header or a key.

use std::time::Duration;

use hyper::StatusCode;
use serde_json::{json, Value};

/// One refusal: its status and the error object's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// `type`: OpenAI's `invalid_request_error` for what the client can fix, `server_error`
    /// for what the service behind failed.
    pub kind: &'static str,
    pub param: Option<&'static str>,
    pub code: Option<&'static str>,
    /// Seconds after which the request may pass (`Retry-After`), when it may.
    pub retry_after: Option<u64>,
}

const INVALID_REQUEST: &str = "invalid_request_error";
/// What a client waiting for a start on demand is told to wait before it asks again.
const RETRY_STARTING: u64 = 5;
const SERVER_ERROR: &str = "server_error";

impl ApiError {
    /// No service serves `model` (None: the request named none); the message lists what does.
    pub fn model_not_found(model: Option<&str>, served: &[&str]) -> ApiError {
        let what = match model {
            Some(model) => format!("The model `{model}` does not exist."),
            None => "The request names no model (its `model` field).".to_string(),
        };
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: format!("{what} {}", serving(served)),
            kind: INVALID_REQUEST,
            param: Some("model"),
            code: Some("model_not_found"),
            retry_after: None,
        }
    }

    /// No bearer token, or not the router's key. The message never repeats what was sent.
    pub fn invalid_api_key() -> ApiError {
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            message: "Incorrect API key provided: send the endpoint's key as `Authorization: Bearer KEY`.".into(),
            kind: INVALID_REQUEST,
            param: None,
            code: Some("invalid_api_key"),
            retry_after: None,
        }
    }

    /// The key `key` may not use `model`; `allowed`: what it may.
    pub fn model_not_allowed(key: &str, model: &str, allowed: &[String]) -> ApiError {
        let names: Vec<String> = allowed.iter().map(|name| format!("`{name}`")).collect();
        ApiError {
            status: StatusCode::FORBIDDEN,
            message: format!(
                "The key `{key}` does not have access to model `{model}`; it may use {}.",
                names.join(", ")
            ),
            kind: INVALID_REQUEST,
            param: Some("model"),
            code: Some("model_not_found"),
            retry_after: None,
        }
    }

    /// The key `key` is past its rate of `what` (`requests` or `tokens`) a minute for `model`.
    pub fn rate_limited(
        key: &str,
        model: &str,
        what: &'static str,
        limit: u64,
        used: u64,
        retry_after: u64,
    ) -> ApiError {
        let short = if what == "requests" { "RPM" } else { "TPM" };
        ApiError {
            status: StatusCode::TOO_MANY_REQUESTS,
            message: format!(
                "Rate limit reached for {model} with the key `{key}` on {what} per min ({short}): Limit {limit}, Used \
                 {used}. Please try again in {retry_after}s."
            ),
            kind: what,
            param: None,
            code: Some("rate_limit_exceeded"),
            retry_after: Some(retry_after),
        }
    }

    /// `model`, started on demand, did not serve within `wait` (its start goes on).
    pub fn still_starting(model: &str, wait: Duration) -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: format!(
                "The model `{model}` is starting on demand and did not serve within {} s; its start goes on: retry \
                 shortly.",
                wait.as_secs()
            ),
            kind: SERVER_ERROR,
            param: None,
            code: Some("model_starting"),
            retry_after: Some(RETRY_STARTING),
        }
    }

    /// A model started on demand could not be started: why, as the router says it ("`m` could
    /// not be started: …").
    pub fn start_failed(why: &str) -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: format!("The model {why}"),
            kind: SERVER_ERROR,
            param: None,
            code: Some("model_start_failed"),
            retry_after: None,
        }
    }

    /// A path or method the router does not serve.
    pub fn unknown_route(method: &str, path: &str) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: format!("Invalid URL ({method} {path})"),
            kind: INVALID_REQUEST,
            param: None,
            code: None,
            retry_after: None,
        }
    }

    /// The body was not JSON with a string `model` (why: serde's words).
    pub fn invalid_body(why: &str) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: format!("The request body is not a JSON object with a string `model`: {why}"),
            kind: INVALID_REQUEST,
            param: None,
            code: Some("invalid_json"),
            retry_after: None,
        }
    }

    pub fn body_too_large(limit: usize) -> ApiError {
        ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!("The request body is larger than this endpoint takes ({} MiB).", limit >> 20),
            kind: INVALID_REQUEST,
            param: None,
            code: Some("request_too_large"),
            retry_after: None,
        }
    }

    /// The body did not finish arriving in time, or the client broke it off.
    pub fn body_incomplete(why: &str) -> ApiError {
        ApiError {
            status: StatusCode::REQUEST_TIMEOUT,
            message: format!("The request body did not arrive whole: {why}"),
            kind: INVALID_REQUEST,
            param: None,
            code: Some("request_incomplete"),
            retry_after: None,
        }
    }

    /// `service`'s engine refused the connection or broke it before answering.
    pub fn unreachable(service: &str, why: &str) -> ApiError {
        ApiError {
            status: StatusCode::BAD_GATEWAY,
            message: format!("The service `{service}` cannot be reached: {why}"),
            kind: SERVER_ERROR,
            param: None,
            code: Some("service_unreachable"),
            retry_after: None,
        }
    }

    /// `service`'s engine did not connect or begin its answer within `limit`.
    pub fn timed_out(service: &str, what: &str, limit: Duration) -> ApiError {
        ApiError {
            status: StatusCode::GATEWAY_TIMEOUT,
            message: format!("The service `{service}` did not {what} within {} s.", limit.as_secs()),
            kind: SERVER_ERROR,
            param: None,
            code: Some("service_timeout"),
            retry_after: None,
        }
    }

    /// The router already serves as many connections as it may.
    pub fn too_many_connections(limit: usize) -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: format!("The endpoint serves {limit} connections at once and has none free; retry shortly."),
            kind: SERVER_ERROR,
            param: None,
            code: Some("too_many_connections"),
            retry_after: None,
        }
    }

    /// The body as OpenAI sends it.
    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

/// "This endpoint serves `a`, `b`." (or that it serves none right now).
pub fn serving(served: &[&str]) -> String {
    if served.is_empty() {
        return "This endpoint serves no model right now.".to_string();
    }
    let names: Vec<String> = served.iter().map(|name| format!("`{name}`")).collect();
    format!("This endpoint serves {}.", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_model_is_openais_404_naming_what_is_served() {
        let error = ApiError::model_not_found(Some("gpt-4"), &["coder", "llama"]);
        assert_eq!(error.status, StatusCode::NOT_FOUND);
        assert_eq!(
            error.body(),
            json!({"error": {
                "message": "The model `gpt-4` does not exist. This endpoint serves `coder`, `llama`.",
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found",
            }})
        );
        let missing = ApiError::model_not_found(None, &[]);
        assert_eq!(
            missing.message,
            "The request names no model (its `model` field). This endpoint serves no model right now."
        );
    }

    #[test]
    fn a_wrong_key_is_openais_401() {
        let body = ApiError::invalid_api_key().body();
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["code"], "invalid_api_key");
        assert_eq!(body["error"]["param"], Value::Null);
        assert_eq!(ApiError::invalid_api_key().status, StatusCode::UNAUTHORIZED);
    }

    #[test]
    fn an_engine_that_fails_is_named_with_a_gateway_status() {
        let refused = ApiError::unreachable("coder", "connection refused (127.0.0.1:8001)");
        assert_eq!(refused.status, StatusCode::BAD_GATEWAY);
        assert!(refused.message.contains("`coder`") && refused.message.contains("connection refused"));
        let slow = ApiError::timed_out("coder", "begin its answer", Duration::from_secs(600));
        assert_eq!(slow.status, StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(slow.message, "The service `coder` did not begin its answer within 600 s.");
        assert_eq!(slow.body()["error"]["type"], "server_error");
    }
}
