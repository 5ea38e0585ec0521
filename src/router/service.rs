//! One request, start to answer: which route it takes, the key, the body, the service.
//!
//! | route | key | answer |
//! |---|---|---|
//! | `GET /health` | no | 200 when every engine's `/health` says 200, else 503 naming the failing |
//! | `GET /health/{model}` | no | the same for the one service (404 when none is `model`) |
//! | `GET /metrics` | no | the router's own metrics ([`super::metrics`]) |
//! | `GET /v1/models`, `/models` | yes | every service the key may use, merged ([`super::models_list`]) |
//! | `POST` [`FORWARDED`] | yes | the engine's answer, streamed, from the service the body's `model` names |
//!
//! A forwarded request is refused, in this order, before any service starts or hears of it: no
//! key or an unknown one (401), a model no service is (404), one the key may not use (403), a
//! key past its rates (429). A service started on demand that does not serve is started first
//! ([`super::demand`]). Anything else is 404 (405 for a known path with another method), in
//! OpenAI's error shape.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use tokio::time::{timeout, Instant};

use super::auth::{Caller, LiveGate};
use super::bounds::Bounds;
use super::demand::{serving, Demand, InFlight, NotServing};
use super::health::{health_report, probe, probe_all, service_report, ServiceHealth};
use super::metered::{Metered, OnEnd};
use super::metrics::{RequestRefusal, RouterMetrics};
use super::model_field::{requested_model, RequestedModel};
use super::models_list::merged_models;
use super::openai_error::ApiError;
use super::proxy::{client_response, upstream_request};
use super::rates::Rates;
use super::routes::{RouterFiles, Routes};
use super::table::{LiveTable, RoutingTable, Upstream};
use super::upstream::{exchange, get, UpstreamFailure};
use super::usage::ask_for_usage;
use crate::error::Result;
use crate::reporter::Reporter;
use crate::serving::openai_models::OpenAiModels;
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
const METRICS: &str = "/metrics";
/// How a 401 is counted: the router did not take the key, so it has no name.
const UNKNOWN_KEY: &str = "unknown";

/// What every request reads: the table, the keys, the services started on demand, the bounds,
/// the metrics, where log lines go.
pub struct Shared {
    pub(crate) table: LiveTable,
    pub gate: LiveGate,
    /// The endpoint's own key, kept for the gate made anew when the keys change.
    pub api_key: Option<crate::secret::Secret>,
    pub demand: Arc<Demand>,
    pub rates: Rates,
    pub metrics: RouterMetrics,
    pub bounds: Bounds,
    pub reporter: Arc<dyn Reporter>,
    /// The routes file the table comes from (None: a table given in code).
    pub files: Option<RouterFiles>,
    /// When the router started: the rates' seconds count from it.
    pub began: Instant,
}

impl Shared {
    /// Whole seconds since the router started.
    pub fn second(&self) -> u64 {
        self.began.elapsed().as_secs()
    }

    /// `name` routed to `upstream` from the next request on (its route written by its launch).
    pub async fn route(&self, name: &str, upstream: Upstream) {
        let _writing = self.table.writing().await;
        let mut table = (*self.table.snapshot()).clone();
        table.insert(name, upstream);
        self.table.replace(table);
    }

    /// `name` routed no more: out of the routes file (registered still), then out of the table.
    pub async fn unroute(&self, name: &str) -> Result<()> {
        let _writing = self.table.writing().await;
        if let Some(files) = &self.files {
            files.change_routes(|routes| routes.without_route(name)).await?;
        }
        let mut table = (*self.table.snapshot()).clone();
        table.remove(name);
        self.table.replace(table);
        Ok(())
    }

