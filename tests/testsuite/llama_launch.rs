//! `cluster launch --engine llama.cpp`, end to end, with a real inference engine: three
//! Thunderbolt nodes in network namespaces, each node's toolbox `llama` from the llama image
//! (support/llama_image.rs: llama.cpp built on CPU with the RPC backend), the tiny llama GGUF on
//! the head only. Every token the endpoint answers comes from `llama-server` on the head, the
//! model's layers split over the workers' `rpc-server`s across the link.
//!
//! One cluster serves every step (a cluster and three toolbox pulls are most of the test's time).

use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::Duration;

use crate::support::cli::{json, stderr, stdout, strix_command};
use crate::support::cluster::{Link, TestCluster};
use crate::support::http;
use crate::support::llama_image::llama_image;
use crate::support::llama_server::{greedy_completion, Completion, LlamaServer};
use crate::support::proc_net::{tcp_sockets, TcpState};
use crate::support::registry::Registry;
use crate::support::tiny_llama::TinyLlama;

const PROMPT: &str = "Once upon a time, in a small village,";
const TOKENS: u32 = 32;
/// The workers' RPC port (llama.cpp's default, as the plan uses it).
const RPC_PORT: u16 = 50052;
/// The tiny model's output matrix, 32000 x 96 float32: the one tensor above the RPC cache's 10 MiB.
const CACHED_TENSOR: u64 = 32000 * 96 * 4;
/// What the test servers run with (support/llama_server.rs says why): the same for the reference.
const SERVER_ARGS: [&str; 4] = ["--threads", "1", "--ctx-size", "2048"];
/// The endpoint's API key: in no argv, log or report.
const API_KEY: &str = "sk-TESTllamaKEYthatMUSTneverSHOW24680";

/// A cluster of three Thunderbolt nodes whose toolbox `llama` runs the llama image, and the tiny
/// model in the head's home.
struct LlamaBed {
    cluster: TestCluster,
    /// The model as the head's toolbox sees it (the home is the node's own).
    model: String,
    _registry: Registry,
}

fn llama_cluster() -> LlamaBed {
    let registry = Registry::start();
    let cluster = TestCluster::start_with(&registry, 3, Link::Thunderbolt);
    let image = llama_image(cluster.node(1).podman(), &registry, "llama-node:latest", "2026-11-01T10:00:00Z");
    // The llama.cpp profile: the toolbox `llama`, its servers proven runnable before the swap.
    let refresh = ["refresh", "--engine", "llama.cpp", "--image", &image, "--manager", "native", "--spread", "off"];
    let refreshed = strix_cluster(&cluster, &refresh);
    assert!(refreshed.status.success(), "{}", stderr(&refreshed));
    for index in 1..=3 {
        let label = "{{index .Config.Labels \"io.github.strix-toolbox.engine\"}}";
        let inspected = cluster.node(index).podman().remote(&["inspect", "llama", "--format", label]);
        let engine = String::from_utf8_lossy(&inspected.stdout).trim().to_string();
        assert_eq!(engine, "llama.cpp", "node{index}'s toolbox llama: {}", String::from_utf8_lossy(&inspected.stderr));
    }
    let model = cluster.node(1).home.join("models/tiny-llama.gguf");
    std::fs::create_dir_all(model.parent().expect("a directory")).expect("mkdir models");
    std::fs::copy(TinyLlama::default().gguf(), &model).expect("the model on the head");
    LlamaBed { model: model.display().to_string(), cluster, _registry: registry }
}

fn strix_cluster(cluster: &TestCluster, args: &[&str]) -> Output {
    let config = cluster.ssh_config();
    let nodes = cluster.nodes_arg();
    let mut argv = vec!["--json", "cluster"];
    argv.extend(["--ssh-config", config.to_str().expect("utf-8"), "--nodes", &nodes, "--connect-timeout", "3"]);
    argv.extend_from_slice(args);
    strix_command(&[], &argv).stdin(Stdio::null()).output().expect("run strix-toolbox")
}

/// `cluster launch MODEL --port PORT` (the engine implied by the .gguf), the test servers' flags.
fn launch(bed: &LlamaBed, port: &str) -> Output {
    launch_with(bed, port, &[])
}

