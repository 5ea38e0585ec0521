//! The router's services started on demand and its keys per user (src/router/demand.rs,
//! src/router/auth.rs, src/router/rates.rs), in front of real `llama-server`s. The router runs
//! in the test's own runtime (as in router.rs); what starts and stops a service is a [`Starter`]
//! that starts and stops real `llama-server` processes on this machine, as the cluster's starter
//! does on a node (cluster_on_demand.rs runs that one, on namespace nodes). Both tiny models are
//! registered on one "node" of 100 GiB, each planned at 60 GiB: one at a time fits.
//!
//! Nothing here reads a clock to decide: a start is held (by the test) to see requests wait and
//! join it; idleness is waited for with a bound, never timed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use strix_toolbox::router::keys::{digest_hex, KeyEntry};
use strix_toolbox::router::{Held, KeyBook, Registered, Room, Router, Secret, Setup, Starter};

use crate::router::{completion, pieces, streamed};
use crate::support::http::{request_with_key, Response};
use crate::support::llama_server::LlamaServer;
use crate::support::prometheus::{promtool_passes, value_of};
use crate::support::tiny_llama::TinyLlama;
use crate::support::wait_until;

const KEY: &str = "sk-endpoint-key-on-demand";
const ALICE: &str = "sk-strix-alice-0123456789";
const BOB: &str = "sk-strix-bob-0123456789";
const GIB: u64 = 1 << 30;
/// Every wait's bound.
const LIMIT: Duration = Duration::from_secs(60);

/// Starts and stops tiny llama-servers by service name, recording each start and stop.
struct TinyStarter {
    models: BTreeMap<String, PathBuf>,
    running: Mutex<BTreeMap<String, LlamaServer>>,
    starts: Mutex<Vec<String>>,
    stops: Mutex<Vec<String>>,
    /// What runs on the node that was not started on demand.
    others: Vec<Held>,
    /// When set, a start waits for the test's word before it starts its server.
    held_back: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

impl TinyStarter {
    fn new(others: Vec<Held>) -> TinyStarter {
        let models = [("alpha", 1), ("beta", 2)]
            .map(|(name, seed)| (name.to_string(), TinyLlama { seed, ..TinyLlama::default() }.gguf()))
            .into();
        TinyStarter {
            models,
            running: Mutex::default(),
            starts: Mutex::default(),
            stops: Mutex::default(),
            others,
            held_back: Mutex::default(),
        }
    }

    fn starts(&self) -> Vec<String> {
        self.starts.lock().unwrap().clone()
    }

    fn stops(&self) -> Vec<String> {
        self.stops.lock().unwrap().clone()
    }

    fn running(&self) -> Vec<String> {
        self.running.lock().unwrap().keys().cloned().collect()
    }
}

#[async_trait::async_trait]
impl Starter for TinyStarter {
    async fn held(&self, _service: &Registered) -> strix_toolbox::router::Result<Vec<Held>> {
        let mut held = self.others.clone();
        for name in self.running() {
            held.push(Held { node: "node1".into(), service: name, bytes: Some(60 * GIB) });
        }
        Ok(held)
    }

    async fn start(&self, service: &Registered) -> strix_toolbox::router::Result<SocketAddr> {
        self.starts.lock().unwrap().push(service.name.clone());
        let held_back = self.held_back.lock().unwrap().take();
        let model = self.models[&service.name].clone();
        let name = service.name.clone();
        let server = tokio::task::spawn_blocking(move || {
            if let Some(word) = held_back {
                word.recv_timeout(LIMIT).expect("the test's word to start");
            }
            LlamaServer::builder(&model).args(&["--alias", &name]).start()
        })
        .await
        .expect("start a llama-server");
        let address = server.url().trim_start_matches("http://").parse().expect("its address");
        self.running.lock().unwrap().insert(service.name.clone(), server);
        Ok(address)
    }

