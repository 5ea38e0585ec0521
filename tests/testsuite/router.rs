//! The router (src/router) in front of two real llama-servers, each serving its own tiny model
//! (another seed: other weights, other tokens), alpha without a key of its own and beta with one
//! only the router sends. The library's router runs in the test's own tokio runtime (the binary
//! has no command for it yet); everything it talks to is real: the engines, TCP on loopback, and
//! the `openai` Python client.
//!
//! What decides a stream's timing is read from the engine itself, never from a clock: its
//! `/slots` (generating, how many tokens so far) and its sockets in `/proc/PID/net/tcp`. A frozen
//! engine (SIGSTOP) is one that cannot finish, answer or close anything by itself, so what
//! happens meanwhile is the router's doing.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use strix_toolbox::reporter::Reporter;
use strix_toolbox::router::{Bounds, Router, RoutingTable, Secret, Upstream};

use crate::support::event_stream::EventStream;
use crate::support::http::request_with_key;
use crate::support::llama_server::LlamaServer;
use crate::support::openai_python::openai_client;
use crate::support::proc_net::{tcp_sockets, TcpState};
use crate::support::tiny_llama::TinyLlama;
use crate::support::{free_port, wait_until};

/// The endpoint's key: what clients send the router.
const KEY: &str = "sk-router-endpoint-key";
/// beta's own key (`--api-key`): only the router, and the test asking beta directly, send it.
const BETA_KEY: &str = "sk-engine-beta-key";
const PROMPT: &str = "Once upon a time";
/// Every wait's bound.
const LIMIT: Duration = Duration::from_secs(60);
/// TCP_CLOSE_WAIT in /proc/net/tcp: the peer closed its end, this end has not yet.
const CLOSE_WAIT: u8 = 0x08;

/// alpha (seed 1) with no key, beta (seed 2) wanting [`BETA_KEY`].
struct Engines {
    alpha: LlamaServer,
    beta: LlamaServer,
}

impl Engines {
    fn start() -> Engines {
        let alpha = LlamaServer::builder(&TinyLlama::default().gguf()).args(&["--alias", "alpha"]).start();
        let beta = LlamaServer::builder(&TinyLlama { seed: 2, ..TinyLlama::default() }.gguf())
            .args(&["--alias", "beta", "--api-key", BETA_KEY])
            .start();
        Engines { alpha, beta }
    }

    fn table(&self) -> RoutingTable {
        RoutingTable::new()
            .with("alpha", Upstream::new(address(&self.alpha)))
            .with("beta", Upstream::with_key(address(&self.beta), Secret::new(BETA_KEY.into())))
    }

    /// Each engine: its name, itself, the key it wants.
    fn each(&self) -> [(&'static str, &LlamaServer, Option<&'static str>); 2] {
        [("alpha", &self.alpha, None), ("beta", &self.beta, Some(BETA_KEY))]
    }
}

fn address(server: &LlamaServer) -> SocketAddr {
    server.url().trim_start_matches("http://").parse().expect("the server's address")
}

/// The log lines and warnings the router reports.
#[derive(Default)]
struct LogLines(Mutex<Vec<String>>);

impl LogLines {
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }
}

impl Reporter for LogLines {
    fn layer(&self, id: &str, status: &str, _current: u64, _total: u64) {
        self.push(format!("{id}: {status}"));
    }
    fn layer_done(&self, id: &str, status: &str) {
        self.push(format!("{id}: {status}"));
    }
    fn step_started(&self, subject: &str, step: &str) {
        self.push(format!("{subject}: {step}"));
    }
    fn step_finished(&self, subject: &str, outcome: &str) {
        self.push(format!("{subject}: {outcome}"));
    }
    fn warning(&self, text: &str) {
        self.push(text.to_string());
    }
    fn line(&self, text: &str) {
        self.push(text.to_string());
    }
    fn finish(&self) {}
}

/// The library's router on 127.0.0.1, wanting [`KEY`], in a runtime of its own; shut down (as
/// the lead's code would) when dropped.
struct RunningRouter {
    runtime: tokio::runtime::Runtime,
    router: Option<Router>,
    log: Arc<LogLines>,
}

impl RunningRouter {
    fn start(table: RoutingTable, bounds: Bounds) -> RunningRouter {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
        let log = Arc::new(LogLines::default());
        let bind = "127.0.0.1:0".parse().expect("an address");
        let key = Some(Secret::new(KEY.into()));
        let router =
            runtime.block_on(Router::start_bounded(bind, table, key, log.clone(), bounds)).expect("start the router");
        RunningRouter { runtime, router: Some(router), log }
    }

