//! `launch REPO:QUANT` with llama.cpp: a Hub repository's GGUF by its quant, as `llama-server -hf`
//! takes it. On one node, and on two Thunderbolt nodes over RPC with the Hub behind the cluster's
//! uplink; the toolboxes run llama.cpp on the node image's Python with huggingface_hub, and the Hub
//! stand-in (support/hub.rs) serves a repository with the tiny llama under two quants, a split
//! model and a projector: only the quant's file is downloaded, on the head only, and what serves
//! answers as the tiny llama does.

use std::process::{Output, Stdio};

use crate::launch::hub_env;
use crate::support::cli::{json, run_strix, stderr, stdout, strix_command};
use crate::support::cluster::{Link, TestCluster};
use crate::support::hub::{HubFile, HubStandIn};
use crate::support::llama_image::llama_hub_image;
use crate::support::llama_server::{greedy_completion, LlamaServer};
use crate::support::podman::PodmanService;
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

#[test]
fn a_hub_gguf_by_its_quant_downloads_that_file_alone_and_serves_it() {
    let single = LlamaServer::builder(&TinyLlama::default().gguf()).start().greedy(PROMPT, TOKENS);
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let host = crate::support::host_tree::materialize("strix-thunderbolt-only");
    let host = host.path().to_str().expect("utf-8");
    let image = llama_hub_image(&podman, &registry, "llama-hub:latest", "2026-11-01T10:00:00Z");
    let home = tempfile::tempdir().expect("tempdir");
    let mut env = podman.env();
    env.push(("HOME".into(), home.path().display().to_string()));
    let refresh = ["--host-root", host, "refresh", "--engine", "llama.cpp", "--image", &image, "--manager", "native"];
    let refreshed = run_strix(&env, &refresh);
    assert!(refreshed.status.success(), "{}", stderr(&refreshed));
    let hub = gguf_hub();
    env.extend(hub_env(&hub));
    let port = crate::support::free_port().to_string();
    let launch = |model: &str| {
        let args = ["--json", "--host-root", host, "launch", model, "--port", &port, "--timeout", "120"];
        run_strix(&env, &[&args[..], &["--", "--threads", "1", "--ctx-size", "2048"]].concat())
    };

    // A quant the repository lacks: nothing is downloaded, and the error lists its GGUF files.
    let unknown = launch(&format!("{REPO}:Q6_K"));
    let said = stderr(&unknown);
    assert_eq!(unknown.status.code(), Some(2), "a usage error: {}{said}", stdout(&unknown));
    for listed in ["tiny-llama-Q8_0.gguf", "tiny-llama-Q4_K_M.gguf", "BF16/tiny-llama-BF16-00001-of-00002.gguf"] {
        assert!(said.contains(listed), "the error does not list {listed}: {said}");
    }
    assert!(downloaded(&hub).is_empty(), "an unknown quant downloaded {:?}", downloaded(&hub));

    // The quant, in any case: that file only, served under the name it was asked by.
    let model = format!("{REPO}:q8_0");
    let launched = launch(&model);
    let said = format!("{}{}", stdout(&launched), stderr(&launched));
    assert!(launched.status.success(), "{said}");
    assert!(!said.contains(TOKEN), "{said}");
    assert_eq!(downloaded(&hub), ["tiny-llama-Q8_0.gguf"], "only the quant's file crosses the uplink");
    assert!(hub.requests().iter().all(|request| request.authorized), "every request with the token");
    let report = json(&launched);
    assert_eq!((report["engine"].as_str(), report["served"].as_str()), (Some("llama.cpp"), Some(model.as_str())));
    let argv = report["nodes"][0]["commands"][0]["argv"].as_array().expect("argv").clone();
    let served_file = argv[2].as_str().expect("-m PATH");
    assert!(
        served_file.starts_with(&home.path().display().to_string())
            && served_file.ends_with("/tiny-llama-Q8_0.gguf")
            && served_file.contains("/snapshots/"),
        "{report}"
    );
    let pulled = &report["hub_model"]["pulled"];
    assert_eq!(pulled["gguf_files"][0]["path"], "tiny-llama-Q8_0.gguf", "{report}");
    assert_eq!(report["gguf"]["name"], "tiny-llama-Q8_0.gguf", "the model by its content: {report}");
    let answer = greedy_completion(None, &format!("http://127.0.0.1:{port}"), PROMPT, TOKENS).expect("a completion");
    assert_eq!(answer, single, "the Q8_0 file is the tiny llama");

    // Launched again: nothing more comes from the Hub.
    let stopped = run_strix(&env, &["--json", "stop", "--engine", "llama.cpp"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    let again = launch(&model);
    assert!(again.status.success(), "{}{}", stdout(&again), stderr(&again));
    assert_eq!(json(&again)["hub_model"]["pulled"]["head"]["downloaded_bytes"], 0, "the cache had it");
    let stopped = run_strix(&env, &["--json", "stop", "--engine", "llama.cpp"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
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
    let model = format!("{REPO}:Q8_0");
    let before: Vec<u64> = (1..=2).map(|i| cluster.uplink().node_bytes_down(i)).collect();
    let args = ["launch", &model, "--port", &port, "--timeout", "120", "--", "--threads", "1", "--ctx-size", "2048"];
    let launched = strix_cluster(&cluster, &hub_env(&hub), &args);
    let said = format!("{}{}", stdout(&launched), stderr(&launched));
    assert!(launched.status.success(), "{said}");
    let down: Vec<u64> = (1..=2).map(|i| cluster.uplink().node_bytes_down(i) - before[i - 1]).collect();
    let report = json(&launched);
    assert_eq!((report["engine"].as_str(), report["backend"].as_str()), (Some("llama.cpp"), Some("rpc")), "{report}");
    assert_eq!(downloaded(&hub), ["tiny-llama-Q8_0.gguf"], "only the quant's file");
    let size = std::fs::metadata(TinyLlama::default().gguf()).expect("the model").len();
    eprintln!("uplink bytes down: {down:?} (the file: {size})");
    assert!(down[0] >= size && down[0] < size + size / 10, "the head took the file once: {down:?}, {size}");
    assert_eq!(down[1], 0, "the worker took nothing from the Hub: {down:?}");
    let pulled = &report["hub_model"]["pulled"];
    assert_eq!(pulled["nodes"].as_array().map(Vec::len), Some(0), "no copy to the worker: {report}");
    assert_eq!(pulled["link_bytes"], 0, "{report}");
    let worker_cache = cluster.node(2).home.join(".cache/huggingface/hub/models--acme--tiny-llama-GGUF");
    assert!(!worker_cache.exists(), "the worker has a copy at {}", worker_cache.display());
    let url = format!("http://{}:{port}", cluster.node(1).link_address);
    let answer = greedy_completion(Some(cluster.node(2).netns().name()), &url, PROMPT, TOKENS).expect("a completion");
    assert_eq!(answer, single, "two nodes answer as the tiny llama does on one");
    let stopped = strix_cluster(&cluster, &[], &["stop", "--engine", "llama.cpp"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
}