    /// The routes file read again: its routes and registrations served from the next request on,
    /// when it changed since `seen` (its bytes); what it says now. An unreadable file keeps
    /// everything as it was (a writer replaces it whole: the next read finds it whole).
    pub async fn reload(&self, seen: &mut Option<Vec<u8>>) -> Result<Option<Routes>> {
        let Some(files) = &self.files else { return Ok(None) };
        let _writing = self.table.writing().await;
        let Some(bytes) = files.routes_bytes()? else { return Ok(Some(Routes::default())) };
        if seen.as_ref() == Some(&bytes) {
            return Ok(None);
        }
        let routes = super::routes::parse_routes(&bytes, &files.routes_path())?;
        *seen = Some(bytes);
        self.demand.update(&routes.on_demand);
        self.table.replace(routes.table());
        Ok(Some(routes))
    }

    /// The names a caller may be told of: every service that serves and every one registered.
    fn names_for(&self, caller: &Caller, table: &RoutingTable) -> Vec<String> {
        let mut names: Vec<String> = table.names().into_iter().map(str::to_string).collect();
        names.extend(self.demand.states(table).into_iter().map(|(name, _)| name));
        names.sort();
        names.dedup();
        names.retain(|name| caller.allows(name));
        names
    }
}

/// The router's own answers are whole; an engine's streams, metered.
pub type RouterBody = Either<Full<Bytes>, Metered>;

/// Where a request goes, by its method and path alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destination<'a> {
    Health,
    /// `/health/{model}`: the model's name as the path has it (still percent-encoded).
    ServiceHealth(&'a str),
    Metrics,
    Models,
    Forward,
    /// A path the router serves, asked with another method (405).
    WrongMethod,
    Unknown,
}

impl Destination<'_> {
    /// Whether it needs a key (when the router takes keys).
    pub fn needs_key(self) -> bool {
        !matches!(self, Destination::Health | Destination::ServiceHealth(_) | Destination::Metrics)
    }
}

pub fn route<'a>(method: &Method, path: &'a str) -> Destination<'a> {
    let get = method == Method::GET;
    if let Some(model) = path.strip_prefix("/health/").filter(|model| get && !model.is_empty()) {
        return Destination::ServiceHealth(model);
    }
    match path {
        "/health" if get => Destination::Health,
        METRICS if get => Destination::Metrics,
        path if MODELS.contains(&path) && get => Destination::Models,
        path if FORWARDED.contains(&path) && method == Method::POST => Destination::Forward,
        path if path == "/health" || path == METRICS || MODELS.contains(&path) || FORWARDED.contains(&path) => {
            Destination::WrongMethod
        }
        _ => Destination::Unknown,
    }
}

pub async fn answer(shared: &Arc<Shared>, request: Request<Incoming>) -> Response<RouterBody> {
    let route = route(request.method(), request.uri().path());
    let caller = if route.needs_key() {
        match shared.gate.now().caller(request.headers().get(AUTHORIZATION)) {
            Some(caller) => caller,
            None => {
                shared.metrics.refused(UNKNOWN_KEY, RequestRefusal::Unauthorized);
                return refusal(&ApiError::invalid_api_key());
            }
        }
    } else {
        Caller::Anyone
    };
    match route {
        Destination::Health => health(shared).await,
        Destination::ServiceHealth(model) => service_health(shared, model).await,
        Destination::Metrics => metrics(shared),
        Destination::Models => models_list(shared, &caller).await,
        Destination::Forward => forward(shared, &caller, request).await,
        Destination::WrongMethod | Destination::Unknown => {
            let mut refused = ApiError::unknown_route(request.method().as_str(), request.uri().path());
            if route == Destination::WrongMethod {
                refused.status = StatusCode::METHOD_NOT_ALLOWED;
            }
            refusal(&refused)
        }
    }
}