    fn router(&self) -> &Router {
        self.router.as_ref().expect("a running router")
    }

    fn address(&self) -> SocketAddr {
        self.router().address()
    }

    fn url(&self) -> String {
        format!("http://{}", self.address())
    }

    /// `shutdown()`, waited for.
    fn shutdown(mut self) {
        if let Some(router) = self.router.take() {
            self.runtime.block_on(router.shutdown());
        }
    }
}

impl Drop for RunningRouter {
    fn drop(&mut self) {
        if let Some(router) = self.router.take() {
            self.runtime.block_on(router.shutdown());
        }
    }
}

/// A process held with SIGSTOP until dropped (SIGCONT), even when the test fails.
pub(crate) struct Frozen(i32);

impl Frozen {
    pub(crate) fn stop(pid: u32) -> Frozen {
        let pid = pid as i32;
        // SAFETY: kill(2) on a child this test started.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0, "SIGSTOP {pid}");
        Frozen(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

/// A greedy completion request of `max_tokens` (no stop at end of text: the length is fixed).
pub(crate) fn completion(model: &str, max_tokens: u32, stream: bool) -> Value {
    json!({"model": model, "prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0, "seed": 0,
           "ignore_eos": true, "stream": stream})
}

pub(crate) fn chat(model: &str, max_tokens: u32) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": max_tokens,
           "temperature": 0, "seed": 0, "ignore_eos": true, "stream": true})
}

/// The piece of text each event carries (a completion's `text`, a chat chunk's `delta.content`).
pub(crate) fn pieces(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter_map(|event| {
            let choice = event["choices"].get(0)?;
            Some(choice.get("text").or_else(|| choice["delta"].get("content")).cloned().unwrap_or(Value::Null))
        })
        .collect()
}

/// A whole stream's pieces, from `address` (the router or an engine).
pub(crate) fn streamed(address: SocketAddr, path: &str, key: Option<&str>, body: &Value) -> Vec<Value> {
    let mut stream = EventStream::open(address, path, key, body);
    let status = stream.status;
    assert_eq!(status, 200, "POST {path} to {address}: {}", stream.body());
    let events = stream.rest();
    assert!(stream.ended_cleanly(), "POST {path} to {address}: cut off");
    pieces(&events)
}

/// `METHOD url` with an optional JSON body and key: the status and the body, parsed.
fn call(method: &str, url: &str, key: Option<&str>, body: Option<&Value>) -> (u16, Value) {
    let body = body.map(Value::to_string);
    let response = request_with_key(None, method, url, body.as_deref(), key, LIMIT).expect("a request");
    let value = serde_json::from_str(&response.body).unwrap_or(Value::String(response.body));
    (response.status, value)
}

/// The slot of `engine` that is generating, with how many tokens it has made so far.
fn generating(engine: &LlamaServer, key: Option<&str>) -> Option<u64> {
    let (status, slots) = call("GET", &format!("{}/slots", engine.url()), key, None);
    assert_eq!(status, 200, "/slots: {slots}");
    let slot = slots.as_array()?.iter().find(|slot| slot["is_processing"] == true)?;
    slot["next_token"][0]["n_decoded"].as_u64()
}

/// The engine's end of each connection a client (the router) has open to it, or has closed while
/// the engine has not yet, by the client's address. (/proc/PID/net/tcp lists the whole network
/// namespace: the engine's port tells its sockets apart.)
fn engine_connections(engine: &LlamaServer) -> Vec<(SocketAddr, TcpState)> {
    let port = address(engine).port();
    tcp_sockets(engine.pid())
        .into_iter()
        .filter(|socket| socket.local.port() == port)
        .filter(|socket| matches!(socket.state, TcpState::Established | TcpState::Other(CLOSE_WAIT)))
        .map(|socket| (SocketAddr::V4(socket.remote), socket.state))
        .collect()
}

