//! Serving one model across the cluster, end to end: vLLM's multiprocessing executor across the
//! nodes (the default: no Ray anywhere), and real Ray (the version the image pins) in the nodes'
//! toolboxes (`--backend ray`, or by itself on an image whose older vLLM has no `--nnodes`), on
//! Thunderbolt nodes in network namespaces (an RDMA toolbox cannot start
//! here: memlock), each node's podman inside its namespace so `--network host` is the node's own
//! network. The model comes from a stand-in Hub behind the cluster's uplink (support/hub.rs): the
//! launch pulls it once and spreads it. vLLM is the stand-in (support/stand_in_vllm.py): it asks
//! Ray for a placement group of one GPU bundle per node, spread, looks the model up offline on
//! every rank, and serves /health, /v1/models and /ranks (what each rank saw).

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::support::bench_levels::assert_every_level_served;
use crate::support::checkpoint::{config as checkpoint_config, dense_checkpoint};
use crate::support::cli::{json, run_strix, stderr, stdout, strix_command};
use crate::support::cluster::{Link, TestCluster};
use crate::support::hub::{HubFile, HubRequest, HubStandIn};
use crate::support::node_image::{node_image, node_image_without_nnodes};
use crate::support::podman::PodmanService;
use crate::support::registry::Registry;
use crate::support::serving_files::{home_serving_dir, log_path, record_path, records};
use crate::support::wait_until;

const MODEL: &str = "org/tiny-model";
const TOKEN: &str = "hf_TESTtokenTHATmustNEVERshow0123456789";
/// The endpoint's API key (STRIX_API_KEY): in no argv, log or report either.
const API_KEY: &str = "sk-TESTkeyTHATmustNEVERshow9876543210";
/// Ray's object store takes 30% of the RAM by default; the test nodes share one machine.
const SMALL_OBJECT_STORE: &str = "RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION=0.01";

/// A cluster of `nodes` Thunderbolt nodes whose toolbox `vllm` runs the node image, and the Hub
/// stand-in with the model, behind the cluster's uplink.
pub(crate) struct ServingBed {
    pub cluster: TestCluster,
    pub hub: HubStandIn,
    _registry: Registry,
}

pub(crate) fn serving_cluster(nodes: usize) -> ServingBed {
    serving_bed(nodes, node_image)
}

/// The same, on an image whose vLLM has no `--nnodes` (an older one).
fn older_vllm_cluster(nodes: usize) -> ServingBed {
    serving_bed(nodes, node_image_without_nnodes)
}

fn serving_bed(nodes: usize, image: fn(&PodmanService, &Registry, &str) -> String) -> ServingBed {
    let registry = Registry::start();
    let cluster = TestCluster::start_with(&registry, nodes, Link::Thunderbolt);
    let image = image(cluster.node(1).podman(), &registry, "vllm-node:latest");
    // Every node pulls for itself: the spread has its own tests (spread.rs).
    let refresh = ["refresh", "--image", &image, "--name", "vllm", "--manager", "native", "--spread", "off"];
    let refreshed = strix_cluster(&cluster, &[], &refresh);
    assert!(refreshed.status.success(), "{}", stderr(&refreshed));
    let hub = model_hub();
    cluster.uplink().forward(hub.port);
    ServingBed { cluster, hub, _registry: registry }
}

/// The Hub stand-in serving MODEL (a config and a small LFS weights file), wanting TOKEN.
fn model_hub() -> HubStandIn {
    let weights: Vec<u8> = (0..256 * 1024u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let config = HubFile::new("config.json", r#"{"architectures": ["TinyForCausalLM"]}"#);
    // Two the plan sizes from their headers: one too big for a node (141 GB), one a few MB.
    let (too_big, _) = dense_checkpoint(&checkpoint_config("Llama-3.3-70B-Instruct"), 4 << 30);
    // The small one is downloaded: its files whole (a sparse file's blob is never checked).
    let (sized, _) = dense_checkpoint(SIZED_CONFIG, 1 << 20);
    let sized = sized
        .into_iter()
        .map(|mut file| {
            file.data.resize(file.size as usize, 0);
            file
        })
        .collect();
    let repos = [(MODEL, vec![config, HubFile::new("model.safetensors", weights)]), (TOO_BIG, too_big), (SIZED, sized)];
    HubStandIn::start(&repos, Some(TOKEN))
}

/// A model larger than one node's GPU memory.
const TOO_BIG: &str = "meta-llama/Llama-3.3-70B-Instruct";
/// A Qwen3 of a few MB whose shape the plan reads: its context, 4096, fits.
const SIZED: &str = "org/tiny-qwen3";
const SIZED_CONFIG: &str = r#"{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "vocab_size": 1024, "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
    "tie_word_embeddings": true, "rms_norm_eps": 1e-6, "rope_theta": 1000000}"#;

/// The operator's environment: the Hub, and the token it wants.
pub(crate) fn hub_env(hub: &HubStandIn) -> Vec<(String, String)> {
    [("HF_ENDPOINT", hub.endpoint()), ("HF_TOKEN", TOKEN.to_string()), ("HF_HUB_DISABLE_XET", "1".to_string())]
        .map(|(key, value)| (key.to_string(), value))
        .to_vec()
}

/// `strix-toolbox --json cluster --ssh-config … --nodes … ARGS…` from the head, with `env` (the
/// cluster's options first: ARGS may end with `-- VLLM ARGS`).
pub(crate) fn cluster_command(cluster: &TestCluster, env: &[(String, String)], args: &[&str]) -> Command {
    let config = cluster.ssh_config();
    let nodes = cluster.nodes_arg();
    let mut argv = vec!["--json", "cluster"];
    argv.extend(["--ssh-config", config.to_str().expect("utf-8"), "--nodes", &nodes, "--connect-timeout", "3"]);
    argv.extend_from_slice(args);
    strix_command(env, &argv)
}

fn strix_cluster(cluster: &TestCluster, env: &[(String, String)], args: &[&str]) -> Output {
    cluster_command(cluster, env, args).stdin(Stdio::null()).output().expect("run strix-toolbox")
}

/// `cluster launch MODEL` with a bounded wait, then `extra`.
fn launch_args<'a>(port: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["launch", MODEL, "--port", port, "--timeout", "120"];
    args.extend_from_slice(extra);
    args
}

