//! `launch REPO:QUANT` with llama.cpp: a Hub repository's GGUF by its quant, as `llama-server -hf`
//! takes it, on two Thunderbolt nodes over RPC with the Hub behind the cluster's uplink; the toolboxes run llama.cpp on the node image's Python with huggingface_hub, and the Hub
//! stand-in (support/hub.rs) serves a repository with the tiny llama under two quants, a split
//! model and a projector: only the quant's file is downloaded, on the head only, and what serves
//! answers as the tiny llama does.

use std::process::{Output, Stdio};

use crate::launch::hub_env;
use crate::support::cli::{json, stderr, stdout, strix_command};
use crate::support::cluster::{Link, TestCluster};
use crate::support::hub::{HubFile, HubStandIn};
use crate::support::llama_image::llama_hub_image;
use crate::support::llama_server::{greedy_completion_of, LlamaServer};
use crate::support::registry::Registry;
use crate::support::tiny_llama::TinyLlama;

const REPO: &str = "acme/tiny-llama-GGUF";
const PROMPT: &str = "Once upon a time, in a small village,";
const TOKENS: u32 = 32;
const TOKEN: &str = "hf_TESTtokenTHATmustNEVERshow0123456789";

/// The repository: the tiny llama as Q8_0, another model as Q4_K_M, a split BF16 pair in a
/// subdirectory and a projector, none of which but the quant asked for may be downloaded.
fn gguf_hub() -> HubStandIn {
    let read = |model: TinyLlama| std::fs::read(model.gguf()).expect("the tiny llama");
    let files = vec![
        HubFile::new("README.md", "# tiny llama\n"),
        HubFile::new("tiny-llama-Q8_0.gguf", read(TinyLlama::default())),
        HubFile::new("tiny-llama-Q4_K_M.gguf", read(TinyLlama { seed: 2, ..TinyLlama::default() })),
        HubFile::new("BF16/tiny-llama-BF16-00001-of-00002.gguf", vec![1u8; 4096]),
        HubFile::new("BF16/tiny-llama-BF16-00002-of-00002.gguf", vec![2u8; 4096]),
        HubFile::new("mmproj-tiny-llama-Q8_0.gguf", vec![3u8; 4096]),
    ];
    HubStandIn::start(&[(REPO, files)], Some(TOKEN))
}

