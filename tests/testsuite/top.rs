//! `cluster metrics` and `cluster top` on a real cluster that serves: called by the llama.cpp
//! launch test (llama_launch.rs) while its two services run (alpha over RPC on node1 and node2,
//! beta alone on node3, both behind the API key), so no cluster of their own is started.
//!
//! For the check's length each node's host tree gains what a Strix Halo's would show while it
//! serves (GPU memory in use, busy share, and an E810 RoCE port's counters, node-specific
//! values), taken away again afterwards so the launch test's later steps see the tree they had.
//! Then: `cluster metrics` printed once holds every node and both services, and never the key;
//! promtool finds nothing in it but the engines' own colon names; a real Prometheus scraping
//! `cluster metrics --listen` holds every node's RDMA counters and both engines' series; Ctrl-C
//! ends the endpoint with 130; `cluster top --once --json` shows every node and both services
//! with their figures; `cluster top | head -n 2` ends with 0, no panic; Ctrl-C ends the live view
//! with 130.

use std::collections::BTreeMap;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::support::cli::{json, stderr, stdout, strix_command};
use crate::support::cluster::TestCluster;
use crate::support::host_tree::fixture_dir;
use crate::support::prometheus::{key, promtool_remarks_only_the_engines_colon_names, series, Prometheus};
use crate::support::{free_port, stop_child, wait_until};

/// The fixture whose RoCE port (an E810's, down) carries irdma's counters.
const ROCE_FIXTURE: &str = "strix-roce-down-thunderbolt";
/// What the check adds to a node's host tree (and takes away after).
const ADDED: [&str; 3] = [
    "sys/class/infiniband",
    "sys/class/drm/card0/device/mem_info_gtt_used",
    "sys/class/drm/card0/device/gpu_busy_percent",
];

/// The bytes node `index`'s port has sent, as its ip4 and ip6 counters say together.
fn sent_by(index: usize) -> u64 {
    index as u64 * 1_000_000 + 7
}

/// Node `index`'s host tree shows a serving node: its GTT in use, its GPU busy, its RoCE port's
/// counters.
fn serving_tree(tree: &Path, index: usize) {
    copy_tree(&fixture_dir(ROCE_FIXTURE).join("sys/class/infiniband"), &tree.join("sys/class/infiniband"));
    let counters = tree.join("sys/class/infiniband/rocep194s0f0/ports/1/hw_counters");
    std::fs::write(counters.join("ip4OutOctets"), format!("{}\n", sent_by(index) - 7)).expect("a counter");
    std::fs::write(counters.join("ip6OutOctets"), "7\n").expect("a counter");
    let device = tree.join("sys/class/drm/card0/device");
    std::fs::write(device.join("mem_info_gtt_used"), format!("{}\n", index << 30)).expect("GTT in use");
    std::fs::write(device.join("gpu_busy_percent"), format!("{}\n", 10 * index)).expect("busy");
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.expect("walk the fixture");
        let target = to.join(entry.path().strip_prefix(from).expect("under the fixture"));
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a fixture file");
        }
    }
}

/// `strix-toolbox [--json] cluster … ARGS` with the engines' key in the environment.
fn cluster_command(cluster: &TestCluster, key: &str, json: bool, args: &[&str]) -> Command {
    let config = cluster.ssh_config();
    let nodes = cluster.nodes_arg();
    let mut argv: Vec<&str> = if json { vec!["--json"] } else { Vec::new() };
    argv.extend(["cluster", "--ssh-config", config.to_str().expect("utf-8"), "--nodes", &nodes]);
    argv.extend(["--connect-timeout", "3"]);
    argv.extend_from_slice(args);
    let mut command = strix_command(&[("STRIX_API_KEY".to_string(), key.to_string())], &argv);
    command.stdin(Stdio::null());
    command
}

fn run(cluster: &TestCluster, key: &str, json: bool, args: &[&str]) -> Output {
    cluster_command(cluster, key, json, args).output().expect("run strix-toolbox")
}

