//! `cluster launch --engine llama.cpp`, end to end, with a real inference engine: three
//! Thunderbolt nodes in network namespaces, each node's toolbox `llama` from the llama image
//! (support/llama_image.rs: llama.cpp built on CPU with the RPC backend), the tiny llama GGUF on
//! the head only. Every token the endpoint answers comes from `llama-server` on the head, the
//! model's layers split over the workers' `rpc-server`s across the link, through the router the
//! launch starts on the cluster's head.
//!
//! Then several services on the same cluster behind the one endpoint (issue 34): model A over RPC
//! on node1 and node2, model B alone on node3, both answering through the router token for token
//! as each does alone, streamed; an unknown model's 404 naming both; the key at the router; the
//! `openai` Python client; a service onto node3 beside B refused naming B; A stopped while a
//! stream to B runs, which completes; the vLLM stand-in beside B through the same router; then
//! everything stopped and the router gone. While A and B serve, `cluster metrics` and `cluster
//! top` are checked on them (top.rs).
//!
//! The nodes' host trees report different GTT sizes (issue 32): the launch's plan splits the
//! layers by them (`--tensor-split`), and what llama.cpp says it allocated on each worker's device
//! (its model and KV buffers, in the launch report and `cluster status`) is within 10% of the plan.
//!
//! One cluster serves every step (a cluster and three toolbox pulls are most of the test's time).

use std::net::{SocketAddr, SocketAddrV4};
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::router::{chat, completion, pieces, streamed, Frozen};
use crate::support::cli::{json, stderr, stdout, strix_command};
use crate::support::cluster::{Link, TestCluster};
use crate::support::event_stream::EventStream;
use crate::support::http;
use crate::support::llama_image::{llama_image, llama_index_image};
use crate::support::llama_server::{greedy_completion_of, Completion, LlamaServer};
use crate::support::node_image::node_image;
use crate::support::openai_python::openai_client;
use crate::support::proc_net::{tcp_sockets, TcpState};
use crate::support::registry::Registry;
use crate::support::serving_files::{log_path, record, record_path, router_process, runs};
use crate::support::tiny_llama::TinyLlama;

const PROMPT: &str = "Once upon a time, in a small village,";
const TOKENS: u32 = 32;
/// The workers' RPC port (llama.cpp's default, as the plan uses it).
const RPC_PORT: u16 = 50052;
/// The first engine's own port on a node (the endpoint's port is the router's).
const ENGINE_PORT: u16 = 8001;
/// The tiny model's output matrix, 32000 x 96 float32: the one tensor above the RPC cache's 10 MiB.
const CACHED_TENSOR: u64 = 32000 * 96 * 4;
/// What the test servers run with (support/llama_server.rs says why): the same for the reference.
const SERVER_ARGS: [&str; 4] = ["--threads", "1", "--ctx-size", "2048"];
/// The endpoint's API key: in no argv, log or report.
const API_KEY: &str = "sk-TESTllamaKEYthatMUSTneverSHOW24680";
/// Each node's GTT in GiB, as its host tree's `mem_info_gtt_total` says: all different.
const GTT_GIB: [u64; 3] = [96, 64, 32];
/// What the plan keeps on every device beside the model: the reserve (4 GiB) and llama.cpp's
/// compute buffers (1 GiB), the plan's defaults.
const KEPT_GIB: u64 = 4 + 1;

/// A cluster of three Thunderbolt nodes whose toolbox `llama` runs the llama image, and the tiny
/// model in the head's home.
struct LlamaBed {
    cluster: TestCluster,
    /// The model as the head's toolbox sees it (the home is the node's own).
    model: String,
    registry: Registry,
}

fn llama_cluster() -> LlamaBed {
    let registry = Registry::start();
    let cluster = TestCluster::start_with(&registry, 3, Link::Thunderbolt);
    for (index, gib) in (1..=3).zip(GTT_GIB) {
        let gtt = cluster.node(index).host_tree.path().join("sys/class/drm/card0/device/mem_info_gtt_total");
        std::fs::write(&gtt, format!("{}\n", gib << 30)).expect("the node's GTT size");
    }
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
    let model = model_on(&cluster, 1, "tiny-llama.gguf", TinyLlama::default());
    LlamaBed { model, cluster, registry }
}

/// `model` copied into node `index`'s home as `models/NAME`: its path as the toolbox sees it.
pub(crate) fn model_on(cluster: &TestCluster, index: usize, name: &str, model: TinyLlama) -> String {
    let path = cluster.node(index).home.join("models").join(name);
    std::fs::create_dir_all(path.parent().expect("a directory")).expect("mkdir models");
    std::fs::copy(model.gguf(), &path).expect("the model on the node");
    path.display().to_string()
}

pub(crate) fn strix_cluster(cluster: &TestCluster, args: &[&str]) -> Output {
    strix_cluster_of(cluster, &cluster.nodes_arg(), args)
}