/// The body read whole (bounded in size and time), its `model` looked up and the caller's key
/// held against it, the service started when it is registered to start on demand, the request
/// sent to its engine and its answer passed back as it comes, metered.
async fn forward(shared: &Arc<Shared>, caller: &Caller, request: Request<Incoming>) -> Response<RouterBody> {
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
    let known = name.as_deref().filter(|name| table.get(name).is_some() || shared.demand.is_registered(name));
    let Some(name) = known.map(str::to_string) else {
        let names = shared.names_for(caller, &table);
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        return refusal(&ApiError::model_not_found(name.as_deref(), &names));
    };
    drop(table);
    if !caller.allows(&name) {
        shared.metrics.refused(caller.name(), RequestRefusal::Forbidden);
        let allowed = shared.names_for(caller, &shared.table.snapshot());
        return refusal(&ApiError::model_not_allowed(caller.name(), &name, &allowed));
    }
    if let Caller::User(key) = caller {
        if let Err(over) = shared.rates.admit(key, shared.second()) {
            shared.metrics.refused(caller.name(), RequestRefusal::RateLimited);
            let what = match over.limit {
                super::rates::Limit::Requests => "requests",
                super::rates::Limit::Tokens => "tokens",
            };
            return refusal(&ApiError::rate_limited(
                &key.name,
                &name,
                what,
                over.per_minute,
                over.used,
                over.retry_after,
            ));
        }
    }
    let (upstream, in_flight) = match upstream_of(shared, &name).await {
        Ok(found) => found,
        Err(NotServing::StillStarting(wait)) => return refusal(&ApiError::still_starting(&name, wait)),
        Err(NotServing::Failed(why)) => return refusal(&ApiError::start_failed(&why)),
    };
    shared.metrics.request(caller.name(), &name);
    // Every answer says what it cost: a stream that does not ask for its usage is asked for it.
    let asked = ask_for_usage(&body);
    let hide_usage = asked.is_some();
    let request = upstream_request(head, asked.unwrap_or(body));
    match exchange(&upstream, request, &shared.bounds).await {
        Ok(answer) => {
            let events = answer
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|value| value.to_str().ok())
                .is_some_and(|value| value.starts_with("text/event-stream"));
            let on_end = counted(shared.clone(), caller.clone(), name, in_flight);
            client_response(answer).map(|body| Either::Right(Metered::new(body, events, hide_usage, on_end)))
        }
        Err(failure) => {
            shared.reporter.warning(&format!("router: service `{name}` at {}: {failure}", upstream.address));
            refusal(&upstream_refusal(&name, &failure))
        }
    }
}

/// Where `name` answers, and its request counted under way when it was started on demand (a
/// stop waits for it). A route taken out between the look and the count is looked up again.
async fn upstream_of(
    shared: &Arc<Shared>,
    name: &str,
) -> std::result::Result<(Upstream, Option<InFlight>), NotServing> {
    loop {
        let upstream = match shared.table.snapshot().get(name) {
            Some(upstream) => upstream.clone(),
            None => serving(shared, name).await?,
        };
        let in_flight = shared.demand.begin(name);
        if in_flight.is_none() || shared.table.snapshot().get(name) == Some(&upstream) {
            return Ok((upstream, in_flight));
        }
    }
}

/// What an answer's end does: the tokens its usage said counted for the caller's key, the
/// request no longer under way.
fn counted(shared: Arc<Shared>, caller: Caller, model: String, in_flight: Option<InFlight>) -> OnEnd {
    Box::new(move |tokens| {
        drop(in_flight);
        if let Some(tokens) = tokens {
            shared.metrics.tokens(caller.name(), &model, tokens);
            if let Caller::User(key) = &caller {
                shared.rates.spent(&key.name, tokens, shared.second());
            }
        }
    })
}