/// [`launch`] with the launch's own `options` too.
fn launch_with(bed: &LlamaBed, port: &str, options: &[&str]) -> Output {
    let mut args = vec!["launch", &bed.model, "--port", port, "--timeout", "120"];
    args.extend_from_slice(options);
    args.push("--");
    args.extend(SERVER_ARGS);
    strix_cluster(&bed.cluster, &args)
}

fn record_of(cluster: &TestCluster, index: usize) -> PathBuf {
    cluster.node(index).serving_dir().join("llama.json")
}

/// What runs in node `index`'s toolbox, by process name (zombies excluded).
fn running_in_toolbox(cluster: &TestCluster, index: usize) -> Vec<String> {
    let listing = "for f in /proc/[0-9]*/stat; do s=$(cat \"$f\" 2>/dev/null) || continue; \
                   case $s in *\") \"[ZX]*) ;; *) c=${s#*\\(}; echo \"${c%%)*}\";; esac; done";
    let output = cluster.node(index).podman().remote(&["exec", "llama", "sh", "-c", listing]);
    String::from_utf8_lossy(&output.stdout).lines().map(str::to_string).collect()
}

/// No llama.cpp server runs on any node and none records a launch.
fn assert_nothing_serves(cluster: &TestCluster, context: &str) {
    for index in 1..=3 {
        let running = running_in_toolbox(cluster, index);
        assert!(
            !running.iter().any(|name| name.contains("llama-server") || name.contains("rpc-server")),
            "node{index} still runs {running:?} ({context})"
        );
        assert!(!record_of(cluster, index).exists(), "node{index} still has a serving record ({context})");
    }
}

/// The TCP sockets of node `index`'s network namespace (read through any process in it).
fn node_sockets(cluster: &TestCluster, index: usize) -> Vec<crate::support::proc_net::TcpSocket> {
    let pid = *cluster.node(index).netns().pids().first().expect("a process in the node (its sshd)");
    tcp_sockets(pid as u32)
}

fn greedy_through(cluster: &TestCluster, port: &str) -> Completion {
    let url = format!("http://{}:{port}", cluster.node(1).link_address);
    greedy_completion(Some(cluster.node(2).netns().name()), &url, PROMPT, TOKENS).expect("a greedy completion")
}