#[test]
fn both_models_answer_through_the_one_endpoint_token_for_token_as_they_do_directly() {
    let engines = Engines::start();
    let router = RunningRouter::start(engines.table(), Bounds::default());
    let mut answers = Vec::new();
    for (name, engine, engine_key) in engines.each() {
        for (path, body) in [("/v1/completions", completion(name, 48, true)), ("/v1/chat/completions", chat(name, 48))]
        {
            let direct = streamed(address(engine), path, engine_key, &body);
            let routed = streamed(router.address(), path, Some(KEY), &body);
            assert!(direct.len() > 10, "{name} {path}: {direct:?}");
            assert_eq!(routed, direct, "{name} {path}: through the router, then directly");
            answers.push(direct);
        }
        // Not streamed: the same token ids (logprobs lists them).
        let mut whole = completion(name, 32, false);
        whole["logprobs"] = json!(1);
        let ids = |(status, body): (u16, Value)| {
            assert_eq!(status, 200, "{name}: {body}");
            let entries = body["choices"][0]["logprobs"]["content"].as_array().cloned().expect("logprobs");
            entries.iter().map(|entry| entry["id"].as_u64().expect("a token id")).collect::<Vec<_>>()
        };
        let direct = ids(call("POST", &format!("{}/v1/completions", engine.url()), engine_key, Some(&whole)));
        let routed = ids(call("POST", &format!("{}/v1/completions", router.url()), Some(KEY), Some(&whole)));
        assert_eq!(routed, direct, "{name}: token ids");
        // The tokenizer's routes too.
        let tokenize = json!({"model": name, "content": PROMPT});
        let direct = call("POST", &format!("{}/tokenize", engine.url()), engine_key, Some(&tokenize));
        let routed = call("POST", &format!("{}/tokenize", router.url()), Some(KEY), Some(&tokenize));
        assert_eq!((routed.0, &routed.1), (200, &direct.1), "{name}: /tokenize");
    }
    // Each model answered its own way: the router sent each request to the one it named.
    assert_ne!(answers[0], answers[2], "alpha's and beta's completions are the same: one engine answered both");

    let (status, models) = call("GET", &format!("{}/v1/models", router.url()), Some(KEY), None);
    assert_eq!(status, 200, "{models}");
    let listed: Vec<(&str, &str)> = models["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|model| (model["id"].as_str().unwrap_or(""), model["owned_by"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(listed, [("alpha", "llamacpp"), ("beta", "llamacpp")], "{models}");
    assert_eq!(models["data"][1]["meta"]["n_vocab"], 32000, "beta's own entry, asked with its key: {models}");

    let (status, health) = call("GET", &format!("{}/health", router.url()), None, None);
    assert_eq!(
        (status, health),
        (200, json!({"status": "ok", "failing": [], "services": {"alpha": "ok", "beta": "ok"}}))
    );
    let (status, health) = call("GET", &format!("{}/health/beta", router.url()), None, None);
    assert_eq!((status, health), (200, json!({"status": "ok", "service": "beta", "health": "ok"})));
}

#[test]
fn an_unknown_model_is_openais_404_naming_both_and_the_key_is_enforced_at_the_router() {
    let engines = Engines::start();
    let router = RunningRouter::start(engines.table(), Bounds::default());
    let url = |path: &str| format!("{}{path}", router.url());

    let (status, body) = call("POST", &url("/v1/completions"), Some(KEY), Some(&completion("gpt-4", 4, false)));
    assert_eq!(status, 404);
    assert_eq!(
        body,
        json!({"error": {
            "message": "The model `gpt-4` does not exist. This endpoint serves `alpha`, `beta`.",
            "type": "invalid_request_error", "param": "model", "code": "model_not_found",
        }})
    );
    let (status, body) = call("POST", &url("/v1/chat/completions"), Some(KEY), Some(&json!({"messages": []})));
    assert_eq!(status, 404);
    assert_eq!(
        body["error"]["message"],
        "The request names no model (its `model` field). This endpoint serves `alpha`, `beta`."
    );
    let (status, body) = call("GET", &url("/health/gpt-4"), None, None);
    assert_eq!((status, &body["error"]["code"]), (404, &json!("model_not_found")), "{body}");

    // Without the key, with another: 401 in OpenAI's shape, on every path but /health.
    let unauthorized = json!({"error": {
        "message": "Incorrect API key provided: send the endpoint's key as `Authorization: Bearer KEY`.",
        "type": "invalid_request_error", "param": null, "code": "invalid_api_key",
    }});
    for key in [None, Some("sk-wrong"), Some(BETA_KEY)] {
        for (method, path, body) in [
            ("POST", "/v1/completions", Some(completion("alpha", 4, false))),
            ("POST", "/v1/chat/completions", Some(chat("beta", 4))),
            ("POST", "/tokenize", Some(json!({"model": "alpha", "content": PROMPT}))),
            ("GET", "/v1/models", None),
        ] {
            let (status, answer) = call(method, &url(path), key, body.as_ref());
            assert_eq!((status, &answer), (401, &unauthorized), "{method} {path} with {key:?}");
        }
    }
    // With it, 200; beta answers the router, which sends beta's own key.
    for model in ["alpha", "beta"] {
        let (status, body) = call("POST", &url("/v1/completions"), Some(KEY), Some(&completion(model, 4, false)));
        assert_eq!(status, 200, "{model}: {body}");
    }
    let (status, _) =
        call("POST", &format!("{}/v1/completions", engines.beta.url()), None, Some(&completion("beta", 4, false)));
    assert_eq!(status, 401, "beta itself wants its key");
    assert_eq!(call("GET", &url("/health"), None, None).0, 200);
}

#[test]
fn a_streams_first_event_comes_while_the_engine_generates_and_a_client_that_goes_closes_its_engine_connection() {
    let engines = Engines::start();
    let router = RunningRouter::start(engines.table(), Bounds::default());
    let max_tokens = 1500;
    let mut stream =
        EventStream::open(router.address(), "/v1/completions", Some(KEY), &completion("alpha", max_tokens, true));
    assert_eq!(stream.status, 200);
    let first = stream.next_event().expect("a first event");
    assert!(first["choices"][0]["text"].is_string(), "{first}");
    // alpha is still at it: the event came as alpha wrote it, not with the whole answer.
    let decoded = generating(&engines.alpha, None).expect("alpha generating after the first event came through");
    assert!(decoded < u64::from(max_tokens), "alpha has made {decoded} of {max_tokens} tokens");

    // Frozen, alpha can neither finish nor close its end: whatever closes now is the router's.
    let frozen = Frozen::stop(engines.alpha.pid());
    let open = engine_connections(&engines.alpha);
    let [(router_end, TcpState::Established)] = open[..] else { panic!("alpha's connections: {open:?}") };
    drop(stream);
    wait_until("the router to close its connection to alpha", LIMIT, || {
        engine_connections(&engines.alpha).contains(&(router_end, TcpState::Other(CLOSE_WAIT)))
    });
    drop(frozen);
    // Continued, alpha finds its client gone and stops generating for it (its own log says so).
    wait_until("alpha to stop generating", LIMIT, || generating(&engines.alpha, None).is_none());
    assert!(engines.alpha.log().contains("cancel task"), "alpha's log:\n{}", engines.alpha.log());
    wait_until("alpha to close the connection", LIMIT, || engine_connections(&engines.alpha).is_empty());
}

#[test]
fn removing_a_service_while_a_stream_to_another_runs_lets_that_stream_complete() {
    let engines = Engines::start();
    let router = RunningRouter::start(engines.table(), Bounds::default());
    let body = completion("beta", 300, true);
    let direct = streamed(address(&engines.beta), "/v1/completions", Some(BETA_KEY), &body);

    let mut stream = EventStream::open(router.address(), "/v1/completions", Some(KEY), &body);
    let first = stream.next_event().expect("a first event");
    // Frozen, beta's stream is certainly under way while the table changes.
    let frozen = Frozen::stop(engines.beta.pid());
    let mut without_alpha = router.router().table();
    without_alpha.remove("alpha");
    router.router().update(without_alpha);
    let (status, refused) =
        call("POST", &format!("{}/v1/completions", router.url()), Some(KEY), Some(&completion("alpha", 4, false)));
    assert_eq!(status, 404);
    assert_eq!(refused["error"]["message"], "The model `alpha` does not exist. This endpoint serves `beta`.");
    drop(frozen);

    let mut events = vec![first];
    events.extend(stream.rest());
    assert!(stream.ended_cleanly(), "beta's stream was cut");
    assert_eq!(pieces(&events), direct, "beta's stream through the router, then directly");
    let (status, models) = call("GET", &format!("{}/v1/models", router.url()), Some(KEY), None);
    assert_eq!((status, models["data"].as_array().map(Vec::len)), (200, Some(1)), "{models}");
}

#[test]
fn shutdown_lets_a_stream_under_way_finish_and_cuts_it_after_the_grace() {
    let engines = Engines::start();
    let body = completion("alpha", 200, true);
    let direct = streamed(address(&engines.alpha), "/v1/completions", None, &body);

    // A grace longer than the stream: it finishes, then shutdown returns.
    let router = RunningRouter::start(engines.table(), Bounds { shutdown_grace: LIMIT, ..Bounds::default() });
    let address = router.address();
    let mut stream = EventStream::open(address, "/v1/completions", Some(KEY), &body);
    let mut events = vec![stream.next_event().expect("a first event")];
    let frozen = Frozen::stop(engines.alpha.pid());
    let shutdown = std::thread::spawn(move || router.shutdown());
    wait_until("the router to stop listening", LIMIT, || TcpStream::connect(address).is_err());
    assert!(!shutdown.is_finished(), "shutdown returned while a stream was under way");
    drop(frozen);
    events.extend(stream.rest());
    assert!(stream.ended_cleanly(), "the stream was cut by a graceful shutdown");
    assert_eq!(pieces(&events), direct);
    shutdown.join().expect("shutdown");

    // A grace shorter than what is left: the stream is cut, shutdown returns all the same.
    let router =
        RunningRouter::start(engines.table(), Bounds { shutdown_grace: Duration::from_secs(1), ..Bounds::default() });
    let log = router.log.clone();
    let mut stream = EventStream::open(router.address(), "/v1/completions", Some(KEY), &body);
    stream.next_event().expect("a first event");
    let frozen = Frozen::stop(engines.alpha.pid());
    router.shutdown();
    drop(frozen);
    assert!(!stream.ended_cleanly(), "the stream outlived the grace");
    assert_eq!(log.lines(), ["router: cut 1 connection(s) still answering after the 1 s grace"]);
}

#[test]
fn an_engine_that_refuses_or_hangs_is_named_in_a_502_or_504_and_health_says_which() {
    let engines = Engines::start();
    let gone: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("an address");
    let table = engines.table().with("gone", Upstream::with_key(gone, Secret::new("sk-gone-key".into())));
    let bounds = Bounds { upstream_answer: Duration::from_secs(2), probe: Duration::from_secs(2), ..Bounds::default() };
    let router = RunningRouter::start(table, bounds);
    let url = |path: &str| format!("{}{path}", router.url());

    let (status, body) = call("POST", &url("/v1/completions"), Some(KEY), Some(&completion("gone", 4, false)));
    assert_eq!(status, 502, "{body}");
    let message = body["error"]["message"].as_str().expect("a message");
    assert!(message.starts_with("The service `gone` cannot be reached: connect failed"), "{message}");
    assert_eq!(
        (&body["error"]["type"], &body["error"]["code"]),
        (&json!("server_error"), &json!("service_unreachable"))
    );

    // beta frozen: it accepts (the kernel does) and never answers.
    let frozen = Frozen::stop(engines.beta.pid());
    let (status, body) = call("POST", &url("/v1/completions"), Some(KEY), Some(&completion("beta", 4, false)));
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"]["message"], "The service `beta` did not begin its answer within 2 s.");

    let (status, health) = call("GET", &url("/health"), None, None);
    assert_eq!(status, 503, "{health}");
    assert_eq!(health["failing"], json!(["beta", "gone"]));
    assert_eq!(health["services"]["alpha"], "ok");
    assert_eq!(call("GET", &url("/health/alpha"), None, None).0, 200);
    let (status, one) = call("GET", &url("/health/gone"), None, None);
    assert_eq!((status, &one["status"]), (503, &json!("unavailable")), "{one}");
    drop(frozen);
    assert_eq!(call("GET", &url("/health"), None, None).0, 503, "gone is still gone");

    // The router said what failed, naming the service, and no key anywhere.
    let lines = router.log.lines();
    assert!(
        lines.iter().any(|line| line.starts_with(&format!("router: service `gone` at {gone}: connect failed"))),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|line| line.contains("service `beta`") && line.contains("no answer within 2 s")),
        "{lines:?}"
    );
    for line in lines {
        for secret in [KEY, BETA_KEY, "sk-gone-key"] {
            assert!(!line.contains(secret), "{line}");
        }
    }
}

