//! Nodes that mount one home (one NFS /home on every node): two namespace nodes whose sessions
//! have the same HOME, each with its own host tree and machine id. Each keeps its serving record
//! and logs apart, under its machine id, so a two-node launch works (llama.cpp over RPC, for
//! real); `cluster doctor` says that they share a home, and what follows.

use std::process::{Output, Stdio};

use crate::support::cli::{json, stderr, stdout, strix_command};
use crate::support::cluster::{Link, TestCluster};
use crate::support::llama_image::llama_image;
use crate::support::llama_server::{greedy_completion_of, LlamaServer};
use crate::support::registry::Registry;
use crate::support::tiny_llama::TinyLlama;

const PROMPT: &str = "Once upon a time, in a small village,";
const TOKENS: u32 = 16;
/// What the test servers run with (support/llama_server.rs says why): the same for the reference.
const SERVER_ARGS: [&str; 4] = ["--threads", "1", "--ctx-size", "2048"];

fn strix_cluster(cluster: &TestCluster, args: &[&str]) -> Output {
    let config = cluster.ssh_config();
    let nodes = cluster.nodes_arg();
    let mut argv = vec!["--json", "cluster"];
    argv.extend(["--ssh-config", config.to_str().expect("utf-8"), "--nodes", &nodes, "--connect-timeout", "3"]);
    argv.extend_from_slice(args);
    strix_command(&[], &argv).stdin(Stdio::null()).output().expect("run strix-toolbox")
}

#[test]
fn two_nodes_that_share_a_home_launch_and_the_doctor_says_so() {
    let registry = Registry::start();
    let cluster = TestCluster::start_sharing_home(&registry, 2, Link::Thunderbolt);
    let home = cluster.node(1).home.clone();
    assert_eq!(cluster.node(2).home, home, "one home for both nodes");
    assert_ne!(cluster.node(1).machine_id(), cluster.node(2).machine_id());

    let image = llama_image(cluster.node(1).podman(), &registry, "llama-node:latest", "2026-11-01T10:00:00Z");
    let refresh = ["refresh", "--engine", "llama.cpp", "--image", &image, "--manager", "native", "--spread", "off"];
    let refreshed = strix_cluster(&cluster, &refresh);
    assert!(refreshed.status.success(), "{}", stderr(&refreshed));
    let model = home.join("models/tiny-llama.gguf");
    std::fs::create_dir_all(model.parent().expect("a directory")).expect("mkdir models");
    std::fs::copy(TinyLlama::default().gguf(), &model).expect("the model in the shared home");

    // The doctor: one home, said once with what follows.
    let doctor = json(&strix_cluster(&cluster, &["doctor", "--engine", "llama.cpp"]));
    let row = doctor["checks"].as_array().expect("checks").iter().find(|c| c["name"] == "home").cloned();
    let row = row.unwrap_or_else(|| panic!("no home row: {doctor}"));
    let cells: Vec<&str> = row["cells"].as_array().unwrap().iter().map(|c| c["text"].as_str().unwrap()).collect();
    assert_eq!(cells, ["shared with node2", "shared with node1"], "{row}");
    let problems = row["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{row}");
    let said = problems[0]["message"].as_str().unwrap();
    assert!(said.starts_with("node1, node2 share one home"), "{said}");
    assert!(said.contains(&format!("({}/.cache/huggingface/hub) is one directory", home.display())), "{said}");
    assert!(said.ends_with("needs no spread between them"), "{said}");
    assert_eq!(problems[0]["status"], "info", "{row}");

    // The launch: each node's record and logs in its own part of the one home.
    let port = crate::support::free_port().to_string();
    let model_arg = model.display().to_string();
    let mut launch = vec!["launch", &model_arg, "--name", "tiny", "--port", &port, "--timeout", "120", "--"];
    launch.extend(SERVER_ARGS);
    let launched = strix_cluster(&cluster, &launch);
    assert!(launched.status.success(), "{}{}", stdout(&launched), stderr(&launched));
    let records: Vec<serde_json::Value> = (1..=2)
        .map(|index| {
            let path = cluster.node(index).serving_dir().join("tiny.json");
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("node{index}'s record {path:?}: {e}"));
            serde_json::from_str(&text).expect("a record")
        })
        .collect();
    let names = |record: &serde_json::Value| -> Vec<String> {
        record["processes"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!((names(&records[0]), names(&records[1])), (vec!["llama-server".into()], vec!["rpc-server".into()]));
    assert!(cluster.node(1).serving_dir().join("tiny.llama-server.log").exists());
    assert!(cluster.node(2).serving_dir().join("tiny.rpc-server.log").exists());
    let unkept = home.join(".local/state/strix-toolbox/serving/tiny.json");
    assert!(!unkept.exists(), "a record in the shared state itself");

    // It answers as one node does, with the layers on node2's rpc-server.
    let single = LlamaServer::builder(&TinyLlama::default().gguf()).start().greedy(PROMPT, TOKENS);
    let url = format!("http://{}:{port}", cluster.node(1).link_address);
    let node2 = Some(cluster.node(2).netns().name());
    let answered = greedy_completion_of(node2, &url, Some("tiny"), PROMPT, TOKENS).expect("a completion");
    assert_eq!(answered, single, "the cluster answered otherwise than one node");

    let status = json(&strix_cluster(&cluster, &["status"]));
    assert_eq!(status["services"][0]["workers"][0]["reached"], "answers", "{status}");
    let stopped = strix_cluster(&cluster, &["stop"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    let stopped = json(&stopped);
    for (index, expected) in [(0, "llama-server"), (1, "rpc-server")] {
        assert_eq!(stopped["nodes"][index]["stopped"]["processes"], serde_json::json!([expected]), "{stopped}");
    }
    for index in 1..=2 {
        assert!(!cluster.node(index).serving_dir().join("tiny.json").exists(), "node{index}'s record after the stop");
    }
}