/// `strix-toolbox --json cluster --nodes NODES … ARGS`.
pub(crate) fn strix_cluster_of(cluster: &TestCluster, nodes: &str, args: &[&str]) -> Output {
    let config = cluster.ssh_config();
    let mut argv = vec!["--json", "cluster"];
    argv.extend(["--ssh-config", config.to_str().expect("utf-8"), "--nodes", nodes, "--connect-timeout", "3"]);
    argv.extend_from_slice(args);
    strix_command(&[], &argv).stdin(Stdio::null()).output().expect("run strix-toolbox")
}

/// `cluster launch MODEL --port PORT` (the engine implied by the .gguf), the test servers' flags.
fn launch(bed: &LlamaBed, port: &str) -> Output {
    launch_with(bed, &bed.model, port, &[])
}

/// `cluster launch MODEL` with the launch's own `options` too.
fn launch_with(bed: &LlamaBed, model: &str, port: &str, options: &[&str]) -> Output {
    let mut args = vec!["launch", model, "--port", port, "--timeout", "120"];
    args.extend_from_slice(options);
    args.push("--");
    args.extend(SERVER_ARGS);
    strix_cluster(&bed.cluster, &args)
}

/// What runs in node `index`'s toolbox, by process name (zombies excluded).
pub(crate) fn running_in_toolbox(cluster: &TestCluster, index: usize) -> Vec<String> {
    cluster.node(index).podman().processes_in("llama")
}

/// No llama.cpp server runs on any node, none records `service`, and no router runs.
fn assert_nothing_serves(cluster: &TestCluster, service: &str, context: &str) {
    for index in 1..=3 {
        let running = running_in_toolbox(cluster, index);
        assert!(
            !running.iter().any(|name| name.contains("llama-server") || name.contains("rpc-server")),
            "node{index} still runs {running:?} ({context})"
        );
        let serving = cluster.node(index).serving_dir();
        assert!(!record_path(&serving, service).exists(), "node{index} still has {service}'s record ({context})");
    }
    assert_no_router(cluster, context);
}

/// The router the launches started on the cluster's head has exited (its last route went).
fn assert_no_router(cluster: &TestCluster, context: &str) {
    if let Some(process) = router_process(&cluster.node(1).serving_dir()) {
        let pid = process["pid"].as_u64().expect("the router's pid");
        assert!(!runs(pid), "the router (pid {pid}) still runs ({context})");
    }
}

/// The TCP sockets of node `index`'s network namespace (read through any process in it).
fn node_sockets(cluster: &TestCluster, index: usize) -> Vec<crate::support::proc_net::TcpSocket> {
    let pid = *cluster.node(index).netns().pids().first().expect("a process in the node (its sshd)");
    tcp_sockets(pid as u32)
}

/// A greedy completion of `model` through the endpoint, asked from node2.
fn greedy_through(cluster: &TestCluster, port: &str, model: &str) -> Completion {
    let url = format!("http://{}:{port}", cluster.node(1).link_address);
    greedy_completion_of(Some(cluster.node(2).netns().name()), &url, Some(model), PROMPT, TOKENS)
        .expect("a greedy completion")
}

/// The endpoint as this test reaches it: the router listens on every address of the cluster's
/// head, its management address among them.
pub(crate) fn router_address(cluster: &TestCluster, port: &str) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(cluster.node(1).mgmt_address, port.parse().expect("a port")))
}

