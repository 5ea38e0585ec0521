//! llama.cpp's two servers run directly on this machine (no container): `llama-server` on
//! 127.0.0.1 or on an address inside a network namespace the test made, and the RPC server bound
//! to one address. Each is stopped (SIGTERM, then SIGKILL) when dropped; its log is kept for
//! failure messages.
//!
//! The flags, and why:
//! - `llama-server -m MODEL --host H --port P`: the model and where it answers.
//! - `--threads 1`: tests run side by side on two cores, and ggml's thread pool spins at its
//!   barriers: on this busy machine 8 x 128 tokens with `--threads 2` had not finished after two
//!   minutes; with one thread 4 x 128 take 0.7 s. The RPC servers run one thread too.
//! - `--ctx-size 2048`: the tiny model trains for 4096; a smaller KV cache starts faster.
//! - `--log-verbosity 4`: the default (3) hides where the weights went; at 4 the log has
//!   `load_tensors: RPC0[HOST:PORT] model buffer size = …` for each RPC server that holds some.
//! - `--n-gpu-layers 999` with `--rpc`: every layer on the RPC devices (each counts as a GPU).
//! - the RPC server: `--host H --port P --threads 1`, `--cache` with `LLAMA_CACHE=DIR` when the
//!   test wants the local tensor cache (files `DIR/rpc/<fnv-1a hash>`, one per weight tensor
//!   larger than 10 MiB, which is why the tiny model's output matrix is 12.3 MB).
//!
//! ```ignore
//! let server = LlamaServer::builder(&TinyLlama::default().gguf()).start();
//! let answer = server.greedy("Once upon a time", 32);
//! ```

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tempfile::TempDir;

use super::http;
use super::llama_cpp::llama_cpp;
use super::netns::{self, NetNs};
use super::proc_net::listens_on;
use super::{free_port, stop_child};

/// The bounded wait for a server to answer (the tiny model loads in well under a second).
pub const START_LIMIT: Duration = Duration::from_secs(60);
/// One completion's limit.
const REQUEST_LIMIT: Duration = Duration::from_secs(60);

/// A running `llama-server`.
pub struct LlamaServer {
    child: Child,
    netns: Option<String>,
    address: SocketAddrV4,
    log: PathBuf,
    _dir: TempDir,
}

/// What [`LlamaServer::builder`] starts.
pub struct LlamaServerBuilder {
    program: PathBuf,
    model: PathBuf,
    netns: Option<String>,
    host: Ipv4Addr,
    args: Vec<String>,
}

/// A greedy completion as `/v1/completions` returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// `choices[0].text` (an incomplete UTF-8 sequence shows as U+FFFD).
    pub text: String,
    /// The ids in `logprobs.content`. llama-server folds a token that ends inside a UTF-8
    /// character into the next entry (its id is not listed), so there may be fewer than
    /// `completion_tokens`; `/completion` with `return_tokens` would list them all.
    pub tokens: Vec<u64>,
    /// Every entry's `bytes`, concatenated: the exact output, no replacement characters.
    pub bytes: Vec<u8>,
    /// `usage.completion_tokens`: how many tokens were generated.
    pub completion_tokens: u64,
}

impl LlamaServer {
    /// The build's `llama-server` serving `model` on 127.0.0.1 (unless told otherwise).
    pub fn builder(model: &Path) -> LlamaServerBuilder {
        LlamaServerBuilder {
            program: llama_cpp().llama_server(),
            model: model.to_path_buf(),
            netns: None,
            host: Ipv4Addr::LOCALHOST,
            args: Vec::new(),
        }
    }

    /// `http://HOST:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything it printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A greedy completion of `prompt`, `max_tokens` long (see [`greedy_completion`]).
    pub fn greedy(&self, prompt: &str, max_tokens: u32) -> Completion {
        greedy_completion(self.netns.as_deref(), &self.url(), prompt, max_tokens)
            .unwrap_or_else(|error| panic!("{error}\n--- llama-server log ---\n{}", self.log()))
    }
}

impl LlamaServerBuilder {
    /// Another program in its place, taking llama-server's arguments (an image's wrapper).
    pub fn program(mut self, program: &Path) -> Self {
        self.program = program.to_path_buf();
        self
    }

    /// Inside `netns`, bound to `host` (an address there).
    pub fn inside(mut self, netns: &NetNs, host: Ipv4Addr) -> Self {
        self.netns = Some(netns.name().to_string());
        self.host = host;
        self
    }

    /// Every layer on these RPC servers (`--rpc A,B --n-gpu-layers 999`).
    pub fn rpc(mut self, workers: &[&RpcServer]) -> Self {
        let list: Vec<String> = workers.iter().map(|worker| worker.endpoint()).collect();
        self.args.extend(["--rpc".to_string(), list.join(","), "--n-gpu-layers".to_string(), "999".to_string()]);
        self
    }