/// The files the stand-in was asked for (GET of `/REPO/resolve/REV/PATH`), by path.
fn downloaded(hub: &HubStandIn) -> Vec<String> {
    let prefix = format!("/{REPO}/resolve/");
    let mut paths: Vec<String> = hub
        .requests()
        .iter()
        .filter(|request| request.method == "GET")
        .filter_map(|request| request.path.strip_prefix(&prefix)?.split_once('/').map(|(_, path)| path.to_string()))
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// `strix-toolbox --json cluster … ARGS` with `env`.
fn strix_cluster(cluster: &TestCluster, env: &[(String, String)], args: &[&str]) -> Output {
    let config = cluster.ssh_config();
    let nodes = cluster.nodes_arg();
    let mut argv = vec!["--json", "cluster"];
    argv.extend(["--ssh-config", config.to_str().expect("utf-8"), "--nodes", &nodes, "--connect-timeout", "3"]);
    argv.extend_from_slice(args);
    strix_command(env, &argv).stdin(Stdio::null()).output().expect("run strix-toolbox")
}

#[test]
fn two_nodes_serve_a_hub_gguf_downloaded_once_on_the_head_alone() {
    let single = LlamaServer::builder(&TinyLlama::default().gguf()).start().greedy(PROMPT, TOKENS);
    let registry = Registry::start();
    let cluster = TestCluster::start_with(&registry, 2, Link::Thunderbolt);
    let image = llama_hub_image(cluster.node(1).podman(), &registry, "llama-hub:latest", "2026-11-01T10:00:00Z");
    let refresh = ["refresh", "--engine", "llama.cpp", "--image", &image, "--manager", "native", "--spread", "off"];
    let refreshed = strix_cluster(&cluster, &[], &refresh);
    assert!(refreshed.status.success(), "{}", stderr(&refreshed));
    let hub = gguf_hub();
    cluster.uplink().forward(hub.port);
    let port = crate::support::free_port().to_string();
    let launch = |model: &str| {
        let args = ["launch", model, "--port", &port, "--timeout", "120", "--", "--threads", "1", "--ctx-size", "2048"];
        strix_cluster(&cluster, &hub_env(&hub), &args)
    };

    // A quant the repository lacks: nothing is downloaded, and the error lists its GGUF files.
    let unknown = launch(&format!("{REPO}:Q6_K"));
    let said = stderr(&unknown);
    assert_eq!(unknown.status.code(), Some(2), "a usage error: {}{said}", stdout(&unknown));
    for listed in ["tiny-llama-Q8_0.gguf", "tiny-llama-Q4_K_M.gguf", "BF16/tiny-llama-BF16-00001-of-00002.gguf"] {
        assert!(said.contains(listed), "the error does not list {listed}: {said}");
    }
    assert!(downloaded(&hub).is_empty(), "an unknown quant downloaded {:?}", downloaded(&hub));

    // The quant, in any case: that file alone, once, on the head alone, served under the name asked.
    let model = format!("{REPO}:q8_0");
    let before: Vec<u64> = (1..=2).map(|i| cluster.uplink().node_bytes_down(i)).collect();
    let launched = launch(&model);
    let said = format!("{}{}", stdout(&launched), stderr(&launched));
    assert!(launched.status.success(), "{said}");
    assert!(!said.contains(TOKEN), "{said}");
    let down: Vec<u64> = (1..=2).map(|i| cluster.uplink().node_bytes_down(i) - before[i - 1]).collect();
    let report = json(&launched);
    assert_eq!((report["engine"].as_str(), report["backend"].as_str()), (Some("llama.cpp"), Some("rpc")), "{report}");
    assert_eq!(report["served"].as_str(), Some(model.as_str()), "{report}");
    assert_eq!(downloaded(&hub), ["tiny-llama-Q8_0.gguf"], "only the quant's file");
    assert!(hub.requests().iter().all(|request| request.authorized), "every request with the token");
    let size = std::fs::metadata(TinyLlama::default().gguf()).expect("the model").len();
    eprintln!("uplink bytes down: {down:?} (the file: {size})");
    assert!(down[0] >= size && down[0] < size + size / 10, "the head took the file once: {down:?}, {size}");
    assert_eq!(down[1], 0, "the worker took nothing from the Hub: {down:?}");
    let pulled = &report["hub_model"]["pulled"];
    assert_eq!(pulled["gguf_files"][0]["path"], "tiny-llama-Q8_0.gguf", "{report}");
    assert_eq!(pulled["nodes"].as_array().map(Vec::len), Some(0), "no copy to the worker: {report}");
    assert_eq!(pulled["link_bytes"], 0, "{report}");
    assert_eq!(report["gguf"]["name"], "tiny-llama-Q8_0.gguf", "the model by its content: {report}");
    let worker_cache = cluster.node(2).home.join(".cache/huggingface/hub/models--acme--tiny-llama-GGUF");
    assert!(!worker_cache.exists(), "the worker has a copy at {}", worker_cache.display());
    let url = format!("http://{}:{port}", cluster.node(1).link_address);
    let node2 = Some(cluster.node(2).netns().name());
    let answer =
        greedy_completion_of(node2, &url, Some(&model), PROMPT, TOKENS).expect("a completion through the router");
    assert_eq!(answer, single, "two nodes answer as the tiny llama does on one");

    // Launched again: nothing more comes from the Hub.
    let again = strix_cluster(
        &cluster,
        &hub_env(&hub),
        &[
            "launch",
            &model,
            "--port",
            &port,
            "--timeout",
            "120",
            "--replace",
            "--",
            "--threads",
            "1",
            "--ctx-size",
            "2048",
        ],
    );
    assert!(again.status.success(), "{}{}", stdout(&again), stderr(&again));
    assert_eq!(json(&again)["hub_model"]["pulled"]["head"]["downloaded_bytes"], 0, "the cache had it");
    let stopped = strix_cluster(&cluster, &[], &["stop", &model]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
}