#[test]
fn three_nodes_serve_a_gguf_over_rpc_as_one_node_would_and_several_services_share_the_endpoint() {
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
    assert_eq!(report["endpoint"], format!("http://192.168.2.1:{port}/v1"), "the router's: {report}");
    assert_eq!(report["upstream"], format!("192.168.2.1:{ENGINE_PORT}"), "the engine's own port: {report}");
    assert_eq!(report["service"], bed.model.as_str(), "named as the engine serves the model: {report}");
    assert_eq!(report["served"], bed.model.as_str(), "the model under its own name: {report}");
    assert_eq!(report["router_started"], true, "{report}");

    // The head's log: the model on both workers' devices.
    let log = std::fs::read_to_string(log_path(&cluster.node(1).serving_dir(), &bed.model, "llama-server"))
        .expect("llama-server's log on the head");
    for worker in &workers {
        let endpoint = format!("{}:{RPC_PORT}", worker.link_address);
        assert!(
            log.lines().any(|line| line.contains("using device") && line.contains(&endpoint)),
            "the head does not use {endpoint}:\n{log}"
        );
    }
    // Those lines come at verbosity 4 only in this build: set, as mmap off, by the variables its
    // `llama-server --help` names, and no other spelling.
    let pid = process_in(cluster, 1, "llama-server");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("the head's llama-server's environment");
    let environ: Vec<String> = environ.split(|b| *b == 0).map(|v| String::from_utf8_lossy(v).into_owned()).collect();
    let mut llama_args: Vec<&str> = environ
        .iter()
        .map(String::as_str)
        .filter(|v| v.starts_with("LLAMA_ARG_") || v.starts_with("LLAMA_LOG"))
        .collect();
    llama_args.sort_unstable();
    assert_eq!(llama_args, ["LLAMA_ARG_LOAD_MODE=none", "LLAMA_ARG_LOG_VERBOSITY=4"], "{environ:?}");
    assert!(!said.contains("assumed"), "the image was asked: {said}");
    // Token for token what one node answers, through the router.
    assert_eq!(greedy_through(cluster, &port, &bed.model), single, "the cluster answered otherwise than one node");
    planned_as_llama_cpp_allocated(&report);

    // Each rpc-server listens on its link address only, and the head is connected to it; the
    // engine on the head listens on its link address at its own port, the router on the
    // endpoint's port on every address.
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
    let head_listens: Vec<SocketAddrV4> =
        node_sockets(cluster, 1).into_iter().filter(|s| s.state == TcpState::Listen).map(|s| s.local).collect();
    assert!(head_listens.contains(&SocketAddrV4::new(cluster.node(1).link_address, ENGINE_PORT)), "{head_listens:?}");
    let endpoint_port: u16 = port.parse().unwrap();
    assert!(
        head_listens.contains(&SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, endpoint_port)),
        "the router on every address: {head_listens:?}"
    );

    // A relaunch sends the large tensor's hash, not the tensor: each worker has it cached. A
    // plain `cluster stop` finds the one service whatever its toolbox, and the router goes with it.
    let stopped = strix_cluster(cluster, &["stop"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    let report = json(&stopped);
    assert_eq!(report["services"], json!([bed.model]), "{report}");
    for (index, node) in report["nodes"].as_array().expect("nodes").iter().enumerate() {
        let expected = if index == 0 { "llama-server" } else { "rpc-server" };
        assert_eq!(node["stopped"]["processes"], json!([expected]), "{report}");
        assert_eq!(node["stopped"]["forced"], false, "SIGTERM was enough: {report}");
    }
    assert!(report["router"]["process"].is_null(), "the router exits with its last route: {report}");
    assert_nothing_serves(cluster, &bed.model, "after cluster stop");
    let received_before: Vec<u64> = workers.iter().map(|node| node.link_bytes_received()).collect();
    let again = launch(&bed, &port);
    assert!(again.status.success(), "{}{}", stdout(&again), stderr(&again));
    let measured_again = json(&again)["measured"].clone();
    let second_load: Vec<u64> =
        workers.iter().zip(&received_before).map(|(node, before)| node.link_bytes_received() - before).collect();
    eprintln!("bytes the workers received over the link: first load {first_load:?}, second {second_load:?}");
    // The last layers and the output matrix go to the last worker: the one tensor cached. The
    // link also carries ssh and the probes, a few tens of kilobytes that differ run to run, so
    // the proof is on that worker alone: the first load carried the tensor, the second carried
    // less than half of it, so the tensor itself did not cross again.
    let (first_last, second_last) = (first_load[first_load.len() - 1], second_load[second_load.len() - 1]);
    assert!(first_last >= CACHED_TENSOR, "the first load sent node3 {first_last} bytes, less than the output matrix");
    assert!(
        second_last < CACHED_TENSOR / 2,
        "the second load sent node3 {second_last} bytes (the first {first_last}): the -c cache did not spare the \
         output matrix ({CACHED_TENSOR} bytes)"
    );
    assert_eq!(greedy_through(cluster, &port, &bed.model), single, "the relaunched cluster answered otherwise");

    // A worker killed while serving: `cluster status` names it.
    let worker = record(&cluster.node(3).serving_dir(), &bed.model).expect("node3's record");
    let pid = worker["processes"][0]["pid"].to_string();
    let killed = cluster.node(3).podman().remote(&["exec", "llama", "sh", "-c", "kill -KILL \"$1\"", "sh", &pid]);
    assert!(killed.status.success(), "kill {pid}: {}", String::from_utf8_lossy(&killed.stderr));
    let status = strix_cluster(cluster, &["status"]);
    let report = json(&status);
    assert_eq!(report["toolbox"], "llama", "the service's toolbox, unasked: {report}");
    let serving = &report["services"][0];
    // Beside the plan, what the engine said, as the launch said it: read from the head's log.
    assert_eq!(serving["measured"], measured_again, "status and the launch read the same log: {report}");
    assert_eq!((serving["name"].as_str(), serving["engine"].as_str()), (Some(bed.model.as_str()), Some("llama.cpp")));
    let workers_seen = serving["workers"].as_array().expect("the RPC workers");
    assert_eq!(workers_seen.len(), 2, "{report}");
    assert_eq!(workers_seen[0]["reached"], "answers", "node2 still answers: {report}");
    assert_ne!(workers_seen[1]["reached"], "answers", "node3's rpc-server is dead: {report}");
    let disagreements = report["disagreements"].to_string();
    assert!(disagreements.contains("node3") && disagreements.contains("rpc-server"), "{report}");

    // Stop twice: everything goes, then nothing is left to stop.
    for time in ["first", "second"] {
        let stopped = strix_cluster(cluster, &["stop"]);
        assert!(stopped.status.success(), "stop ({time}): {}", stderr(&stopped));
        assert_nothing_serves(cluster, &bed.model, &format!("after the {time} stop"));
    }
    assert_eq!(json(&strix_cluster(cluster, &["stop"]))["services"], json!([]), "nothing is left");

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
    assert_nothing_serves(cluster, &bed.model, "after a worker's RPC port was dropped");
    nft(&node2, &["delete", "table", "inet", "strix_test"]);

    several_services_share_the_endpoint(&bed, &port);
}

/// A model the head's toolbox has and its host does not (in the toolbox's own files, as a model in
/// the image would be) is planned there and served split by that plan; a model on the head's host
/// that its toolbox does not see, or one in the toolbox whose header is damaged, is refused before
/// anything starts, named; a dry run whose toolbox is stopped goes on without a plan, saying why.
#[test]
fn the_model_is_planned_where_llama_server_reads_it_and_one_it_cannot_read_is_refused() {
    let single = LlamaServer::builder(&TinyLlama::default().gguf()).start().greedy(PROMPT, TOKENS);
    let bed = llama_cluster();
    let cluster = &bed.cluster;
    let port = crate::support::free_port().to_string();
    let in_toolbox = "/opt/models/tiny-llama.gguf";
    assert!(!std::path::Path::new(in_toolbox).exists(), "the test machine has {in_toolbox}");
    let head = cluster.node(1).podman();
    let started = head.remote(&["start", "llama"]);
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    let made = head.remote(&["exec", "--user", "root", "llama", "mkdir", "-p", "/opt/models"]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let gguf = TinyLlama::default().gguf();
    let copied = head.remote(&["cp", gguf.to_str().expect("utf-8"), &format!("llama:{in_toolbox}")]);
    assert!(copied.status.success(), "{}", String::from_utf8_lossy(&copied.stderr));

    let planned = strix_cluster(cluster, &["plan", in_toolbox]);
    assert!(planned.status.success(), "{}{}", stdout(&planned), stderr(&planned));
    let report = json(&planned);
    assert_eq!(report["read"]["toolbox"], "llama", "read in the head's toolbox: {report}");
    let size = std::fs::metadata(&gguf).expect("the GGUF").len();
    let read = report["read"]["bytes_read"].as_u64().expect("bytes read");
    assert!(read < size, "{read} of the model's {size} bytes read");
    eprintln!("the plan read {read} of {size} bytes in {} exec(s) in the toolbox", report["read"]["requests"]);
    assert!(report["plan"]["chosen"].is_object(), "{report}");

    let launched = launch_with(&bed, in_toolbox, &port, &[]);
    assert!(launched.status.success(), "{}{}", stdout(&launched), stderr(&launched));
    let report = json(&launched);
    let argv: Vec<&str> =
        report["nodes"][0]["commands"][0]["argv"].as_array().expect("argv").iter().filter_map(Value::as_str).collect();
    assert!(argv.windows(2).any(|w| w == ["--device", "RPC0,RPC1"]), "{argv:?}");
    assert!(argv.contains(&"--tensor-split") && argv.contains(&in_toolbox), "{argv:?}");
    assert_eq!(greedy_through(cluster, &port, in_toolbox), single, "the toolbox's model answered otherwise");
    let stopped = strix_cluster(cluster, &["stop"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));

    // On the head's host, not in its toolbox: refused, nothing started anywhere.
    let host_only = tempfile::tempdir().expect("a directory outside the toolbox's mounts");
    let on_host = host_only.path().join("tiny-llama.gguf");
    std::fs::copy(&gguf, &on_host).expect("the model on the host");
    let on_host = on_host.display().to_string();
    let refused = launch_with(&bed, &on_host, &port, &[]);
    let said = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("no {on_host} in toolbox llama")), "{said}");
    assert_nothing_serves(cluster, &on_host, "after a model its toolbox does not have");

    // In the toolbox but damaged (its header cut short): it cannot be planned, and is refused at
    // once, named, rather than launched unplanned for llama-server to fail on every node.
    let damaged = "/opt/models/damaged.gguf";
    let cut = head.remote(&["exec", "llama", "sh", "-c", "head -c 4096 \"$1\" > \"$2\"", "sh", in_toolbox, damaged]);
    assert!(cut.status.success(), "{}", String::from_utf8_lossy(&cut.stderr));
    let started = std::time::Instant::now();
    let refused = launch_with(&bed, damaged, &port, &[]);
    eprintln!("a damaged model refused in {:?}", started.elapsed());
    let said = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "a damaged file is a failure, not a usage error: {said}");
    assert!(said.contains("cannot be planned, so it is not launched (nothing was started)"), "{said}");
    assert!(said.contains("(in toolbox llama)") && said.contains("cannot be read as a model header"), "{said}");
    assert_nothing_serves(cluster, damaged, "after a damaged model");

    // A dry run with the head's toolbox stopped starts nothing to read it in: it says so, unplanned.
    let stop = head.remote(&["stop", "llama"]);
    assert!(stop.status.success(), "{}", String::from_utf8_lossy(&stop.stderr));
    let dry = launch_with(&bed, in_toolbox, &port, &["--dry-run"]);
    let said = format!("{}{}", stdout(&dry), stderr(&dry));
    assert!(dry.status.success(), "{said}");
    assert!(said.contains("not running (a dry run starts none)") && said.contains("without a plan"), "{said}");
    let inspected = head.remote(&["inspect", "llama", "--format", "{{.State.Running}}"]);
    assert_eq!(String::from_utf8_lossy(&inspected.stdout).trim(), "false", "the dry run started the toolbox");
}