/// `raw` sent on a new connection to `address`, and everything that comes back until the router
/// closes the connection.
fn exchange_raw(address: SocketAddr, raw: &[u8]) -> String {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream.set_read_timeout(Some(LIMIT)).expect("read timeout");
    stream.write_all(raw).expect("send");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("the router to answer and close within the limit");
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn the_router_bounds_bodies_heads_and_the_time_a_connection_waits() {
    // Nothing here reaches an engine: every refusal comes first.
    let unreachable: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("an address");
    let table = RoutingTable::new().with("alpha", Upstream::new(unreachable));
    let bounds = Bounds {
        max_body_bytes: 4096,
        max_headers: 16,
        max_head_bytes: 8192,
        request_head: Duration::from_secs(1),
        ..Bounds::default()
    };
    let router = RunningRouter::start(table, bounds);

    let big = json!({"model": "alpha", "prompt": "x".repeat(5000)});
    let (status, body) = call("POST", &format!("{}/v1/completions", router.url()), Some(KEY), Some(&big));
    assert_eq!((status, &body["error"]["code"]), (413, &json!("request_too_large")), "{body}");
    // The same without a declared length: cut off once it passes the bound.
    let chunk = format!("{:x}\r\n{}\r\n", 1024, "x".repeat(1024));
    let chunked = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: r\r\nAuthorization: Bearer {KEY}\r\nTransfer-Encoding: chunked\r\n\r\n{}0\r\n\r\n",
        chunk.repeat(5)
    );
    let answer = exchange_raw(router.address(), chunked.as_bytes());
    assert!(answer.starts_with("HTTP/1.1 413") && answer.contains("request_too_large"), "{answer}");

    let many: String = (0..20).map(|n| format!("X-Header-{n}: {n}\r\n")).collect();
    let answer = exchange_raw(router.address(), format!("GET /health HTTP/1.1\r\nHost: r\r\n{many}\r\n").as_bytes());
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    let long = format!("GET /health HTTP/1.1\r\nHost: r\r\nX-Long: {}\r\n\r\n", "y".repeat(9000));
    assert!(exchange_raw(router.address(), long.as_bytes()).starts_with("HTTP/1.1 431"));

    // A head that never ends, and a connection left idle after its answer: both closed.
    let answer = exchange_raw(router.address(), b"GET /health HTTP/1.1\r\nHost: r\r\n");
    assert!(!answer.contains("HTTP/1.1 2"), "{answer}");
    let answer = exchange_raw(router.address(), b"GET /health HTTP/1.1\r\nHost: r\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 503") && answer.ends_with('}'), "{answer}");
}

