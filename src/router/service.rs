//! One request, start to answer: which route it takes, the key, the body, the service.
//!
//! | route | key | answer |
//! |---|---|---|
//! | `GET /health` | no | 200 when every engine's `/health` says 200, else 503 naming the failing |
//! | `GET /health/{model}` | no | the same for the one service (404 when none is `model`) |
//! | `GET /v1/models`, `/models` | yes | every service's entry, merged ([`super::models_list`]) |
//! | `POST` [`FORWARDED`] | yes | the engine's answer, streamed, from the service the body's `model` names |
//!
//! Anything else is 404 (405 for a known path with another method), in OpenAI's error shape.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::Value;
use tokio::time::timeout;

use super::auth::ApiKey;
use super::bounds::Bounds;
use super::health::{health_report, probe, probe_all, service_report};
use super::model_field::{requested_model, RequestedModel};
use super::models_list::merged_models;
use super::openai_error::ApiError;
use super::proxy::{client_response, upstream_request};
use super::table::LiveTable;
use super::upstream::{exchange, get, UpstreamBody, UpstreamFailure};
use crate::reporter::Reporter;
use crate::serving::service_name::percent_decoded;

/// The POST paths sent on by their body's `model`: the OpenAI paths and the unversioned ones
/// llama-server also has (tools/server/server.cpp), and vLLM's and llama-server's tokenizer.
pub const FORWARDED: [&str; 8] = [
    "/v1/chat/completions",
    "/chat/completions",
    "/v1/completions",
    "/completions",
    "/v1/embeddings",
    "/embeddings",
    "/tokenize",
    "/detokenize",
];

const MODELS: [&str; 2] = ["/v1/models", "/models"];

/// What every request reads: the table, the key, the bounds, where log lines go.
pub struct Shared {
    pub table: LiveTable,
    pub api_key: Option<ApiKey>,
    pub bounds: Bounds,
    pub reporter: Arc<dyn Reporter>,
}

/// The router's own answers are whole; an engine's streams.
pub type RouterBody = Either<Full<Bytes>, UpstreamBody>;

/// Where a request goes, by its method and path alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route<'a> {
    Health,
    /// `/health/{model}`: the model's name as the path has it (still percent-encoded).
    ServiceHealth(&'a str),
    Models,
    Forward,
    /// A path the router serves, asked with another method (405).
    WrongMethod,
    Unknown,
}

impl Route<'_> {
    /// Whether it needs the endpoint's key (when the router has one).
    pub fn needs_key(self) -> bool {
        !matches!(self, Route::Health | Route::ServiceHealth(_))
    }
}

pub fn route<'a>(method: &Method, path: &'a str) -> Route<'a> {
    let get = method == Method::GET;
    if let Some(model) = path.strip_prefix("/health/").filter(|model| get && !model.is_empty()) {
        return Route::ServiceHealth(model);
    }
    match path {
        "/health" if get => Route::Health,
        path if MODELS.contains(&path) && get => Route::Models,
        path if FORWARDED.contains(&path) && method == Method::POST => Route::Forward,
        path if path == "/health" || MODELS.contains(&path) || FORWARDED.contains(&path) => Route::WrongMethod,
        _ => Route::Unknown,
    }
}

pub async fn answer(shared: &Shared, request: Request<Incoming>) -> Response<RouterBody> {
    let route = route(request.method(), request.uri().path());
    if let Some(key) = shared.api_key.as_ref().filter(|_| route.needs_key()) {
        if !key.admits(request.headers().get(AUTHORIZATION)) {
            return refusal(&ApiError::invalid_api_key());
        }
    }
    match route {
        Route::Health => health(shared).await,
        Route::ServiceHealth(model) => service_health(shared, model).await,
        Route::Models => models_list(shared).await,
        Route::Forward => forward(shared, request).await,
        Route::WrongMethod | Route::Unknown => {
            let mut refused = ApiError::unknown_route(request.method().as_str(), request.uri().path());
            if route == Route::WrongMethod {
                refused.status = StatusCode::METHOD_NOT_ALLOWED;
            }
            refusal(&refused)
        }
    }
}

/// The body read whole (bounded in size and time), its `model` looked up, the request sent to
/// that service's engine and its answer passed back as it comes.
async fn forward(shared: &Shared, request: Request<Incoming>) -> Response<RouterBody> {
    let (head, body) = request.into_parts();
    let body = match read_body(&head.headers, body, &shared.bounds).await {
        Ok(body) => body,
        Err(refused) => return refusal(&refused),
    };
    let name = match requested_model(&body) {
        RequestedModel::Named(name) => Some(name),
        RequestedModel::Missing => None,
        RequestedModel::Invalid(why) => return refusal(&ApiError::invalid_body(&why)),
    };
    let table = shared.table.snapshot();
    let Some((name, upstream)) = name.as_deref().and_then(|name| Some((name, table.get(name)?.clone()))) else {
        return refusal(&ApiError::model_not_found(name.as_deref(), &table.names()));
    };
    drop(table);
    match exchange(&upstream, upstream_request(head, body), &shared.bounds).await {
        Ok(answer) => client_response(answer).map(Either::Right),
        Err(failure) => {
            shared.reporter.warning(&format!("router: service `{name}` at {}: {failure}", upstream.address));
            refusal(&upstream_refusal(name, &failure))
        }
    }
}

