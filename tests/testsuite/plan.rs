//! `cluster plan MODEL` on three RoCE nodes (E810 host trees, GTT as their kernels report it),
//! the model on a stand-in Hub behind the cluster's uplink: Qwen3-32B's published config and its
//! 65.5 GB checkpoint as sparse shards (support/checkpoint.rs), so the plan reads only headers by
//! range, as it would from the real Hub.

use std::process::{Output, Stdio};

use crate::support::checkpoint::{config, dense_checkpoint};
use crate::support::cli::{json, stderr, stdout, strix_command};
use crate::support::cluster::TestCluster;
use crate::support::hub::HubStandIn;
use crate::support::registry::Registry;

const MODEL: &str = "Qwen/Qwen3-32B";
const TOKEN: &str = "hf_TESTplanTOKENthatMUSTneverSHOW13579";
/// The fixtures' GPU: 124 GiB of GTT, 1 GiB of it in use; the plan keeps 4 GiB back.
const USABLE: u64 = 133_143_986_176 - (1 << 30) - (4 << 30);

fn strix_cluster(cluster: &TestCluster, env: &[(String, String)], args: &[&str]) -> Output {
    let config = cluster.ssh_config();
    let nodes = cluster.nodes_arg();
    let mut argv = vec!["cluster", "--ssh-config", config.to_str().expect("utf-8"), "--nodes", &nodes];
    argv.extend(["--connect-timeout", "3"]);
    argv.extend_from_slice(args);
    strix_command(env, &argv).stdin(Stdio::null()).output().expect("run strix-toolbox")
}

#[test]
fn three_roce_nodes_plan_a_64_head_model_from_its_headers_and_never_tensor_parallel_3() {
    let (files, total) = dense_checkpoint(&config("Qwen3-32B"), 4 << 30);
    assert!(total > 60_000_000_000, "a 60 GB checkpoint: {total}");
    let hub = HubStandIn::start(&[(MODEL, files)], Some(TOKEN));
    let registry = Registry::start();
    let cluster = TestCluster::start(&registry, 3);
    cluster.uplink().forward(hub.port);
    let env: Vec<(String, String)> = [("HF_ENDPOINT", hub.endpoint()), ("HF_TOKEN", TOKEN.to_string())]
        .map(|(key, value)| (key.to_string(), value))
        .to_vec();

    let planned = strix_cluster(&cluster, &env, &["--json", "plan", MODEL]);
    let said = format!("{}{}", stdout(&planned), stderr(&planned));
    assert!(planned.status.success(), "{said}");
    assert!(!said.contains(TOKEN), "the token in the plan's output");
    let report = json(&planned);
    assert_eq!(report["engine"], "vllm", "{report}");
    // Headers only: the head read them, by ranges, with the token; the other nodes reached nothing.
    let read = report["read"]["bytes_read"].as_u64().expect("bytes read");
    assert!(read < 2_000_000, "the plan read {read} bytes");
    let sent: u64 = hub.requests().iter().map(|r| r.sent).sum();
    assert!(sent < 2_000_000, "the Hub stand-in sent {sent} bytes");
    assert!(
        cluster.uplink().node_bytes_down(1) < 2_000_000,
        "{} bytes up the head's uplink",
        cluster.uplink().node_bytes_down(1)
    );
    assert_eq!((cluster.uplink().node_bytes_down(2), cluster.uplink().node_bytes_down(3)), (0, 0));
    for request in hub.requests().iter().filter(|r| r.path.contains("/resolve/")) {
        assert!(request.authorized, "{request:?}");
        assert!(request.range.is_some() || request.path.ends_with(".json"), "a weights file read whole: {request:?}");
    }
    assert_eq!(report["read"]["sizing"]["weights"]["total_bytes"], total, "{report}");

    let plan = &report["plan"];
    let usable: Vec<u64> =
        plan["nodes"].as_array().expect("nodes").iter().map(|n| n["usable_bytes"].as_u64().unwrap()).collect();
    assert_eq!(usable, [USABLE; 3], "each node's GTT less what is in use less the reserve");
    let layouts = plan["layouts"].as_array().expect("layouts");
    let tp3 = layouts.iter().find(|l| l["tp"] == 3).expect("TP 3 is listed");
    assert_eq!(tp3["outcome"]["outcome"], "breaks", "{tp3}");
    assert_eq!(tp3["outcome"]["rules"][0]["rule"], "attention-heads", "{tp3}");
    let chosen = &layouts[plan["chosen"]["layout"].as_u64().expect("a layout chosen") as usize];
    assert_eq!((chosen["tp"].as_u64(), chosen["pp"].as_u64()), (Some(1), Some(3)), "{plan}");
    let args: Vec<&str> = plan["engine_args"].as_array().unwrap().iter().filter_map(|a| a.as_str()).collect();
    assert_eq!(args[..4], ["--tensor-parallel-size", "1", "--pipeline-parallel-size", "3"], "{args:?}");
    assert!(plan["chosen"]["why"].as_str().unwrap().contains("TP 3 × PP 1: its 64 attention heads"), "{plan}");
    assert!(plan["fewer_nodes"].as_str().unwrap_or_default().contains("fits on 1 of the 3 nodes"), "{plan}");
    let figures = &chosen["outcome"];
    assert_eq!(figures["context_tokens"], 40_960, "the model's own maximum fits: {figures}");

    // The same plan as text; --tp 3 asked is refused naming the rule (exit 1: nothing fits).
    let text = stdout(&strix_cluster(&cluster, &env, &["plan", MODEL]));
    assert!(text.contains("✗ TP 3 × PP 1: its 64 attention heads") && text.contains("Chosen: TP 1 × PP 3"), "{text}");
    let asked = strix_cluster(&cluster, &env, &["plan", MODEL, "--tp", "3"]);
    assert_eq!(asked.status.code(), Some(1), "{}", stderr(&asked));
    assert!(stdout(&asked).contains("Refused: TP 3 × PP 1, as asked, cannot serve this model"), "{}", stdout(&asked));
}