/// `cluster launch MODEL` over Ray, tensor parallel across two nodes, with a small object store.
fn ray_launch_args<'a>(port: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    launch_args(port, &[&["--backend", "ray", "--tp", "2", "-e", SMALL_OBJECT_STORE], extra].concat())
}

/// Where node `index` records what the launch of `service` started.
fn record_of(cluster: &TestCluster, index: usize, service: &str) -> std::path::PathBuf {
    record_path(&cluster.node(index).serving_dir(), service)
}

/// What runs in node `index`'s toolbox, by process name (zombies excluded).
fn running_in_toolbox(cluster: &TestCluster, index: usize) -> Vec<String> {
    cluster.node(index).podman().processes_in("vllm")
}

/// Nothing a launch starts runs anywhere: no Ray, no vLLM, no record.
fn assert_nothing_serves(cluster: &TestCluster, nodes: usize, context: &str) {
    for index in 1..=nodes {
        let running = running_in_toolbox(cluster, index);
        assert!(
            !running.iter().any(|name| name == "raylet" || name == "gcs_server" || name.starts_with("vllm")),
            "node{index} still runs {running:?} ({context})"
        );
        let left = records(&cluster.node(index).serving_dir());
        assert!(left.is_empty(), "node{index} still has serving records {left:?} ({context})");
    }
}

/// GET `url` from inside node `index`'s network namespace.
pub(crate) fn get_on_node(cluster: &TestCluster, index: usize, url: &str) -> String {
    http_get(cluster.node(index).netns().enter("python3"), url)
}

/// GET `url` with `python3` (a command, so it can run inside a namespace).
fn http_get(python3: Command, url: &str) -> String {
    let (status, body) = http_status(python3, url, None);
    assert_eq!(status, 200, "GET {url}: {body}");
    body
}