/// The body, whole: refused at once when its declared length is over the bound, cut off when
/// more than that arrives, or when it has not all come within its deadline.
async fn read_body(headers: &hyper::HeaderMap, body: Incoming, bounds: &Bounds) -> Result<Bytes, ApiError> {
    let declared = headers.get(CONTENT_LENGTH).and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > bounds.max_body_bytes as u64) {
        return Err(ApiError::body_too_large(bounds.max_body_bytes));
    }
    match timeout(bounds.request_body, Limited::new(body, bounds.max_body_bytes).collect()).await {
        Err(_) => Err(ApiError::body_incomplete(&format!("not all there after {} s", bounds.request_body.as_secs()))),
        Ok(Err(error)) if error.is::<LengthLimitError>() => Err(ApiError::body_too_large(bounds.max_body_bytes)),
        Ok(Err(error)) => Err(ApiError::body_incomplete(&error.to_string())),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

fn upstream_refusal(name: &str, failure: &UpstreamFailure) -> ApiError {
    match failure {
        UpstreamFailure::ConnectTimedOut(limit) => ApiError::timed_out(name, "accept a connection", *limit),
        UpstreamFailure::AnswerTimedOut(limit) => ApiError::timed_out(name, "begin its answer", *limit),
        other => ApiError::unreachable(name, &other.to_string()),
    }
}

async fn health(shared: &Shared) -> Response<RouterBody> {
    let table = shared.table.snapshot();
    let (status, body) = health_report(&probe_all(&table, &shared.bounds).await);
    json_answer(status, &body)
}

async fn service_health(shared: &Shared, model: &str) -> Response<RouterBody> {
    let table = shared.table.snapshot();
    let name = percent_decoded(model).unwrap_or_else(|| model.to_string());
    let Some(upstream) = table.get(&name) else {
        return refusal(&ApiError::model_not_found(Some(&name), &table.names()));
    };
    let (status, body) = service_report(&name, &probe(upstream, &shared.bounds).await);
    json_answer(status, &body)
}

async fn models_list(shared: &Shared) -> Response<RouterBody> {
    let table = shared.table.snapshot();
    let lists = table.iter().map(|(name, upstream)| async move {
        let list = match get(upstream, "/v1/models", &shared.bounds).await {
            Ok((StatusCode::OK, body)) => serde_json::from_slice::<Value>(&body).ok(),
            _ => None,
        };
        (name, list)
    });
    let answers = futures_util::future::join_all(lists).await;
    json_answer(StatusCode::OK, &merged_models(&answers))
}

fn refusal(error: &ApiError) -> Response<RouterBody> {
    json_answer(error.status, &error.body())
}

fn json_answer(status: StatusCode, body: &Value) -> Response<RouterBody> {
    let mut response = Response::new(Either::Left(Full::new(Bytes::from(body.to_string()))));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_by_method_and_path() {
        assert_eq!(route(&Method::GET, "/health"), Route::Health);
        assert_eq!(route(&Method::GET, "/health/Qwen/Qwen3-8B"), Route::ServiceHealth("Qwen/Qwen3-8B"));
        assert_eq!(route(&Method::GET, "/health/"), Route::Unknown);
        assert_eq!(route(&Method::GET, "/v1/models"), Route::Models);
        for path in FORWARDED {
            assert_eq!(route(&Method::POST, path), Route::Forward, "{path}");
            assert_eq!(route(&Method::GET, path), Route::WrongMethod, "{path}");
        }
        assert_eq!(route(&Method::POST, "/health"), Route::WrongMethod);
        assert_eq!(route(&Method::POST, "/v1/models"), Route::WrongMethod);
        assert_eq!(route(&Method::POST, "/v1/responses"), Route::Unknown);
        assert_eq!(route(&Method::GET, "/metrics"), Route::Unknown);
    }

    #[test]
    fn only_health_goes_without_the_key() {
        assert!(!Route::Health.needs_key() && !Route::ServiceHealth("m").needs_key());
        for needs in [Route::Models, Route::Forward, Route::WrongMethod, Route::Unknown] {
            assert!(needs.needs_key(), "{needs:?}");
        }
    }
}