    async fn stop(&self, service: &Registered) -> strix_toolbox::router::Result<()> {
        self.stops.lock().unwrap().push(service.name.clone());
        let server = self.running.lock().unwrap().remove(&service.name);
        tokio::task::spawn_blocking(move || drop(server)).await.expect("stop a llama-server");
        Ok(())
    }
}

/// `name` registered on node1, planned at 60 GiB of its 100.
fn registered(name: &str, idle: Option<u64>, wait: u64) -> Registered {
    Registered {
        name: name.into(),
        engine: "llama.cpp".into(),
        model: format!("/models/{name}.gguf"),
        nodes: vec!["node1".into()],
        room: vec![Some(Room { planned: 60 * GIB, usable: 100 * GIB })],
        idle_seconds: idle,
        wait_seconds: wait,
        since: "2026-11-28T10:00:00Z".into(),
        launch: json!({}),
    }
}

/// A key per user: its `token`, the models it may use, its rates.
fn key(name: &str, token: &str, models: &[&str], rpm: Option<u64>, tpm: Option<u64>) -> KeyEntry {
    KeyEntry {
        name: name.into(),
        sha256: digest_hex(token.as_bytes()),
        models: models.iter().map(|m| m.to_string()).collect(),
        rpm,
        tpm,
        created: "2026-11-28T10:00:00Z".into(),
    }
}

/// The library's router with `registered` and `keys`, the endpoint's key [`KEY`], in a runtime of
/// its own.
struct OnDemandRouter {
    runtime: tokio::runtime::Runtime,
    router: Option<Router>,
    starter: Arc<TinyStarter>,
}

impl OnDemandRouter {
    fn start(registered: Vec<Registered>, keys: KeyBook, starter: TinyStarter) -> OnDemandRouter {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
        let starter = Arc::new(starter);
        let setup = Setup {
            keys,
            registered,
            starter: Some(starter.clone()),
            ..Setup::of(Default::default(), Some(Secret::new(KEY.into())), Arc::new(strix_toolbox::reporter::Silent))
        };
        let bind = "127.0.0.1:0".parse().expect("an address");
        let router = runtime.block_on(Router::start_with(bind, setup)).expect("start the router");
        OnDemandRouter { runtime, router: Some(router), starter }
    }

    fn router(&self) -> &Router {
        self.router.as_ref().expect("a running router")
    }

    fn address(&self) -> SocketAddr {
        self.router().address()
    }

    fn call(&self, method: &str, path: &str, key: Option<&str>, body: Option<&Value>) -> Response {
        let url = format!("http://{}{path}", self.address());
        let body = body.map(Value::to_string);
        request_with_key(None, method, &url, body.as_deref(), key, LIMIT).expect("a request")
    }

    /// Each model `/v1/models` lists, with its state.
    fn models(&self, key: &str) -> Vec<(String, String)> {
        let listed = self.call("GET", "/v1/models", Some(key), None);
        assert_eq!(listed.status, 200, "{}", listed.body);
        let listed: Value = serde_json::from_str(&listed.body).expect("JSON");
        listed["data"]
            .as_array()
            .expect("data")
            .iter()
            .map(|m| (m["id"].as_str().unwrap_or("").into(), m["status"]["value"].as_str().unwrap_or("").into()))
            .collect()
    }