#[test]
fn connections_over_the_limit_are_answered_503_until_one_frees() {
    let unreachable: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("an address");
    let table = RoutingTable::new().with("alpha", Upstream::new(unreachable));
    let router = RunningRouter::start(table, Bounds { max_connections: 2, ..Bounds::default() });
    // Two connections that send nothing hold both slots (accepted in the order they came).
    let first = TcpStream::connect(router.address()).expect("connect");
    let _second = TcpStream::connect(router.address()).expect("connect");
    let answer = exchange_raw(router.address(), b"GET /v1/models HTTP/1.1\r\nHost: r\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("retry-after: 1"), "{answer}");
    assert!(
        answer.contains("\"code\":\"too_many_connections\"") && answer.contains("serves 2 connections at once"),
        "{answer}"
    );
    drop(first);
    wait_until("a slot to free", LIMIT, || {
        call("GET", &format!("{}/v1/models", router.url()), Some(KEY), None).0 == 200
    });
}

#[test]
fn the_openai_client_streams_both_models_through_the_router_and_raises_not_found() {
    let engines = Engines::start();
    let router = RunningRouter::start(engines.table(), Bounds::default());
    let max_tokens = 24;
    let result = openai_client(&format!("{}/v1", router.url()), KEY, max_tokens, &["alpha", "beta"], "gpt-4");

    assert_eq!(result["listed"], json!(["alpha", "beta"]));
    for (name, engine, engine_key) in engines.each() {
        let direct_chat = streamed(address(engine), "/v1/chat/completions", engine_key, &chat(name, max_tokens));
        let direct_completion =
            streamed(address(engine), "/v1/completions", engine_key, &completion(name, max_tokens, true));
        assert_eq!(result["models"][name]["chat"], json!(direct_chat), "{name}'s chat");
        assert_eq!(result["models"][name]["completion"], json!(direct_completion), "{name}'s completion");
    }
    let unknown = &result["unknown"];
    assert_eq!((&unknown["class"], &unknown["status"]), (&json!("NotFoundError"), &json!(404)), "{unknown}");
    assert_eq!((&unknown["code"], &unknown["param"]), (&json!("model_not_found"), &json!("model")), "{unknown}");
    let message = unknown["message"].as_str().expect("a message");
    assert!(message.contains("The model `gpt-4` does not exist. This endpoint serves `alpha`, `beta`."), "{message}");
}