/// One image, one identity (issue 41): two nodes refreshed to one image, then a third given the
/// next image by its platform manifest's digest on its own, then all three refreshed to it by its
/// tag (the index's digest). One image under two registry digests: the refresh says the third
/// already runs it, and the launch and status agree, comparing images by their id. (They compared
/// digests: the launch refused "the nodes run different toolbox images", status named a
/// disagreement, and the refresh it named as the fix said every node already ran the image.)
#[test]
fn one_image_under_two_digests_is_one_image_to_the_refresh_the_launch_and_status() {
    let registry = Registry::start();
    let cluster = TestCluster::start_with(&registry, 3, Link::Thunderbolt);
    let refresh = |nodes: &str, image: &str| {
        let args = ["refresh", "--engine", "llama.cpp", "--image", image, "--manager", "native", "--spread", "off"];
        let refreshed = strix_cluster_of(&cluster, nodes, &args);
        assert!(refreshed.status.success(), "refresh {nodes} to {image}: {}", stderr(&refreshed));
        json(&refreshed)
    };
    let v1 = llama_index_image(&registry, "llama:latest", "2026-11-01T10:00:00Z");
    refresh("node1,node2", &v1.reference);
    let v2 = llama_index_image(&registry, "llama:latest", "2026-11-08T10:00:00Z");
    refresh("node3", &format!("{}@{}", v2.repository, v2.manifest_digest));
    let report = refresh(&cluster.nodes_arg(), &v2.reference);
    let actions: Vec<&str> =
        report["nodes"].as_array().expect("nodes").iter().filter_map(|n| n["report"]["action"].as_str()).collect();
    assert_eq!(actions[2], "unchanged", "node3 already runs the image: {report}");
    // The circle's cause: one image id, two digests.
    let label = |index: usize, key: &str| {
        let labels = cluster.node(index).podman().inspect("llama")["Config"]["Labels"].clone();
        labels[format!("io.github.strix-toolbox.{key}")].as_str().expect("a label").to_string()
    };
    assert_eq!((label(1, "image-digest"), label(3, "image-digest")), (v2.digest.clone(), v2.manifest_digest.clone()));
    assert_eq!(label(1, "image-id"), label(3, "image-id"), "one image");

    // Status agrees, and names the image alike on every node.
    let status = json(&strix_cluster(&cluster, &["status", "--engine", "llama.cpp"]));
    assert_eq!(status["toolbox"], "llama", "{status}");
    assert!(!status["disagreements"].to_string().contains("image differs"), "{status}");
    let identities: Vec<&str> = status["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|node| {
            node["status"]["toolboxes"].as_array()?.iter().find(|t| t["name"] == "llama")?["image_id"].as_str()
        })
        .collect();
    let id = label(1, "image-id");
    assert_eq!(identities, [id.as_str(); 3], "{status}");
    // The refresh it would name as the fix: every node already runs the image.
    let again = refresh(&cluster.nodes_arg(), &v2.reference);
    assert_eq!(again["outcome"], "unchanged", "{again}");
    // The launch takes the three as one image and serves.
    let bed = LlamaBed { model: model_on(&cluster, 1, "tiny-llama.gguf", TinyLlama::default()), cluster, registry };
    let port = crate::support::free_port().to_string();
    let launched = launch(&bed, &port);
    let said = format!("{}{}", stdout(&launched), stderr(&launched));
    assert!(launched.status.success(), "{said}");
    assert!(!said.contains("different toolbox images"), "{said}");
    let stopped = strix_cluster(&bed.cluster, &["stop"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
}

/// The head's `--tensor-split` follows the workers' GTT sizes (the head's CPU build has no device
/// of its own), and each worker's device holds what the plan put there: llama.cpp's model and KV
/// buffer sizes within 10% of the plan's weights and KV cache for that node.
fn planned_as_llama_cpp_allocated(report: &Value) {
    let argv: Vec<&str> = report["nodes"][0]["commands"][0]["argv"]
        .as_array()
        .expect("the head's argv")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let split = argv.iter().position(|a| *a == "--tensor-split").and_then(|at| argv.get(at + 1));
    let by_gtt: Vec<String> = GTT_GIB[1..].iter().map(|gib| ((gib - KEPT_GIB) << 10).to_string()).collect();
    assert_eq!(split.copied(), Some(by_gtt.join(",").as_str()), "the split by node2's and node3's GTT: {argv:?}");
    // Every device named, as many as the split has entries: the workers' RPC devices by the names
    // this build gives them (it serves with them, token for token).
    let devices = argv.iter().position(|a| *a == "--device").and_then(|at| argv.get(at + 1));
    assert_eq!(devices.copied(), Some("RPC0,RPC1"), "{argv:?}");
    let measured = report["measured"].as_array().unwrap_or_else(|| panic!("no measured figures: {report}"));
    let nodes: Vec<&str> = measured.iter().filter_map(|m| m["planned"]["node"].as_str()).collect();
    assert_eq!(nodes, ["node2", "node3"], "a figure for each worker's device: {report}");
    let within = |planned: &Value, said: &Value, what: &str, node: &str| {
        let (planned, said) = (planned.as_u64().expect("a planned size"), said.as_u64());
        let said = said.unwrap_or_else(|| panic!("{node}: llama.cpp did not say its {what}: {report}"));
        eprintln!("{node} {what}: planned {planned} bytes, llama.cpp allocated {said}");
        assert!(planned > 0 && said.abs_diff(planned) * 10 <= planned, "{node} {what}: planned {planned}, said {said}");
    };
    for figures in measured {
        let node = figures["planned"]["node"].as_str().unwrap_or_default();
        within(&figures["planned"]["weights_bytes"], &figures["said_weights_bytes"], "weights", node);
        within(&figures["planned"]["kv_cache_bytes"], &figures["said_kv_cache_bytes"], "KV cache", node);
        assert_eq!(figures["said_context_tokens"], figures["planned"]["context_tokens"], "{report}");
    }
    // The bigger GTT holds more layers: more of the cache.
    let kv = |at: usize| measured[at]["said_kv_cache_bytes"].as_u64().unwrap_or_default();
    assert!(kv(0) > kv(1), "node2 (64 GiB) holds more layers than node3 (32 GiB): {report}");
}

/// The issue's scenarios on the same cluster: A over RPC on node1 and node2, B alone on node3,
/// with the key at the router.
fn several_services_share_the_endpoint(bed: &LlamaBed, port: &str) {
    let cluster = &bed.cluster;
    let (model_a, seed_b) = (&bed.model, TinyLlama { seed: 2, ..TinyLlama::default() });
    let model_b = model_on(cluster, 3, "tiny-b.gguf", seed_b);
    let alone_a = LlamaServer::builder(&TinyLlama::default().gguf()).args(&["--alias", "alpha"]).start();
    let alone_b = LlamaServer::builder(&seed_b.gguf()).args(&["--alias", "beta"]).start();
    let alone = [("alpha", &alone_a), ("beta", &alone_b)];
    let address = |server: &LlamaServer| -> SocketAddr { server.url().trim_start_matches("http://").parse().unwrap() };
    let secrets = tempfile::tempdir().expect("tempdir");
    let key_file = secrets.path().join("api-key");
    std::fs::write(&key_file, format!("{API_KEY}\n")).expect("write the key file");
    let key_file = key_file.to_str().expect("utf-8");

    let a = launch_with(bed, model_a, port, &["--on", "node1,node2", "--name", "alpha", "--api-key-file", key_file]);
    let said = format!("{}{}", stdout(&a), stderr(&a));
    assert!(a.status.success(), "{said}");
    assert!(!said.contains(API_KEY), "the key in the launch's output: {said}");
    let report = json(&a);
    assert_eq!((report["service"].as_str(), report["on"].clone()), (Some("alpha"), json!(["node1", "node2"])));
    assert_eq!((report["api_key"].as_bool(), report["router_started"].as_bool()), (Some(true), Some(true)));
    let b = launch_with(bed, &model_b, port, &["--on", "node3", "--name", "beta", "--api-key-file", key_file]);
    assert!(b.status.success(), "{}{}", stdout(&b), stderr(&b));
    let report = json(&b);
    assert_eq!(report["upstream"], format!("192.168.2.3:{ENGINE_PORT}"), "{report}");
    assert_eq!(report["endpoint"], format!("http://192.168.2.1:{port}/v1"), "the one endpoint: {report}");
    assert_eq!(report["router_started"], false, "the router was running: {report}");
    assert_eq!(report["nodes"][0]["role"], "single", "{report}");
    crate::launch::assert_no_argv_holds(&[API_KEY]);

    // Both answer through the one endpoint, streamed, token for token as each does alone.
    let router = router_address(cluster, port);
    let mut answers = Vec::new();
    for (name, server) in alone {
        for (path, body) in [("/v1/completions", completion(name, 48, true)), ("/v1/chat/completions", chat(name, 48))]
        {
            let by_itself = streamed(address(server), path, None, &body);
            assert!(by_itself.len() > 10, "{name} {path}: {by_itself:?}");
            assert_eq!(streamed(router, path, Some(API_KEY), &body), by_itself, "{name} {path} through the router");
            answers.push(by_itself);
        }
    }
    assert_ne!(answers[0], answers[2], "alpha's and beta's completions are the same: one engine answered both");
    // An unknown model: OpenAI's 404 naming both; the key is the router's.
    let url = |path: &str| format!("http://{router}{path}");
    let unknown = completion("gpt-4", 4, false).to_string();
    let answer = http::request_with_key(None, "POST", &url("/v1/completions"), Some(&unknown), Some(API_KEY), LIMIT)
        .expect("a request");
    assert_eq!(answer.status, 404, "{}", answer.body);
    assert!(answer.body.contains("This endpoint serves `alpha`, `beta`."), "{}", answer.body);
    for key in [None, Some("sk-not-the-key")] {
        let body = completion("beta", 4, false).to_string();
        let refused = http::request_with_key(None, "POST", &url("/v1/completions"), Some(&body), key, LIMIT).unwrap();
        assert_eq!(refused.status, 401, "{key:?}: {}", refused.body);
    }

    // A real client: the `openai` package streams chat and completions to both, and raises
    // NotFoundError for a model nobody serves.
    let max_tokens = 24;
    let result = openai_client(&format!("http://{router}/v1"), API_KEY, max_tokens, &["alpha", "beta"], "gpt-4");
    assert_eq!(result["listed"], json!(["alpha", "beta"]), "{result}");
    for (name, server) in alone {
        let direct_chat = streamed(address(server), "/v1/chat/completions", None, &chat(name, max_tokens));
        let direct = streamed(address(server), "/v1/completions", None, &completion(name, max_tokens, true));
        assert_eq!(result["models"][name]["chat"], json!(direct_chat), "{name}'s chat");
        assert_eq!(result["models"][name]["completion"], json!(direct), "{name}'s completion");
    }
    assert_eq!((&result["unknown"]["class"], &result["unknown"]["status"]), (&json!("NotFoundError"), &json!(404)));

    // `cluster status`: both services, healthy at their engines and through the router.
    let status = strix_cluster(cluster, &["status"]);
    let report = json(&status);
    assert!(status.status.success(), "{report:#}");
    let services = report["services"].as_array().expect("services");
    let seen: Vec<(&str, Value, bool, &str)> = services
        .iter()
        .map(|s| {
            (s["name"].as_str().unwrap(), s["nodes"].clone(), s["serves"] == true, s["routed"].as_str().unwrap_or("-"))
        })
        .collect();
    assert_eq!(seen, [("alpha", json!(["node1", "node2"]), true, "ok"), ("beta", json!(["node3"]), true, "ok")]);
    let router_pid = report["router"]["process"]["pid"].as_u64().expect("the router runs");
    assert_eq!(report["router"]["api_key"], true, "{report:#}");
    assert!(!stdout(&status).contains(API_KEY), "the key in status");
    // The cluster's metrics and `cluster top` while both serve (issue 33; top.rs).
    crate::top::metrics_and_top(cluster, API_KEY);

    // A service onto node3 beside B, whose memory is not known to leave room: refused, naming B
    // and node3, before anything starts.
    let beside = launch_with(bed, &model_b, port, &["--on", "node3", "--name", "gamma", "--api-key-file", key_file]);
    let said = stderr(&beside);
    assert_eq!(beside.status.code(), Some(1), "{said}");
    assert!(said.contains("node3") && said.contains("beta") && said.contains("gamma"), "{said}");
    assert!(!record_path(&cluster.node(3).serving_dir(), "gamma").exists(), "gamma recorded on node3");
    let on_node3 = running_in_toolbox(cluster, 3);
    assert_eq!(on_node3.iter().filter(|name| name.contains("llama-server")).count(), 1, "{on_node3:?}");

    // A stops while a stream to B runs: B's engine is held (SIGSTOP) mid-stream across the stop,
    // and the stream then completes, token for token as B alone answers it.
    // Its prompt evaluated afresh on both (a cached prompt is evaluated in another batch, whose
    // rounding can tip a near tie hundreds of tokens on).
    let mut long = completion("beta", 400, true);
    long["cache_prompt"] = json!(false);
    let whole = streamed(address(&alone_b), "/v1/completions", None, &long);
    let mut stream = EventStream::open(router, "/v1/completions", Some(API_KEY), &long);
    let status = stream.status;
    assert_eq!(status, 200, "{}", stream.body());
    let first = stream.next_event().expect("beta's first event");
    let held = Frozen::stop(process_in(cluster, 3, "llama-server"));
    let stopped = strix_cluster(cluster, &["stop", "alpha"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    let report = json(&stopped);
    assert_eq!(report["services"], json!(["alpha"]), "{report}");
    let routes: Vec<&str> =
        report["router"]["routes"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(routes, ["beta"], "{report}");
    drop(held);
    let mut events = vec![first];
    events.extend(stream.rest());
    assert!(stream.ended_cleanly(), "beta's stream was cut");
    assert_eq!(pieces(&events), whole, "beta's stream, across alpha's stop");
    for index in [1, 2] {
        let running = running_in_toolbox(cluster, index);
        assert!(
            !running.iter().any(|n| n.contains("llama-server") || n.contains("rpc-server")),
            "node{index}: {running:?}"
        );
    }
    assert!(runs(router_pid), "the router kept running for beta");

    // The vLLM stand-in beside llama.cpp, through the same router: a toolbox `vllm` on node1 (now
    // free), serving a model directory there as `coder`.
    let image = node_image(cluster.node(1).podman(), &bed.registry, "vllm-node:latest");
    let refresh = ["refresh", "--image", &image, "--name", "vllm", "--manager", "native", "--spread", "off"];
    let refreshed = strix_cluster_of(cluster, "node1", &refresh);
    assert!(refreshed.status.success(), "{}", stderr(&refreshed));
    let coder = cluster.node(1).home.join("models/coder");
    std::fs::create_dir_all(&coder).expect("mkdir the model");
    std::fs::write(coder.join("config.json"), r#"{"architectures": ["TinyForCausalLM"]}"#).expect("config.json");
    let coder = coder.display().to_string();
    let launched = strix_cluster(
        cluster,
        &["launch", &coder, "--engine", "vllm", "--toolbox", "vllm", "--on", "node1", "--name", "coder"]
            .iter()
            .copied()
            .chain(["--api-key-file", key_file, "--timeout", "120"])
            .collect::<Vec<_>>(),
    );
    assert!(launched.status.success(), "{}{}", stdout(&launched), stderr(&launched));
    let report = json(&launched);
    assert_eq!((report["engine"].as_str(), report["upstream"].as_str()), (Some("vllm"), Some("192.168.2.1:8001")));
    let argv = report["nodes"][0]["commands"][0]["argv"].to_string();
    assert!(argv.contains("\"--served-model-name\",\"coder\""), "the engine answers to the name: {argv}");
    let (listed, _) = get_json(&url("/v1/models"), Some(API_KEY));
    let ids: Vec<&str> = listed["data"].as_array().unwrap().iter().filter_map(|m| m["id"].as_str()).collect();
    assert_eq!(ids, ["beta", "coder"], "{listed}");
    let asked = completion("coder", 8, false).to_string();
    let answer =
        http::request_with_key(None, "POST", &url("/v1/completions"), Some(&asked), Some(API_KEY), LIMIT).unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
    let answered: Value = serde_json::from_str(&answer.body).expect("JSON");
    assert_eq!((answered["model"].as_str(), answered["usage"]["completion_tokens"].as_u64()), (Some("coder"), Some(8)));
    let mut short = completion("beta", 24, true);
    short["cache_prompt"] = json!(false);
    let beta = streamed(router, "/v1/completions", Some(API_KEY), &short);
    assert_eq!(beta, streamed(address(&alone_b), "/v1/completions", None, &short), "beta beside the stand-in");
    crate::top::vllm_beside_llama(cluster, API_KEY);

    // Everything stops, and the router with it.
    let stopped = strix_cluster(cluster, &["stop", "--all"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    assert_eq!(json(&stopped)["services"], json!(["beta", "coder"]), "{}", stdout(&stopped));
    assert!(!runs(router_pid), "the router runs with no service left");
    for (index, name) in [(1, "coder"), (3, "beta")] {
        assert!(!record_path(&cluster.node(index).serving_dir(), name).exists(), "node{index} still records {name}");
    }
    let logs = strix_cluster(cluster, &["logs", "beta", "-n", "5000"]);
    let said = format!("{}{}", stdout(&logs), stderr(&logs));
    assert!(logs.status.success() && said.contains("llama-server"), "its logs outlive it: {said}");
    assert!(!said.contains(API_KEY), "the key in a log: {said}");
}

/// Every request's bound.
const LIMIT: Duration = Duration::from_secs(60);

/// GET `url` with `key`: the body, parsed, and the status.
fn get_json(url: &str, key: Option<&str>) -> (Value, u16) {
    let answer = http::request_with_key(None, "GET", url, None, key, LIMIT).expect("a request");
    (serde_json::from_str(&answer.body).unwrap_or(Value::String(answer.body)), answer.status)
}

/// The host pid of the process named `name` in node `index`'s namespace (the only one).
fn process_in(cluster: &TestCluster, index: usize, name: &str) -> u32 {
    let found: Vec<i32> = cluster
        .node(index)
        .netns()
        .pids()
        .into_iter()
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim() == name))
        .collect();
    assert_eq!(found.len(), 1, "{name} in node{index}: {found:?}");
    found[0] as u32
}

fn nft(netns: &str, args: &[&str]) {
    let output = crate::support::netns::enter(netns, "nft").args(args).output().expect("nft (nftables)");
    assert!(output.status.success(), "nft {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}