/// The checks, on `cluster` whose services `alpha` (node1, node2) and `beta` (node3) serve and
/// have answered, behind `api_key`.
pub fn metrics_and_top(cluster: &TestCluster, api_key: &str) {
    let began = std::time::Instant::now();
    let trees: Vec<PathBuf> = (1..=3).map(|index| cluster.node(index).host_tree.path().to_path_buf()).collect();
    for (index, tree) in (1..=3).zip(&trees) {
        serving_tree(tree, index);
    }
    printed_once(cluster, api_key);
    scraped_by_prometheus(cluster, api_key);
    top_once_as_json(cluster, api_key);
    top_into_head(cluster, api_key);
    top_ended_by_ctrl_c(cluster, api_key);
    for tree in &trees {
        for added in ADDED {
            let path = tree.join(added);
            if path.is_dir() {
                std::fs::remove_dir_all(&path).expect("take the RoCE port away again");
            } else {
                std::fs::remove_file(&path).expect("take the file away again");
            }
        }
    }
    // For the suite's time budget, not a bound: a log line only.
    eprintln!("the metrics and top checks took {:?}", began.elapsed());
}

fn printed_once(cluster: &TestCluster, api_key: &str) {
    let printed = run(cluster, api_key, false, &["metrics"]);
    let text = stdout(&printed);
    assert!(printed.status.success(), "{}\n{text}", stderr(&printed));
    assert!(!text.contains(api_key) && !stderr(&printed).contains(api_key), "the key in the metrics: {text}");
    for node in ["node1", "node2", "node3"] {
        assert!(text.contains(&format!("strix_node_up{{node=\"{node}\"}} 1\n")), "{node}:\n{text}");
    }
    for (node, service) in [("node1", "alpha"), ("node3", "beta")] {
        let up = format!("strix_engine_up{{node=\"{node}\",service=\"{service}\",");
        assert!(text.lines().any(|line| line.starts_with(&up) && line.ends_with("} 1")), "{service}:\n{text}");
    }
    assert!(!text.contains("strix_scrape_error"), "something could not be read:\n{text}");
    assert!(!text
        .lines()
        .any(|line| line.starts_with("# ") && !line.starts_with("# HELP") && !line.starts_with("# TYPE")));

    // promtool: only the engines' colon names (kept as their dashboards know them) draw a remark.
    promtool_remarks_only_the_engines_colon_names(&text);
}