    /// More arguments, after the builder's own.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|arg| arg.to_string()));
        self
    }

    /// Start it and wait (at most [`START_LIMIT`]) until `/health` answers 200.
    pub fn start(self) -> LlamaServer {
        let dir = tempfile::Builder::new().prefix("llama-server-").tempdir().expect("tempdir");
        let log = dir.path().join("llama-server.log");
        let port = free_port();
        let mut command = place(self.netns.as_deref(), &self.program);
        command
            .arg("--model")
            .arg(&self.model)
            .args(["--host", &self.host.to_string(), "--port", &port.to_string()])
            .args(["--threads", "1", "--ctx-size", "2048", "--log-verbosity", "4"])
            .args(&self.args);
        let child = spawn_logged(command, &log, "llama-server");
        let mut server =
            LlamaServer { child, netns: self.netns, address: SocketAddrV4::new(self.host, port), log, _dir: dir };
        let deadline = Instant::now() + START_LIMIT;
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("llama-server exited ({status}) before answering:\n{}", server.log());
            }
            let health = http::request(
                server.netns.as_deref(),
                "GET",
                &format!("{}/health", server.url()),
                None,
                Duration::from_secs(2),
            );
            if health.is_ok_and(|response| response.status == 200) {
                return server;
            }
            assert!(Instant::now() < deadline, "llama-server not healthy after {START_LIMIT:?}:\n{}", server.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

/// A running RPC server (`ggml-rpc-server`).
pub struct RpcServer {
    child: Child,
    address: SocketAddrV4,
    log: PathBuf,
    _dir: TempDir,
}

impl RpcServer {
    /// Bound to `host` (inside `netns` when given), with its local tensor cache in `cache` when
    /// given (`--cache`, `LLAMA_CACHE=cache`: the files go to `cache/rpc/`). Returns once it listens.
    pub fn start(netns: Option<&NetNs>, host: Ipv4Addr, cache: Option<&Path>) -> RpcServer {
        let dir = tempfile::Builder::new().prefix("rpc-server-").tempdir().expect("tempdir");
        let log = dir.path().join("rpc-server.log");
        let port = free_port();
        let mut command = place(netns.map(NetNs::name), &llama_cpp().rpc_server());
        command.args(["--host", &host.to_string(), "--port", &port.to_string(), "--threads", "1"]);
        if let Some(cache) = cache {
            command.arg("--cache").env("LLAMA_CACHE", cache);
        }
        let child = spawn_logged(command, &log, "ggml-rpc-server");
        let mut server = RpcServer { child, address: SocketAddrV4::new(host, port), log, _dir: dir };
        let deadline = Instant::now() + START_LIMIT;
        while !listens_on(server.child.id(), server.address) {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("ggml-rpc-server exited ({status}) before listening:\n{}", server.log());
            }
            assert!(
                Instant::now() < deadline,
                "ggml-rpc-server not listening after {START_LIMIT:?}:\n{}",
                server.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
        server
    }

    /// `HOST:PORT`, as `--rpc` takes it.
    pub fn endpoint(&self) -> String {
        self.address.to_string()
    }

    pub fn address(&self) -> SocketAddrV4 {
        self.address
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for RpcServer {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

/// A greedy completion from the server at `url` through the OpenAI-compatible `/v1/completions`
/// (temperature 0, a fixed seed, `max_tokens`, no stop at end of text so the length is fixed),
/// requested from inside `netns` when given; `logprobs: 1` for the token ids and bytes.
pub fn greedy_completion(netns: Option<&str>, url: &str, prompt: &str, max_tokens: u32) -> Result<Completion, String> {
    greedy_completion_of(netns, url, None, prompt, max_tokens)
}

/// [`greedy_completion`] of the model `model` names (a router sends a request by its `model`).
pub fn greedy_completion_of(
    netns: Option<&str>,
    url: &str,
    model: Option<&str>,
    prompt: &str,
    max_tokens: u32,
) -> Result<Completion, String> {
    let mut body = json!({
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "seed": 0,
        "ignore_eos": true,
        "logprobs": 1,
    });
    if let Some(model) = model {
        body["model"] = json!(model);
    }
    let endpoint = format!("{url}/v1/completions");
    let response = http::request(netns, "POST", &endpoint, Some(&body.to_string()), REQUEST_LIMIT)?;
    if response.status != 200 {
        return Err(format!("POST {endpoint}: {} {}", response.status, response.body));
    }
    let value: Value =
        serde_json::from_str(&response.body).map_err(|e| format!("POST {endpoint}: {e}: {}", response.body))?;
    let missing = |what: &str| format!("POST {endpoint}: no {what} in {value}");
    let choice = &value["choices"][0];
    let text = choice["text"].as_str().ok_or_else(|| missing("choices[0].text"))?.to_string();
    let entries = choice["logprobs"]["content"].as_array().ok_or_else(|| missing("logprobs.content"))?;
    let tokens = entries
        .iter()
        .map(|entry| entry["id"].as_u64().ok_or_else(|| missing("token id")))
        .collect::<Result<_, _>>()?;
    let mut bytes = Vec::new();
    for entry in entries {
        let entry_bytes = entry["bytes"].as_array().ok_or_else(|| missing("token bytes"))?;
        bytes.extend(entry_bytes.iter().filter_map(|byte| byte.as_u64().and_then(|byte| u8::try_from(byte).ok())));
    }
    let completion_tokens =
        value["usage"]["completion_tokens"].as_u64().ok_or_else(|| missing("usage.completion_tokens"))?;
    Ok(Completion { text, tokens, bytes, completion_tokens })
}

/// `program`, inside `netns` when given (nsenter execs it: the child's pid is the program's).
fn place(netns: Option<&str>, program: &Path) -> Command {
    match netns {
        Some(netns) => netns::enter(netns, program.to_str().expect("a UTF-8 path")),
        None => Command::new(program),
    }
}

/// Spawn `command` with its stdout and stderr in `log`.
fn spawn_logged(mut command: Command, log: &Path, what: &str) -> Child {
    let file = std::fs::File::create(log).expect("create a server log");
    let stderr = file.try_clone().expect("clone the log file");
    command
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|error| panic!("start {what} ({command:?}): {error}"))
}