#[test]
fn three_nodes_serve_a_gguf_over_rpc_as_one_node_would() {
    let single = LlamaServer::builder(&TinyLlama::default().gguf()).start().greedy(PROMPT, TOKENS);
    let bed = llama_cluster();
    let cluster = &bed.cluster;
    let port = crate::support::free_port().to_string();
    let workers = [cluster.node(2), cluster.node(3)];

    let received_before: Vec<u64> = workers.iter().map(|node| node.link_bytes_received()).collect();
    let launched = launch(&bed, &port);
    let said = format!("{}{}", stdout(&launched), stderr(&launched));
    assert!(launched.status.success(), "{said}");
    let first_load: Vec<u64> =
        workers.iter().zip(&received_before).map(|(node, before)| node.link_bytes_received() - before).collect();
    let report = json(&launched);
    assert_eq!((report["engine"].as_str(), report["backend"].as_str()), (Some("llama.cpp"), Some("rpc")), "{report}");
    assert_eq!(report["endpoint"], format!("http://192.168.2.1:{port}/v1"));
    assert_eq!(report["served"], bed.model.as_str(), "the model under its own name: {report}");

    // The head's log: the model on both workers' devices.
    let log = std::fs::read_to_string(cluster.node(1).serving_dir().join("llama.llama-server.log"))
        .expect("llama-server's log on the head");
    for worker in &workers {
        let endpoint = format!("{}:{RPC_PORT}", worker.link_address);
        assert!(
            log.lines().any(|line| line.contains("using device") && line.contains(&endpoint)),
            "the head does not use {endpoint}:\n{log}"
        );
    }
    // Token for token what one node answers.
    assert_eq!(greedy_through(cluster, &port), single, "the cluster answered otherwise than one node");

    // Each rpc-server listens on its link address only, and the head is connected to it.
    for (index, worker) in [(2, workers[0]), (3, workers[1])] {
        let sockets = node_sockets(cluster, index);
        let listening: Vec<SocketAddrV4> = sockets
            .iter()
            .filter(|socket| socket.state == TcpState::Listen && socket.local.port() == RPC_PORT)
            .map(|socket| socket.local)
            .collect();
        assert_eq!(listening, [SocketAddrV4::new(worker.link_address, RPC_PORT)], "node{index}: {sockets:?}");
        assert!(
            sockets.iter().any(|socket| socket.state == TcpState::Established
                && socket.local.port() == RPC_PORT
                && *socket.remote.ip() == cluster.node(1).link_address),
            "node{index}: no connection from the head: {sockets:?}"
        );
    }

    // A relaunch sends the large tensor's hash, not the tensor: each worker has it cached.
    let stopped = strix_cluster(cluster, &["stop", "--engine", "llama.cpp"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    let report = json(&stopped);
    for (index, node) in report["nodes"].as_array().expect("nodes").iter().enumerate() {
        let expected = if index == 0 { "llama-server" } else { "rpc-server" };
        assert_eq!(node["stopped"]["processes"], serde_json::json!([expected]), "{report}");
        assert_eq!(node["stopped"]["forced"], false, "SIGTERM was enough: {report}");
    }
    assert_nothing_serves(cluster, "after cluster stop");
    let received_before: Vec<u64> = workers.iter().map(|node| node.link_bytes_received()).collect();
    let again = launch(&bed, &port);
    assert!(again.status.success(), "{}{}", stdout(&again), stderr(&again));
    let second_load: Vec<u64> =
        workers.iter().zip(&received_before).map(|(node, before)| node.link_bytes_received() - before).collect();
    eprintln!("bytes the workers received over the link: first load {first_load:?}, second {second_load:?}");
    // The last layers and the output matrix go to the last worker: the one tensor cached.
    assert!(
        second_load.iter().sum::<u64>() + CACHED_TENSOR <= first_load.iter().sum::<u64>(),
        "the second load received {second_load:?} bytes, the first {first_load:?}: the -c cache spared less than \
         the output matrix"
    );
    assert_eq!(greedy_through(cluster, &port), single, "the relaunched cluster answered otherwise");

    // A worker killed while serving: `cluster status` names it.
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(record_of(cluster, 3)).expect("node3's record")).unwrap();
    let pid = record["processes"][0]["pid"].to_string();
    let killed = cluster.node(3).podman().remote(&["exec", "llama", "sh", "-c", "kill -KILL \"$1\"", "sh", &pid]);
    assert!(killed.status.success(), "kill {pid}: {}", String::from_utf8_lossy(&killed.stderr));
    let status = strix_cluster(cluster, &["status", "--engine", "llama.cpp"]);
    let report = json(&status);
    let serving = &report["serving"];
    assert_eq!(serving["engine"], "llama.cpp", "{report}");
    let workers_seen = serving["workers"].as_array().expect("the RPC workers");
    assert_eq!(workers_seen.len(), 2, "{report}");
    assert_eq!(workers_seen[0]["reached"], "answers", "node2 still answers: {report}");
    assert_ne!(workers_seen[1]["reached"], "answers", "node3's rpc-server is dead: {report}");
    let disagreements = report["disagreements"].to_string();
    assert!(disagreements.contains("node3") && disagreements.contains("rpc-server"), "{report}");

    // Stop twice: everything goes, then nothing is left to stop.
    for time in ["first", "second"] {
        let stopped = strix_cluster(cluster, &["stop", "--engine", "llama.cpp"]);
        assert!(stopped.status.success(), "stop ({time}): {}", stderr(&stopped));
        assert_nothing_serves(cluster, &format!("after the {time} stop"));
    }

    // A worker whose firewall drops the RPC port fails the launch, named; nothing is left running.
    let node2 = cluster.node(2).netns().name().to_string();
    nft(&node2, &["add", "table", "inet", "strix_test"]);
    nft(&node2, &["add", "chain", "inet", "strix_test", "in", "{ type filter hook input priority 0; }"]);
    nft(&node2, &["add", "rule", "inet", "strix_test", "in", "tcp", "dport", &RPC_PORT.to_string(), "drop"]);
    // `cluster doctor` names it before any launch: the head's connection gets no answer.
    let doctor = json(&strix_cluster(cluster, &["doctor", "--engine", "llama.cpp"]));
    let rpc = doctor["checks"].as_array().expect("checks").iter().find(|c| c["name"] == "rpc port").cloned();
    let rpc = rpc.unwrap_or_else(|| panic!("no rpc port row: {doctor}"));
    let named: Vec<&str> = rpc["problems"].as_array().unwrap().iter().filter_map(|p| p["node"].as_str()).collect();
    assert_eq!(named, ["node2"], "{rpc}");
    let blocked = launch(&bed, &port);
    let said = stderr(&blocked);
    assert_eq!(blocked.status.code(), Some(1), "{said}");
    assert!(said.contains("node2") && said.contains(&format!("192.168.2.2:{RPC_PORT}")), "{said}");
    // Silence is a firewall, not a server still starting: it fails on the silence, not after
    // waiting out the 60 s a starting server gets (that failure says so).
    assert!(said.contains("did not answer on the cluster link") && !said.contains("within 60 s"), "{said}");
    assert_nothing_serves(cluster, "after a worker's RPC port was dropped");
    nft(&node2, &["delete", "table", "inet", "strix_test"]);

    // With an API key (--api-key-file): a request without it is refused, with it answered; the
    // key is in no argv, log or report.
    let secrets = tempfile::tempdir().expect("tempdir");
    let key_file = secrets.path().join("api-key");
    std::fs::write(&key_file, format!("{API_KEY}\n")).expect("write the key file");
    let keyed = launch_with(&bed, &port, &["--api-key-file", key_file.to_str().expect("utf-8")]);
    let said = format!("{}{}", stdout(&keyed), stderr(&keyed));
    assert!(keyed.status.success(), "{said}");
    assert!(!said.contains(API_KEY), "the key in the launch's output: {said}");
    assert_eq!(json(&keyed)["api_key"], true, "{said}");
    assert_eq!(completion_status(cluster, &port, None), 401, "no key");
    assert_eq!(completion_status(cluster, &port, Some("sk-not-the-key")), 401, "a wrong key");
    assert_eq!(completion_status(cluster, &port, Some(API_KEY)), 200, "the key");
    crate::launch::assert_no_argv_holds(&[API_KEY]);
    let logs = strix_cluster(cluster, &["logs", "--engine", "llama.cpp", "-n", "5000"]);
    let said = format!("{}{}", stdout(&logs), stderr(&logs));
    assert!(logs.status.success() && said.contains("llama-server"), "{said}");
    assert!(!said.contains(API_KEY), "the key in a log: {said}");
    let status = strix_cluster(cluster, &["status", "--engine", "llama.cpp"]);
    assert!(!format!("{}{}", stdout(&status), stderr(&status)).contains(API_KEY), "the key in status");
    let stopped = strix_cluster(cluster, &["stop", "--engine", "llama.cpp"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    assert_nothing_serves(cluster, "after the keyed launch was stopped");
}

/// The status of a one-token completion at the head's endpoint from node2, with `key` as its
/// bearer token when given (llama-server lets /health and /v1/models through without one).
fn completion_status(cluster: &TestCluster, port: &str, key: Option<&str>) -> u16 {
    let url = format!("http://{}:{port}/v1/completions", cluster.node(1).link_address);
    let body = r#"{"prompt": "Hello", "max_tokens": 1}"#;
    let netns = Some(cluster.node(2).netns().name());
    http::request_with_key(netns, "POST", &url, Some(body), key, Duration::from_secs(30))
        .unwrap_or_else(|error| panic!("POST {url}: {error}"))
        .status
}

fn nft(netns: &str, args: &[&str]) {
    let output = crate::support::netns::enter(netns, "nft").args(args).output().expect("nft (nftables)");
    assert!(output.status.success(), "nft {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}