fn scraped_by_prometheus(cluster: &TestCluster, api_key: &str) {
    let listen: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("an address");
    let mut endpoint = cluster_command(cluster, api_key, false, &["metrics", "--listen", &listen.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cluster metrics --listen");
    let prometheus = Prometheus::start(&[listen]);
    let by = |name: &str, labels: &[&str]| prometheus.query(name).map(|result| series(&result, labels));
    wait_until("prometheus holding every node's RDMA counters", Duration::from_secs(120), || {
        by("strix_rdma_port_transmit_bytes_total", &["node"]).is_ok_and(|sent| sent.len() == 3)
    });
    let sent = by("strix_rdma_port_transmit_bytes_total", &["node", "device", "port"]).expect("the counters");
    for index in 1..=3 {
        let node = format!("node{index}");
        assert_eq!(
            sent.get(&key(&[&node, "rocep194s0f0", "1"])),
            Some(&sent_by(index).to_string()),
            "{sent:?}\n{}",
            prometheus.log()
        );
    }
    let used = by("strix_gpu_memory_used_bytes", &["node", "kind"]).expect("GPU memory");
    assert_eq!(used.get(&key(&["node2", "gtt"])), Some(&(2u64 << 30).to_string()), "{used:?}");
    let up = by("strix_node_up", &["node"]).expect("node up");
    assert_eq!(up.values().filter(|value| *value == "1").count(), 3, "{up:?}");
    // Both engines' own series, relabelled with their node, service and model; their counters as
    // they count them (both have answered completions by now).
    let predicted = by("llamacpp:tokens_predicted_total", &["node", "service"]).expect("llama.cpp's counter");
    for (node, service) in [("node1", "alpha"), ("node3", "beta")] {
        let tokens: f64 = predicted.get(&key(&[node, service])).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        assert!(tokens >= 1.0, "{service} on {node}: {predicted:?}");
    }
    let engines = by("strix_engine_up", &["service"]).expect("engine up");
    assert_eq!(engines, BTreeMap::from([(key(&["alpha"]), "1".into()), (key(&["beta"]), "1".into())]));

    // Ctrl-C ends it: 130.
    // SAFETY: kill(2) on the test's own child.
    assert_eq!(unsafe { libc::kill(endpoint.id() as i32, libc::SIGINT) }, 0);
    let mut status = None;
    wait_until("cluster metrics --listen ending on SIGINT", Duration::from_secs(60), || {
        status = endpoint.try_wait().expect("its status");
        status.is_some()
    });
    let mut said = String::new();
    let _ = endpoint.stderr.take().map(|mut stderr| stderr.read_to_string(&mut said));
    assert_eq!(status.and_then(|s| s.code()), Some(130), "{said}");
    assert!(!said.contains(api_key) && !said.contains("panicked"), "{said}");
    stop_child(&mut endpoint);
}

fn top_once_as_json(cluster: &TestCluster, api_key: &str) {
    let top = run(cluster, api_key, true, &["top", "--once", "--interval", "1s"]);
    assert!(top.status.success(), "{}", stderr(&top));
    let frame = json(&top);
    eprintln!("cluster top --once --json, two llama.cpp services:\n{frame}");
    assert!(!stdout(&top).contains(api_key));
    assert!(frame["rate_seconds"].as_f64().is_some_and(|seconds| seconds > 0.0), "two readings: {frame:#}");
    let nodes = frame["nodes"].as_array().expect("nodes");
    let names: Vec<&str> = nodes.iter().filter_map(|n| n["node"].as_str()).collect();
    assert_eq!(names, ["node1", "node2", "node3"], "{frame:#}");
    for (index, node) in (1..=3).zip(nodes) {
        assert_eq!(node["up"], true, "{node}");
        assert_eq!(node["gpu_memory_used_bytes"].as_f64(), Some(((index as u64) << 30) as f64), "{node}");
        // GTT and VRAM as the node's host tree says them (the launch test gives each its own GTT).
        let device = cluster.node(index).host_tree.path().join("sys/class/drm/card0/device");
        let bytes = |file: &str| -> f64 {
            std::fs::read_to_string(device.join(file)).expect(file).trim().parse().expect("a number of bytes")
        };
        let total = bytes("mem_info_gtt_total") + bytes("mem_info_vram_total");
        assert_eq!(node["gpu_memory_total_bytes"].as_f64(), Some(total), "{node}");
        assert_eq!(node["gpu_busy_percent"].as_f64(), Some(10.0 * index as f64), "{node}");
        // The counters hold still between the two readings: a known rate of nothing.
        assert_eq!(node["link_transmit_bytes_per_second"].as_f64(), Some(0.0), "{node}");
    }
    let services: Vec<(&str, &str)> = frame["services"]
        .as_array()
        .expect("services")
        .iter()
        .filter_map(|s| Some((s["service"].as_str()?, s["node"].as_str()?)))
        .collect();
    assert_eq!(services, [("alpha", "node1"), ("beta", "node3")], "{frame:#}");
    for service in frame["services"].as_array().expect("services") {
        assert_eq!(service["up"], true, "{service}");
        assert!(service["tokens_per_second"].as_f64().is_some_and(|rate| rate >= 0.0), "a known rate: {service}");
        assert_eq!(service["requests_running"].as_f64(), Some(0.0), "{service}");
        assert_eq!(service["requests_waiting"].as_f64(), Some(0.0), "{service}");
        // Today's llama-server has no KV cache gauge: unknown, not a made-up figure.
        assert!(service["kv_cache_used_percent"].is_null(), "{service}");
    }
}

fn top_into_head(cluster: &TestCluster, api_key: &str) {
    let mut top = cluster_command(cluster, api_key, false, &["top", "--interval", "1s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cluster top");
    let head = Command::new("head")
        .args(["-n", "2"])
        .stdin(Stdio::from(top.stdout.take().expect("top's stdout")))
        .output()
        .expect("head -n 2");
    let lines = String::from_utf8_lossy(&head.stdout).into_owned();
    let mut status = None;
    wait_until("cluster top ending after head went away", Duration::from_secs(60), || {
        status = top.try_wait().expect("its status");
        status.is_some()
    });
    let mut said = String::new();
    let _ = top.stderr.take().map(|mut stderr| stderr.read_to_string(&mut said));
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{said}");
    assert!(!said.contains("panicked"), "{said}");
    let lines: Vec<&str> = lines.lines().collect();
    eprintln!("cluster top | head -n 2:\n{}", lines.join("\n"));
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("NODE") && lines[1].starts_with("node1"), "{lines:?}");
    stop_child(&mut top);
}

/// The live view, once it has drawn its first line, ends on SIGINT with 130.
fn top_ended_by_ctrl_c(cluster: &TestCluster, api_key: &str) {
    let mut top = cluster_command(cluster, api_key, false, &["top", "--interval", "1s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cluster top");
    let mut first = String::new();
    let mut stdout = std::io::BufReader::new(top.stdout.take().expect("top's stdout"));
    std::io::BufRead::read_line(&mut stdout, &mut first).expect("top's first line");
    assert!(first.starts_with("NODE"), "{first:?}");
    // SAFETY: kill(2) on the test's own child.
    assert_eq!(unsafe { libc::kill(top.id() as i32, libc::SIGINT) }, 0);
    let mut status = None;
    wait_until("cluster top ending on SIGINT", Duration::from_secs(60), || {
        status = top.try_wait().expect("its status");
        status.is_some()
    });
    let mut said = String::new();
    let _ = top.stderr.take().map(|mut stderr| stderr.read_to_string(&mut said));
    assert_eq!(status.and_then(|s| s.code()), Some(130), "{said}");
    assert!(!said.contains("panicked"), "{said}");
    drop(stdout);
    stop_child(&mut top);
}

/// Later, the vLLM stand-in's `coder` on node1 beside llama.cpp's `beta` on node3: `cluster top`
/// reads each engine by its own names (vLLM's KV cache gauge; llama-server has none).
pub fn vllm_beside_llama(cluster: &TestCluster, api_key: &str) {
    let top = run(cluster, api_key, true, &["top", "--once", "--interval", "1s"]);
    assert!(top.status.success(), "{}", stderr(&top));
    let frame = json(&top);
    eprintln!("cluster top --once --json, vLLM beside llama.cpp:\n{frame}");
    let services = frame["services"].as_array().expect("services");
    let seen: Vec<(&str, &str)> =
        services.iter().filter_map(|s| Some((s["service"].as_str()?, s["node"].as_str()?))).collect();
    assert_eq!(seen, [("coder", "node1"), ("beta", "node3")], "{frame:#}");
    let (coder, beta) = (&services[0], &services[1]);
    for service in [coder, beta] {
        assert_eq!(service["up"], true, "{service}");
        assert!(service["tokens_per_second"].as_f64().is_some(), "{service}");
        assert_eq!(service["requests_running"].as_f64(), Some(0.0), "{service}");
    }
    assert_eq!(coder["kv_cache_used_percent"].as_f64(), Some(0.0), "vLLM's gauge, nothing held: {coder}");
    assert!(beta["kv_cache_used_percent"].is_null(), "{beta}");
}