    fn metrics(&self) -> String {
        let answer = self.call("GET", "/metrics", None, None);
        assert_eq!(answer.status, 200, "{}", answer.body);
        promtool_passes(&answer.body);
        answer.body
    }
}

impl Drop for OnDemandRouter {
    fn drop(&mut self) {
        if let Some(router) = self.router.take() {
            self.runtime.block_on(router.shutdown());
        }
    }
}

fn states(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

/// The error object of a refusal, and its status.
fn refusal(answer: &Response) -> (u16, Value) {
    let body: Value = serde_json::from_str(&answer.body).unwrap_or_else(|_| panic!("JSON: {}", answer.body));
    (answer.status, body["error"].clone())
}

#[test]
fn a_request_starts_its_model_and_another_stops_it_for_room() {
    let router = OnDemandRouter::start(
        vec![registered("alpha", None, 60), registered("beta", None, 60)],
        KeyBook::default(),
        TinyStarter::new(Vec::new()),
    );
    assert_eq!(router.models(KEY), states(&[("alpha", "stopped"), ("beta", "stopped")]));
    assert!(router.starter.running().is_empty(), "nothing runs before a request");
    let health = router.call("GET", "/health", None, None);
    assert_eq!(health.status, 200, "stopped on demand is no failure: {}", health.body);

    // Each answers as it does alone, started by the request that names it.
    for (name, seed) in [("alpha", 1), ("beta", 2)] {
        let alone =
            LlamaServer::builder(&TinyLlama { seed, ..TinyLlama::default() }.gguf()).args(&["--alias", name]).start();
        let body = completion(name, 24, true);
        let direct =
            streamed(alone.url().trim_start_matches("http://").parse().unwrap(), "/v1/completions", None, &body);
        assert_eq!(streamed(router.address(), "/v1/completions", Some(KEY), &body), direct, "{name}");
    }
    assert_eq!(router.starter.starts(), ["alpha", "beta"]);
    assert_eq!(router.starter.stops(), ["alpha"], "alpha stopped to make room for beta");
    assert_eq!(router.starter.running(), ["beta"]);
    assert_eq!(router.models(KEY), states(&[("alpha", "stopped"), ("beta", "serving")]));

    let metrics = router.metrics();
    for (name, labels, value) in [
        ("strix_router_starts_total", vec![("service", "alpha")], 1.0),
        ("strix_router_starts_total", vec![("service", "beta")], 1.0),
        ("strix_router_stops_total", vec![("service", "alpha"), ("reason", "room")], 1.0),
        ("strix_router_start_seconds_count", vec![("service", "beta")], 1.0),
        ("strix_router_service_state", vec![("service", "beta"), ("state", "serving")], 1.0),
        ("strix_router_service_state", vec![("service", "alpha"), ("state", "stopped")], 1.0),
        ("strix_router_requests_total", vec![("key", "endpoint"), ("model", "alpha")], 1.0),
    ] {
        assert_eq!(value_of(&metrics, name, &labels), Some(value), "{name} {labels:?} in:\n{metrics}");
    }
    // Each streamed completion counted its tokens (llama-server's usage: prompt and completion).
    let tokens = value_of(&metrics, "strix_router_tokens_total", &[("key", "endpoint"), ("model", "beta")]);
    assert!(tokens.is_some_and(|tokens| tokens >= 24.0), "{metrics}");
}

#[test]
fn requests_meanwhile_join_one_start_and_wait_no_longer_than_its_wait() {
    let starter = TinyStarter::new(Vec::new());
    let (word, heard) = std::sync::mpsc::channel();
    *starter.held_back.lock().unwrap() = Some(heard);
    let router = OnDemandRouter::start(vec![registered("alpha", None, 1)], KeyBook::default(), starter);

    // Three requests while the start is held: each waits its second, then a 503 in OpenAI's shape
    // saying the start goes on; all three joined the one start.
    let asked: Vec<_> = (0..3)
        .map(|_| {
            let url = format!("http://{}/v1/completions", router.address());
            std::thread::spawn(move || {
                let body = completion("alpha", 4, false).to_string();
                request_with_key(None, "POST", &url, Some(&body), Some(KEY), LIMIT).expect("a request")
            })
        })
        .collect();
    for answer in asked {
        let answer = answer.join().expect("a request thread");
        let (status, error) = refusal(&answer);
        assert_eq!(status, 503, "{}", answer.body);
        assert_eq!((error["type"].as_str(), error["code"].as_str()), (Some("server_error"), Some("model_starting")));
        assert_eq!(
            error["message"],
            "The model `alpha` is starting on demand and did not serve within 1 s; its start goes on: retry shortly."
        );
        assert_eq!(answer.header("retry-after"), Some("5"), "{:?}", answer.headers);
    }
    assert_eq!(router.starter.starts(), ["alpha"], "one start for every request");
    assert_eq!(router.models(KEY), states(&[("alpha", "starting")]));

    word.send(()).expect("let the start go on");
    wait_until("alpha to serve", LIMIT, || router.models(KEY) == states(&[("alpha", "serving")]));
    let answer = router.call("POST", "/v1/completions", Some(KEY), Some(&completion("alpha", 4, false)));
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(router.starter.starts(), ["alpha"], "served by the one start");
}

#[test]
fn a_model_idle_past_its_idle_is_stopped_and_the_next_request_starts_it_again() {
    let router =
        OnDemandRouter::start(vec![registered("alpha", Some(1), 60)], KeyBook::default(), TinyStarter::new(Vec::new()));
    let answer = router.call("POST", "/v1/completions", Some(KEY), Some(&completion("alpha", 4, false)));
    assert_eq!(answer.status, 200, "{}", answer.body);
    wait_until("alpha to be stopped idle", LIMIT, || router.models(KEY) == states(&[("alpha", "stopped")]));
    assert_eq!(router.starter.stops(), ["alpha"]);
    assert!(router.starter.running().is_empty());
    let metrics = router.metrics();
    let idle = value_of(&metrics, "strix_router_stops_total", &[("service", "alpha"), ("reason", "idle")]);
    assert_eq!(idle, Some(1.0), "{metrics}");
    let again = router.call("POST", "/v1/completions", Some(KEY), Some(&completion("alpha", 4, false)));
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(router.starter.starts(), ["alpha", "alpha"]);
}

#[test]
fn a_service_launched_otherwise_is_never_stopped_for_one_and_an_unknown_model_starts_nothing() {
    let pinned = Held { node: "node1".into(), service: "pinned".into(), bytes: Some(70 * GIB) };
    let router =
        OnDemandRouter::start(vec![registered("alpha", None, 60)], KeyBook::default(), TinyStarter::new(vec![pinned]));
    let unknown = router.call("POST", "/v1/completions", Some(KEY), Some(&completion("gamma", 4, false)));
    let (status, error) = refusal(&unknown);
    assert_eq!((status, error["code"].as_str()), (404, Some("model_not_found")), "{}", unknown.body);
    assert_eq!(error["message"], "The model `gamma` does not exist. This endpoint serves `alpha`.");
    let refused = router.call("POST", "/v1/completions", Some(KEY), Some(&completion("alpha", 4, false)));
    let (status, error) = refusal(&refused);
    assert_eq!((status, error["code"].as_str()), (503, Some("model_start_failed")), "{}", refused.body);
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("The model `alpha` could not be started: no room on its nodes (node1 has 100.00 GiB")
            && message.contains("pinned (70.00 GiB)")
            && message.contains("never stopped for one"),
        "{message}"
    );
    assert!(router.starter.starts().is_empty() && router.starter.stops().is_empty(), "nothing started or stopped");
    let metrics = router.metrics();
    assert_eq!(value_of(&metrics, "strix_router_start_failures_total", &[("service", "alpha")]), Some(1.0));
}

#[test]
fn keys_per_user_are_refused_limited_and_counted_and_a_change_counts_at_once() {
    let keys =
        KeyBook { keys: vec![key("alice", ALICE, &["alpha"], Some(2), None), key("bob", BOB, &[], None, Some(40))] };
    let router = OnDemandRouter::start(
        vec![registered("alpha", None, 60), registered("beta", None, 60)],
        keys,
        TinyStarter::new(Vec::new()),
    );
    let ask = |key: Option<&str>, model: &str| {
        router.call("POST", "/v1/completions", key, Some(&completion(model, 8, false)))
    };

    // No key, an unknown one: 401. A model the key may not use: 403, and nothing starts.
    for key in [None, Some("sk-strix-nobody")] {
        let (status, error) = refusal(&ask(key, "alpha"));
        assert_eq!((status, error["code"].as_str()), (401, Some("invalid_api_key")), "{key:?}");
    }
    let forbidden = ask(Some(ALICE), "beta");
    let (status, error) = refusal(&forbidden);
    assert_eq!(
        (status, &error),
        (
            403,
            &json!({
        "message": "The key `alice` does not have access to model `beta`; it may use `alpha`.",
        "type": "invalid_request_error", "param": "model", "code": "model_not_found"})
        )
    );
    assert!(router.starter.starts().is_empty(), "a refused request starts nothing");
    assert_eq!(router.models(ALICE), states(&[("alpha", "stopped")]), "alice is told of what she may use");

    // Two requests a minute: the third is OpenAI's 429 with Retry-After.
    for _ in 0..2 {
        assert_eq!(ask(Some(ALICE), "alpha").status, 200);
    }
    let limited = ask(Some(ALICE), "alpha");
    let (status, error) = refusal(&limited);
    assert_eq!(
        (status, error["type"].as_str(), error["code"].as_str()),
        (429, Some("requests"), Some("rate_limit_exceeded"))
    );
    let retry: u64 = limited.header("retry-after").and_then(|s| s.parse().ok()).expect("Retry-After");
    assert!((1..=60).contains(&retry), "{retry}");
    assert!(
        error["message"].as_str().unwrap_or_default().starts_with(
            "Rate limit reached for alpha with the key `alice` on requests per min (RPM): Limit 2, Used 2."
        ),
        "{error}"
    );

    // Tokens a minute, as the engine counts them: bob's streamed chat asks for none, is counted
    // all the same (the router asks for the usage, and keeps that chunk from bob).
    let chat = json!({"model": "alpha", "messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 24,
                      "temperature": 0, "stream": true});
    let mut stream =
        crate::support::event_stream::EventStream::open(router.address(), "/v1/chat/completions", Some(BOB), &chat);
    assert_eq!(stream.status, 200);
    let events = stream.rest();
    assert!(stream.ended_cleanly());
    assert!(
        events.iter().all(|e| e["choices"].as_array().is_some_and(|c| !c.is_empty())),
        "a chunk without choices reached bob: {events:?}"
    );
    assert_eq!(pieces(&events).len(), 25, "the role's chunk and 24 tokens: {events:?}");
    let limited = ask(Some(BOB), "alpha");
    let (status, error) = refusal(&limited);
    assert_eq!((status, error["type"].as_str()), (429, Some("tokens")), "{}", limited.body);

    let metrics = router.metrics();
    for (name, labels, value) in [
        ("strix_router_requests_total", vec![("key", "alice"), ("model", "alpha")], 2.0),
        ("strix_router_requests_total", vec![("key", "bob"), ("model", "alpha")], 1.0),
        ("strix_router_refused_total", vec![("key", "unknown"), ("reason", "unauthorized")], 2.0),
        ("strix_router_refused_total", vec![("key", "alice"), ("reason", "forbidden")], 1.0),
        ("strix_router_refused_total", vec![("key", "alice"), ("reason", "rate_limited")], 1.0),
        ("strix_router_refused_total", vec![("key", "bob"), ("reason", "rate_limited")], 1.0),
    ] {
        assert_eq!(value_of(&metrics, name, &labels), Some(value), "{name} {labels:?} in:\n{metrics}");
    }
    let bobs = value_of(&metrics, "strix_router_tokens_total", &[("key", "bob"), ("model", "alpha")]);
    assert!(bobs.is_some_and(|tokens| tokens > 24.0), "the prompt's and the 24 completion tokens: {metrics}");
    assert!(!metrics.contains(ALICE) && !metrics.contains(BOB) && !metrics.contains(KEY), "a key in the metrics");

    // Alice's key removed, carol's added: from the next request on, without a restart.
    let carol = "sk-strix-carol-0123456789";
    router.router().update_keys(&KeyBook { keys: vec![key("carol", carol, &[], None, None)] });
    assert_eq!(ask(Some(ALICE), "alpha").status, 401);
    assert_eq!(ask(Some(carol), "beta").status, 200);
    assert_eq!(ask(Some(KEY), "alpha").status, 200, "the endpoint's key keeps every model");
}