/// GET `url` with `python3`, with `key` as a bearer token: the status and the body.
fn http_status(mut python3: Command, url: &str, key: Option<&str>) -> (u16, String) {
    let script = "import sys, urllib.request, urllib.error\n\
                  request = urllib.request.Request(sys.argv[1])\n\
                  if len(sys.argv) > 2: request.add_header('Authorization', 'Bearer ' + sys.argv[2])\n\
                  try:\n    answer = urllib.request.urlopen(request, timeout=10); print(answer.status); print(answer.read().decode())\n\
                  except urllib.error.HTTPError as error:\n    print(error.code); print(error.read().decode())";
    let output = python3.args(["-c", script, url]).args(key).output().expect("python3");
    assert!(output.status.success(), "GET {url}: {}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (status, body) = text.split_once('\n').unwrap_or((&text, ""));
    (status.trim().parse().expect("a status"), body.to_string())
}

/// On an older vLLM (no `--nnodes`): Ray's executor, asked for or taken by itself.
#[test]
fn two_nodes_serve_one_endpoint_with_a_rank_on_each_link_address() {
    let bed = older_vllm_cluster(2);
    let (cluster, env) = (&bed.cluster, hub_env(&bed.hub));
    let port = crate::support::free_port().to_string();

    let too_many = strix_cluster(cluster, &env, &launch_args(&port, &["--backend", "ray", "--tp", "3"]));
    assert_eq!(too_many.status.code(), Some(2), "{}", stderr(&too_many));
    assert!(stderr(&too_many).contains("--tp 3"), "{}", stderr(&too_many));
    assert_nothing_serves(cluster, 2, "--tp 3 is refused before anything starts");

    let plan = strix_cluster(cluster, &env, &ray_launch_args(&port, &["--dry-run"]));
    assert!(plan.status.success(), "{}", stderr(&plan));
    let plan = json(&plan);
    let commands = |node: usize| plan["nodes"][node]["commands"].as_array().expect("commands").clone();
    let argv = |node: usize, command: usize| -> Vec<String> {
        commands(node)[command]["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect()
    };
    assert_eq!(argv(0, 0)[..7], ["ray", "start", "--head", "--port", "6379", "--node-ip-address", "192.168.2.1"]);
    assert_eq!(argv(1, 0)[..6], ["ray", "start", "--address", "192.168.2.1:6379", "--node-ip-address", "192.168.2.2"]);
    assert_eq!(commands(1)[0]["env"]["VLLM_HOST_IP"], "192.168.2.2");
    assert_eq!(commands(0)[1]["argv"][4], "2", "tensor parallel across both nodes: {plan}");
    assert_eq!(plan["endpoint"], format!("http://192.168.2.1:{port}/v1"));
    assert_nothing_serves(cluster, 2, "a dry run starts nothing");

    let node2_upstream = cluster.uplink().node_bytes_down(2);
    let mut with_key = env.clone();
    with_key.push(("STRIX_API_KEY".into(), API_KEY.into()));
    // No --backend: the image's vLLM has no --nnodes, so Ray's executor spans the nodes.
    let unasked = ["--tp", "2", "-e", SMALL_OBJECT_STORE, "--", "--served-model-name", "tiny"];
    let launched = strix_cluster(cluster, &with_key, &launch_args(&port, &unasked));
    let said = format!("{}{}", stdout(&launched), stderr(&launched));
    assert!(launched.status.success(), "{said}");
    assert!(!said.contains(TOKEN) && !said.contains(API_KEY), "a secret showed in the launch's output: {said}");
    let report = json(&launched);
    assert_eq!(report["backend"], "ray", "{report}");
    assert!(report["why"].to_string().contains("the image's vLLM has no --nnodes"), "{report}");
    assert_eq!(report["endpoint"], format!("http://192.168.2.1:{port}/v1"), "the router's: {report}");
    assert_eq!(report["served"], "tiny", "the name the server answers with: {report}");
    assert_eq!(report["service"], "tiny", "named as the operator's --served-model-name says: {report}");
    let upstream = report["upstream"].as_str().expect("the engine's address").to_string();

    // The endpoint (the router) wants the key on /v1, and the try line names the model as the
    // server does, with the key as a variable.
    let models_url = format!("http://192.168.2.1:{port}/v1/models");
    assert_eq!(http_status(cluster.node(2).netns().enter("python3"), &models_url, None).0, 401);
    let (status, models) = http_status(cluster.node(2).netns().enter("python3"), &models_url, Some(API_KEY));
    assert_eq!(status, 200, "{models}");
    assert!(models.contains("\"tiny\""), "{models}");

    // One rank on each node, on its link address, with the environment that pins it there.
    let ranks: serde_json::Value =
        serde_json::from_str(&get_on_node(cluster, 2, &format!("http://{upstream}/ranks"))).unwrap();
    let mut ips: Vec<&str> = ranks.as_array().unwrap().iter().map(|r| r["ip"].as_str().unwrap()).collect();
    ips.sort();
    assert_eq!(ips, ["192.168.2.1", "192.168.2.2"], "{ranks}");
    for rank in ranks.as_array().unwrap() {
        let env = &rank["env"];
        assert_eq!(env["VLLM_HOST_IP"], rank["ip"], "{rank}");
        assert_eq!(env["GLOO_SOCKET_IFNAME"], "thunderbolt0", "{rank}");
        assert_eq!(env["NCCL_NET_GDR_LEVEL"], "0", "{rank}");
        assert_eq!(env["RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES"], "1", "{rank}");
        assert_eq!(env["RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES"], "1", "the one Ray 2.45 and later read: {rank}");
        assert_eq!(env["HF_HUB_OFFLINE"], "1", "{rank}");
        let found = rank["model"].as_str().unwrap_or_default();
        assert!(found.contains("models--org--tiny-model/snapshots/"), "the rank found no weights offline: {rank}");
    }
    // The weights crossed the uplink once, to the head; the worker got them over the link. The
    // plans (the refused --tp 3, the dry run, the launch) read the config by ranges on the head.
    let requests = bed.hub.requests();
    let gets: Vec<_> = requests.iter().filter(|r| r.method == "GET" && r.path.contains("/resolve/")).collect();
    let (ranged, whole): (Vec<&&HubRequest>, Vec<_>) = gets.iter().partition(|r| r.range.is_some());
    assert_eq!(whole.len(), 2, "each file of the model once: {requests:?}");
    assert!(ranged.iter().all(|r| r.path.ends_with("/config.json")), "the plans read the config alone: {ranged:?}");
    assert_eq!(cluster.uplink().node_bytes_down(2), node2_upstream, "node2 reached upstream for the model");
    // The token reached vLLM (its log says so by hash) and nowhere else; the key is the
    // router's alone: vLLM, on the link, gets none.
    let log = std::fs::read_to_string(log_path(&cluster.node(1).serving_dir(), "tiny", "vllm"))
        .expect("vLLM's log on the head");
    use sha2::Digest;
    let hash = format!("{:x}", sha2::Sha256::digest(TOKEN.as_bytes()));
    assert!(log.contains(&format!("HF_TOKEN: present (sha256 {hash})")), "{log}");
    assert!(log.contains("API key: absent"), "{log}");
    assert!(!log.contains(TOKEN) && !log.contains(API_KEY), "a secret is in vLLM's log");
    assert_no_argv_holds(&[TOKEN, API_KEY]);

    let status = strix_cluster(cluster, &with_key, &["status"]);
    let report = json(&status);
    assert!(!stdout(&status).contains(TOKEN) && !stdout(&status).contains(API_KEY));
    let serving = &report["services"][0];
    assert_eq!((serving["name"].as_str(), serving["model"].as_str()), (Some("tiny"), Some(MODEL)), "{report}");
    assert_eq!(serving["served"], "tiny", "{report}");
    assert_eq!((serving["serves"].as_bool(), serving["routed"].as_str()), (Some(true), Some("ok")), "{report}");
    assert_eq!(serving["ray_nodes_alive"], 2, "{report}");
    assert_eq!(report["router"]["api_key"], true, "{report}");
    assert!(status.status.success(), "{}", stderr(&status));
    let keyless = json(&strix_cluster(cluster, &[], &["status"]));
    assert_eq!(keyless["services"][0]["serves"], true, "the engine wants no key: {keyless}");

    // `cluster bench` from this machine, which cannot reach the link: the head sends the requests
    // (the API key travels in its calls) and the result is kept here, keyed by the cluster's layout.
    let operator_state = tempfile::tempdir().unwrap();
    let operator = [
        ("XDG_STATE_HOME".to_string(), operator_state.path().display().to_string()),
        ("STRIX_API_KEY".to_string(), API_KEY.to_string()),
    ];
    let lengths = ["--concurrency", "1,2", "--requests", "4", "--input-len", "16", "--output-len", "8"];
    let benched = strix_cluster(cluster, &operator, &[&["bench", "--gate"][..], &lengths[..]].concat());
    let said = format!("{}{}", stdout(&benched), stderr(&benched));
    assert!(benched.status.success(), "{said}");
    assert!(!said.contains(API_KEY), "{said}");
    let report = json(&benched);
    let key = &report["result"]["key"];
    assert_eq!(
        (key["engine"].as_str(), key["tensor_parallel"].as_u64(), key["nodes"].as_u64(), key["transport"].as_str()),
        (Some("vllm"), Some(2), Some(2), Some("thunderbolt-tcp")),
        "{key}"
    );
    assert_eq!(key["model"]["repo"], MODEL);
    assert_eq!(report["result"]["endpoint"], format!("http://192.168.2.1:{port}/v1"));
    assert_eq!(report["gate"]["became_reference"], true);
    assert_every_level_served(&report, 4, 32);
    assert!(report["saved"].as_str().unwrap().starts_with(&operator_state.path().display().to_string()));

    let logs = strix_cluster(cluster, &[], &["logs", "--lines", "200"]);
    let lines = stdout(&logs);
    assert!(logs.status.success(), "{}", stderr(&logs));
    let entries: Vec<serde_json::Value> = lines.lines().map(|l| serde_json::from_str(l).expect(l)).collect();
    let has = |node: &str, file: &str| entries.iter().any(|e| e["node"] == node && e["file"] == file);
    assert!(has("node1", "vllm") && has("node2", "raylet.out"), "{lines}");
    assert!(!lines.contains(TOKEN), "the token is in the logs");

    // The same service again is refused; another onto its nodes too, naming it (no plan figure
    // says both fit).
    let again = strix_cluster(cluster, &env, &ray_launch_args(&port, &["--", "--served-model-name", "tiny"]));
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
    assert!(stderr(&again).contains("tiny already serves"), "{}", stderr(&again));
    let beside = strix_cluster(cluster, &env, &ray_launch_args(&port, &[]));
    let said = stderr(&beside);
    assert_eq!(beside.status.code(), Some(1), "{said}");
    assert!(said.contains("node1 serves tiny already") && said.contains("org/tiny-model"), "{said}");

    let stopped = strix_cluster(cluster, &[], &["stop"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    let report = json(&stopped);
    assert_eq!(report["nodes"][0]["stopped"]["processes"], serde_json::json!(["vllm"]), "{report}");
    assert_eq!(report["nodes"][0]["stopped"]["ray"], true, "{report}");
    assert_eq!(report["nodes"][1]["stopped"]["ray"], true, "{report}");
    assert_nothing_serves(cluster, 2, "after cluster stop");
    let twice = strix_cluster(cluster, &[], &["stop"]);
    assert!(twice.status.success(), "{}", stderr(&twice));
    assert_eq!(json(&twice)["nodes"][0]["stopped"]["processes"], serde_json::json!([]));
}

#[test]
fn a_failed_launch_stops_everything_it_started_on_every_node() {
    let mut bed = serving_cluster(2);
    let env = hub_env(&bed.hub);
    let cluster = &mut bed.cluster;
    let port = crate::support::free_port().to_string();

    // A worker whose network drops the head's Ray port: it is named, nothing is left running.
    let node2 = cluster.node(2).netns().name().to_string();
    nft(&node2, &["add", "table", "inet", "strix_test"]);
    nft(&node2, &["add", "chain", "inet", "strix_test", "out", "{ type filter hook output priority 0; }"]);
    nft(&node2, &["add", "rule", "inet", "strix_test", "out", "tcp", "dport", "6379", "drop"]);
    let blocked = strix_cluster(cluster, &env, &ray_launch_args(&port, &[]));
    let said = stderr(&blocked);
    assert_eq!(blocked.status.code(), Some(1), "{said}");
    assert!(said.contains("node2") && said.contains("cannot reach the Ray head at 192.168.2.1:6379"), "{said}");
    assert!(said.contains("firewall"), "{said}");
    assert_nothing_serves(cluster, 2, "after a worker could not join");
    nft(&node2, &["delete", "table", "inet", "strix_test"]);

    // vLLM refuses a flag: its own words come back, and Ray is stopped on both nodes.
    let refused = strix_cluster(cluster, &env, &ray_launch_args(&port, &["--", "--no-such-vllm-flag"]));
    let said = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(said.contains("unrecognized arguments: --no-such-vllm-flag"), "{said}");
    assert_nothing_serves(cluster, 2, "after vLLM refused its arguments");

    // Ctrl-C while the weights "load": 130, and nothing left running.
    let mut child = cluster_command(cluster, &env, &ray_launch_args(&port, &["-e", "STANDIN_LOAD_SECONDS=300"]))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("launch");
    // Interrupted once vLLM runs on the head (its pid is in the head's record) and "loads".
    wait_until("vLLM to start on the head", Duration::from_secs(180), || {
        std::fs::read_to_string(record_of(cluster, 1, MODEL)).is_ok_and(|text| {
            serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|r| r["processes"][0]["name"] == "vllm")
        })
    });
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    wait_until("the interrupted launch to exit", Duration::from_secs(120), || matches!(child.try_wait(), Ok(Some(_))));
    let mut seen = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut seen).expect("stderr");
    let code = child.wait().expect("exit status").code();
    assert_eq!(code, Some(130), "{seen}");
    assert!(seen.contains("interrupted during the wait for vLLM"), "{seen}");
    assert_nothing_serves(cluster, 2, "after Ctrl-C");

    // A node down before the launch: nothing starts anywhere.
    cluster.node_mut(2).stop_sshd();
    let down = strix_cluster(cluster, &env, &ray_launch_args(&port, &[]));
    let said = stderr(&down);
    assert_eq!(down.status.code(), Some(1), "{said}");
    assert!(said.contains("nothing was started") && said.contains("node2"), "{said}");
    assert!(!record_of(cluster, 1, MODEL).exists(), "node1 must not record a launch");
    assert!(!running_in_toolbox(cluster, 1).iter().any(|name| name == "raylet"), "Ray started on node1");
}

#[test]
fn one_node_serves_without_ray() {
    let registry = Registry::start();
    let podman = crate::support::podman::PodmanService::start(&registry);
    let host = crate::support::host_tree::materialize("strix-thunderbolt-only");
    let host = host.path().to_str().unwrap();
    let image = node_image(&podman, &registry, "vllm-node:latest");
    let hub = model_hub();
    let home = tempfile::tempdir().unwrap();
    let mut env = podman.env();
    env.push(("HOME".into(), home.path().display().to_string()));
    let refreshed = run_strix(&env, &crate::support::cli::refresh_vllm(host, &image, &[]));
    assert!(refreshed.status.success(), "{}", stderr(&refreshed));

    let port = crate::support::free_port().to_string();
    let mut with_token = env.clone();
    with_token.extend(hub_env(&hub));
    let launched =
        run_strix(&with_token, &["--json", "--host-root", host, "launch", MODEL, "--port", &port, "--timeout", "120"]);
    let said = format!("{}{}", stdout(&launched), stderr(&launched));
    assert!(launched.status.success(), "{said}");
    assert!(!said.contains(TOKEN), "{said}");
    let report = json(&launched);
    assert_eq!(report["tp"], 1);
    assert_eq!(report["nodes"][0]["role"], "single");
    assert_eq!(report["nodes"][0]["commands"].as_array().unwrap().len(), 1, "no Ray on one node: {report}");
    let upstream = report["upstream"].as_str().expect("the engine's address");
    let ranks: serde_json::Value =
        serde_json::from_str(&http_get(Command::new("python3"), &format!("http://{upstream}/ranks"))).unwrap();
    assert!(ranks[0]["model"].as_str().unwrap_or_default().contains("/snapshots/"), "weights offline: {ranks}");
    // vLLM compiles into the image's own cache root.
    let vllm_log = log_path(&home_serving_dir(home.path()), MODEL, "vllm");
    let by_image = home.path().join(".cache/vllm/by-image");
    let image_roots = || -> Vec<String> {
        std::fs::read_dir(&by_image).map_or_else(
            |_| Vec::new(),
            |dir| dir.flatten().map(|entry| entry.file_name().to_string_lossy().into_owned()).collect(),
        )
    };
    assert_eq!(image_roots().len(), 1, "one image, one cache root: {:?}", image_roots());
    assert!(image_roots()[0].starts_with("sha256-"), "{:?}", image_roots());
    let said = std::fs::read_to_string(&vllm_log).unwrap();
    assert!(
        said.contains(&format!(
            "Using cache directory: {}/{}/torch_compile_cache/",
            by_image.display(),
            image_roots()[0]
        )),
        "{said}"
    );
    assert!(said.contains("Compiling a graph"), "{said}");

    // What serves is measured as launched: vLLM, the Hub commit that was pulled, one node; the
    // gate's first run becomes the model's reference.
    let bench = ["--json", "--host-root", host, "bench", "--concurrency", "1,2", "--requests", "4"];
    let lengths = ["--input-len", "16", "--output-len", "8"];
    let benched = run_strix(&env, &[&bench[..], &lengths[..], &["--gate"]].concat());
    assert!(benched.status.success(), "{}", stderr(&benched));
    let report = json(&benched);
    let key = &report["result"]["key"];
    assert_eq!((key["engine"].as_str(), key["model"]["kind"].as_str()), (Some("vllm"), Some("hub")), "{key}");
    assert_eq!(key["model"]["repo"], MODEL);
    assert_eq!(key["model"]["commit"].as_str().map(str::len), Some(40), "{key}");
    assert_eq!(
        (key["tensor_parallel"].as_u64(), key["nodes"].as_u64(), key["transport"].as_str()),
        (Some(1), Some(1), Some("local"))
    );
    assert!(key["image"].as_str().is_some_and(|image| image.contains("sha256:")), "{key}");
    assert_eq!(report["gate"]["became_reference"], true);
    assert_every_level_served(&report, 4, 32);

    // The same model served wrongly (an image that answers garbage from the 4th token on): the
    // gate fails, naming that token in every prompt.
    let stopped = run_strix(&env, &["--json", "stop"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    let relaunched = run_strix(
        &with_token,
        &[
            "--json",
            "--host-root",
            host,
            "launch",
            MODEL,
            "--port",
            &port,
            "--timeout",
            "120",
            "-e",
            "STANDIN_WRONG_ANSWERS=3",
        ],
    );
    assert!(relaunched.status.success(), "{}", stderr(&relaunched));
    let said = std::fs::read_to_string(&vllm_log).unwrap();
    assert!(said.contains("Directly load the compiled graph(s)"), "the same image starts warm after a stop: {said}");
    let gated = run_strix(&env, &[&bench[..], &lengths[..], &["--gate-only"]].concat());
    assert_eq!(gated.status.code(), Some(1), "{}{}", stdout(&gated), stderr(&gated));
    let verdict = &json(&gated)["gate"]["verdict"];
    assert_eq!(verdict["passed"], false);
    let mismatches = verdict["mismatches"].as_array().unwrap();
    assert_eq!(mismatches.len(), 6, "every prompt of the set: {verdict}");
    assert!(
        mismatches.iter().all(|mismatch| mismatch["index"] == 3 && mismatch["kind"]["kind"] == "token"),
        "{verdict}"
    );

    // vLLM crashes: the stop finds it dead and erases the image's compile cache.
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(record_path(&home_serving_dir(home.path()), MODEL)).unwrap())
            .unwrap();
    let pid = record["processes"][0]["pid"].as_u64().expect("vllm's pid").to_string();
    let killed = run_strix(&env, &["enter", "vllm", "--", "kill", "-KILL", &pid]);
    assert!(killed.status.success(), "{}", stderr(&killed));
    let stopped = run_strix(&env, &["--json", "stop"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    let stopped = &json(&stopped);
    let stopped = &stopped["nodes"][0]["stopped"];
    assert_eq!((&stopped["processes"], &stopped["found_dead"]), (&serde_json::json!([]), &serde_json::json!(["vllm"])));
    assert_eq!(stopped["compile_cache_erased"], true, "{stopped}");
    assert_eq!(image_roots(), Vec::<String>::new(), "the crashed image's cache went");
    assert!(!record_path(&home_serving_dir(home.path()), MODEL).exists());
}

/// No process on this machine (every node's included: they are namespaces of it) has any of
/// `secrets` in its argv.
pub(crate) fn assert_no_argv_holds(secrets: &[&str]) {
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline);
        for secret in secrets {
            assert!(!cmdline.contains(secret), "{} has a secret in its argv: {cmdline}", entry.path().display());
        }
    }
}

fn nft(netns: &str, args: &[&str]) {
    let output = crate::support::netns::enter(netns, "nft").args(args).output().expect("nft (nftables)");
    assert!(output.status.success(), "nft {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn three_thunderbolt_nodes_serve_without_ray_split_by_layers() {
    let bed = serving_cluster(3);
    let (cluster, env) = (&bed.cluster, hub_env(&bed.hub));
    let port = crate::support::free_port().to_string();

    let launched = strix_cluster(cluster, &env, &launch_args(&port, &[]));
    assert!(launched.status.success(), "{}{}", stdout(&launched), stderr(&launched));
    let report = json(&launched);
    assert_eq!(report["backend"], "mp", "{report}");
    assert_eq!((report["tp"].as_u64(), report["pp"].as_u64()), (Some(1), Some(3)), "{report}");
    let why = report["why"].to_string();
    assert!(why.contains("pipeline parallel 3") && why.contains("Thunderbolt TCP"), "{why}");
    assert!(why.contains("graph capture off (cudagraph_mode NONE"), "the image's vLLM names -cc: {why}");
    for (index, node) in report["nodes"].as_array().unwrap().iter().enumerate() {
        let argv: Vec<&str> =
            node["commands"][0]["argv"].as_array().unwrap().iter().filter_map(|a| a.as_str()).collect();
        let at = |flag: &str| argv.iter().position(|a| *a == flag).map(|i| argv[i + 1]);
        assert_eq!((at("--nnodes"), at("--node-rank")), (Some("3"), Some(index.to_string().as_str())), "{argv:?}");
        assert_eq!((at("--master-addr"), at("--master-port")), (Some("192.168.2.1"), Some("29501")), "{argv:?}");
        assert_eq!(argv.contains(&"--headless"), index > 0, "{argv:?}");
        assert_eq!(at("--compilation-config"), Some(r#"{"cudagraph_mode":"NONE"}"#), "no graph capture: {argv:?}");
        assert_eq!(node["commands"].as_array().unwrap().len(), 1, "one process per node, no Ray: {node}");
    }

    // One rank on each link address, each with the environment that pins it there.
    let upstream = report["upstream"].as_str().expect("the engine's address");
    let ranks: serde_json::Value =
        serde_json::from_str(&get_on_node(cluster, 2, &format!("http://{upstream}/ranks"))).unwrap();
    let ips: Vec<&str> = ranks.as_array().unwrap().iter().map(|r| r["ip"].as_str().unwrap()).collect();
    assert_eq!(ips, ["192.168.2.1", "192.168.2.2", "192.168.2.3"], "rank R on node R+1: {ranks}");
    for rank in ranks.as_array().unwrap() {
        let env = &rank["env"];
        assert_eq!(env["VLLM_HOST_IP"], rank["ip"], "{rank}");
        assert_eq!(env["GLOO_SOCKET_IFNAME"], "thunderbolt0", "{rank}");
        assert_eq!(env["NCCL_DEBUG"], "INFO", "{rank}");
        assert!(env.get("RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES").is_none(), "{rank}");
        assert!(env.get("RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES").is_none(), "{rank}");
        assert!(rank["model"].as_str().unwrap_or_default().contains("/snapshots/"), "weights offline: {rank}");
    }
    for index in 1..=3 {
        let running = running_in_toolbox(cluster, index);
        assert!(running.iter().any(|name| name.starts_with("vllm")), "node{index} runs no vLLM rank: {running:?}");
        assert!(
            !running.iter().any(|name| name.starts_with("ray") || name == "raylet" || name == "gcs_server"),
            "node{index} runs Ray: {running:?}"
        );
    }
    let status = json(&strix_cluster(cluster, &[], &["status"]));
    assert_eq!(status["services"][0]["serves"], true, "{status}");
    assert!(status["services"][0]["ray_nodes_alive"].is_null(), "{status}");
    assert!(status["services"][0].get("warnings").is_none(), "TCP on a TCP link is no warning: {status}");

    // Measured as launched, split by layers over the three nodes: keyed and shown so.
    let operator_state = tempfile::tempdir().unwrap();
    let operator = [("XDG_STATE_HOME".to_string(), operator_state.path().display().to_string())];
    let load = ["bench", "--concurrency", "1", "--requests", "2", "--input-len", "8", "--output-len", "4"];
    let benched = strix_cluster(cluster, &operator, &load);
    assert!(benched.status.success(), "{}", stderr(&benched));
    let key = &json(&benched)["result"]["key"];
    let split = (key["tensor_parallel"].as_u64(), key["pipeline_parallel"].as_u64(), key["nodes"].as_u64());
    assert_eq!(split, (Some(1), Some(3), Some(3)), "{key}");
    let history = stdout(&run_strix(&operator, &["bench", "history"]));
    assert!(history.contains("TP1 PP3 on 3 nodes over Thunderbolt TCP"), "{history}");
    let stopped = strix_cluster(cluster, &[], &["stop"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    assert_nothing_serves(cluster, 3, "after cluster stop");

    // A node whose network drops the rendezvous port: its rank is named, with why; nothing runs.
    let node3 = cluster.node(3).netns().name().to_string();
    nft(&node3, &["add", "table", "inet", "strix_test"]);
    nft(&node3, &["add", "chain", "inet", "strix_test", "out", "{ type filter hook output priority 0; }"]);
    nft(&node3, &["add", "rule", "inet", "strix_test", "out", "tcp", "dport", "29501", "drop"]);
    let blocked = strix_cluster(cluster, &env, &launch_args(&port, &["-e", "STANDIN_RENDEZVOUS_SECONDS=5"]));
    nft(&node3, &["delete", "table", "inet", "strix_test"]);
    let said = stderr(&blocked);
    assert_eq!(blocked.status.code(), Some(1), "{said}");
    assert!(said.contains("node3") && said.contains("never joined"), "{said}");
    assert!(said.contains("192.168.2.1:29501") && said.contains("firewall"), "{said}");
    assert!(said.contains("timed out"), "the rank's own words: {said}");
    assert_nothing_serves(cluster, 3, "after a rank could not join");

    // A model too big for the node it is asked onto: refused before anything starts, with the
    // numbers; nothing downloaded, nothing runs.
    let on_one = |model: &'static str| ["launch", model, "--on", "node1", "--port", &port, "--timeout", "120"];
    let big = strix_cluster(cluster, &env, &on_one(TOO_BIG));
    let said = stderr(&big);
    assert_eq!(big.status.code(), Some(1), "{said}");
    assert!(said.contains("nothing was started") && said.contains("GiB"), "{said}");
    let downloads = bed
        .hub
        .requests()
        .iter()
        .filter(|r| r.path.contains("Llama-3.3-70B-Instruct/resolve/") && r.range.is_none())
        .count();
    assert_eq!(downloads, 0, "the plan reads headers by ranges: {:?}", bed.hub.requests());
    assert_nothing_serves(cluster, 3, "after a model too big was refused");

    // A model the plan sizes: vLLM is given the context that fits (here the model's own).
    let sized = strix_cluster(cluster, &env, &on_one(SIZED));
    assert!(sized.status.success(), "{}{}", stdout(&sized), stderr(&sized));
    let report = json(&sized);
    let argv: Vec<&str> =
        report["nodes"][0]["commands"][0]["argv"].as_array().unwrap().iter().filter_map(|a| a.as_str()).collect();
    let at = argv.iter().position(|a| *a == "--max-model-len").map(|i| argv[i + 1]);
    assert_eq!(at, Some("4096"), "{argv:?}");
    let upstream = report["upstream"].as_str().expect("the engine's address");
    let models: serde_json::Value =
        serde_json::from_str(&get_on_node(cluster, 1, &format!("http://{upstream}/v1/models"))).unwrap();
    assert_eq!(models["data"][0]["max_model_len"], 4096, "vLLM serves the planned context: {models}");
    let stopped = strix_cluster(cluster, &[], &["stop"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
}

#[test]
fn an_e810_cluster_is_planned_tensor_parallel() {
    let registry = Registry::start();
    let cluster = TestCluster::start_with(&registry, 2, Link::Roce);
    let planned = strix_cluster(&cluster, &[], &["launch", "/models/tiny", "--dry-run"]);
    assert!(planned.status.success(), "{}", stderr(&planned));
    let plan = json(&planned);
    assert_eq!(plan["backend"], "mp", "{plan}");
    assert_eq!((plan["tp"].as_u64(), plan["pp"].as_u64()), (Some(2), Some(1)), "{plan}");
    assert!(plan["why"].to_string().contains("tensor parallel 2: the link is RoCE"), "{plan}");
    let head = &plan["nodes"][0]["commands"][0];
    let argv: Vec<&str> = head["argv"].as_array().unwrap().iter().filter_map(|a| a.as_str()).collect();
    assert_eq!(argv[3..5], ["--tensor-parallel-size", "2"], "{argv:?}");
    assert!(!argv.contains(&"--pipeline-parallel-size"), "{argv:?}");
    assert_eq!(head["env"]["NCCL_IB_TIMEOUT"], "23", "{head}");
    assert_eq!(head["env"]["NCCL_DEBUG"], "INFO", "{head}");
}