/// The body, whole: refused at once when its declared length is over the bound, cut off when
/// more than that arrives, or when it has not all come within its deadline.
async fn read_body(
    headers: &hyper::HeaderMap,
    body: Incoming,
    bounds: &Bounds,
) -> std::result::Result<Bytes, ApiError> {
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

/// What a service started on demand that does not serve says for its health: nothing failing.
fn on_demand_health(state: &str) -> ServiceHealth {
    ServiceHealth::OnDemand(match state {
        "starting" => "starting (on demand)",
        "stopping" => "stopping (on demand)",
        _ => "stopped (starts on a request)",
    })
}

async fn health(shared: &Shared) -> Response<RouterBody> {
    let table = shared.table.snapshot();
    let mut services = probe_all(&table, &shared.bounds).await;
    for (name, state) in shared.demand.states(&table) {
        if state != "serving" {
            services.push((name, on_demand_health(state)));
        }
    }
    services.sort_by(|a, b| a.0.cmp(&b.0));
    let (status, body) = health_report(&services);
    json_answer(status, &body)
}

async fn service_health(shared: &Shared, model: &str) -> Response<RouterBody> {
    let table = shared.table.snapshot();
    let name = percent_decoded(model).unwrap_or_else(|| model.to_string());
    let health = match (table.get(&name), shared.demand.state(&name, &table)) {
        (Some(upstream), _) => probe(upstream, &shared.bounds).await,
        (None, Some(state)) => on_demand_health(state),
        (None, None) => {
            let names = shared.names_for(&Caller::Anyone, &table);
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            return refusal(&ApiError::model_not_found(Some(&name), &names));
        }
    };
    let (status, body) = service_report(&name, &health);
    json_answer(status, &body)
}

fn metrics(shared: &Shared) -> Response<RouterBody> {
    let states = shared.demand.states(&shared.table.snapshot());
    let text = crate::metrics::render(&shared.metrics.families(&states));
    let mut response = Response::new(Either::Left(Full::new(Bytes::from(text))));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(crate::metrics::CONTENT_TYPE));
    response
}

async fn models_list(shared: &Shared, caller: &Caller) -> Response<RouterBody> {
    let table = shared.table.snapshot();
    let states = shared.demand.states(&table);
    let names = shared.names_for(caller, &table);
    let lists = names.iter().map(|name| {
        let table = &table;
        let state = states.iter().find(|(n, _)| n == name).map_or("serving", |(_, state)| *state);
        async move {
            let list = match table.get(name) {
                Some(upstream) => match get(upstream, "/v1/models", &shared.bounds).await {
                    Ok((StatusCode::OK, body)) => OpenAiModels::parse(&body).ok(),
                    _ => None,
                },
                None => None,
            };
            (name.as_str(), list, state)
        }
    });
    let answers = futures_util::future::join_all(lists).await;
    json_answer(StatusCode::OK, &json!(merged_models(answers)))
}

fn refusal(error: &ApiError) -> Response<RouterBody> {
    let mut response = json_answer(error.status, &error.body());
    if let Some(seconds) = error.retry_after {
        response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
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
        assert_eq!(route(&Method::GET, "/health"), Destination::Health);
        assert_eq!(route(&Method::GET, "/health/Qwen/Qwen3-8B"), Destination::ServiceHealth("Qwen/Qwen3-8B"));
        assert_eq!(route(&Method::GET, "/health/"), Destination::Unknown);
        assert_eq!(route(&Method::GET, "/v1/models"), Destination::Models);
        for path in FORWARDED {
            assert_eq!(route(&Method::POST, path), Destination::Forward, "{path}");
            assert_eq!(route(&Method::GET, path), Destination::WrongMethod, "{path}");
        }
        assert_eq!(route(&Method::POST, "/health"), Destination::WrongMethod);
        assert_eq!(route(&Method::POST, "/v1/models"), Destination::WrongMethod);
        assert_eq!(route(&Method::POST, "/v1/responses"), Destination::Unknown);
        assert_eq!(route(&Method::GET, "/metrics"), Destination::Metrics);
        assert_eq!(route(&Method::POST, "/metrics"), Destination::WrongMethod);
        assert_eq!(route(&Method::GET, "/metricsx"), Destination::Unknown);
    }

    #[test]
    fn only_health_and_metrics_go_without_the_key() {
        assert!(
            !Destination::Health.needs_key()
                && !Destination::ServiceHealth("m").needs_key()
                && !Destination::Metrics.needs_key()
        );
        for needs in [Destination::Models, Destination::Forward, Destination::WrongMethod, Destination::Unknown] {
            assert!(needs.needs_key(), "{needs:?}");
        }
    }
}
