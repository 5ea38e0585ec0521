//! `cluster model pull|list` end to end: three Thunderbolt nodes on a switch (their toolboxes can
//! start here), each with a toolbox holding python3 and huggingface_hub 0.36, and a stand-in for
//! the Hub on the machine's loopback that the nodes reach only through the cluster's shared,
//! rate-limited, byte-counting uplink. The model crosses the uplink once, to the head; the other
//! nodes get it over the cluster link; each node's cache is then what huggingface_hub itself
//! finds offline.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::cli::{json, run_strix, stderr, stdout, strix_command};
use crate::support::cluster::{Link, TestCluster};
use crate::support::hub::{HubFile, HubStandIn};
use crate::support::node_image::node_image;
use crate::support::registry::Registry;

const REPO: &str = "acme/tiny";
/// What the stand-in wants in `Authorization`; it must never show anywhere else.
const TOKEN: &str = "hf_strixTestToken0123456789abcdef";
/// The uplink's cap while the model moves: a home connection, scaled down.
const UPLINK_RATE: u64 = 8 << 20;
/// The model's LFS file.
const WEIGHTS_SIZE: usize = 2 << 20;

/// The stand-in repository: a git file, an LFS file and a file in a folder.
fn repo_files() -> Vec<HubFile> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let weights: Vec<u8> = (0..WEIGHTS_SIZE)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    vec![
        HubFile::new("config.json", r#"{"architectures": ["TinyForCausalLM"]}"#),
        HubFile::new("model.safetensors", weights),
        HubFile::new("sub/notes.txt", "hello\n"),
    ]
}

fn repo_bytes(files: &[HubFile]) -> u64 {
    files.iter().map(|f| f.data.len() as u64).sum()
}

/// Three nodes whose `vllm` toolbox runs the hub image, and the Hub stand-in behind the uplink.
struct ModelBed {
    cluster: TestCluster,
    hub: HubStandIn,
    files: Vec<HubFile>,
    _registry: Registry,
}

fn model_bed() -> ModelBed {
    let registry = Registry::start();
    let cluster = TestCluster::start_with(&registry, 3, Link::Thunderbolt);
    let image = node_image(cluster.node(1).podman(), &registry, "vllm-node:latest");
    let refresh = strix_cluster(
        &cluster,
        &[],
        &["refresh", "--image", &image, "--name", "vllm", "--manager", "native", "--no-verify", "--spread", "off"],
    );
    assert!(refresh.status.success(), "{}", stderr(&refresh));
    let files = repo_files();
    let hub = HubStandIn::start(&[(REPO, files.clone())], Some(TOKEN));
    cluster.uplink().forward(hub.port);
    cluster.uplink().set_rate_limit(Some(UPLINK_RATE));
    ModelBed { cluster, hub, files, _registry: registry }
}

/// The operator's environment for a pull: the Hub stand-in and the token.
fn hub_env(hub: &HubStandIn) -> Vec<(String, String)> {
    [("HF_ENDPOINT", hub.endpoint()), ("HF_TOKEN", TOKEN.to_string()), ("HF_HUB_DISABLE_XET", "1".to_string())]
        .map(|(k, v)| (k.to_string(), v))
        .to_vec()
}

fn cluster_argv<'a>(args: &[&'a str], config: &'a str, nodes: &'a str) -> Vec<&'a str> {
    let mut argv = vec!["--json", "cluster"];
    argv.extend_from_slice(args);
    argv.extend(["--ssh-config", config, "--nodes", nodes, "--connect-timeout", "5"]);
    argv
}

/// `strix-toolbox --json cluster ARGS` from the test's namespace (the operator's machine).
fn strix_cluster(cluster: &TestCluster, env: &[(String, String)], args: &[&str]) -> Output {
    let config = cluster.ssh_config().display().to_string();
    let nodes = cluster.nodes_arg();
    run_strix(env, &cluster_argv(args, &config, &nodes))
}

/// Like [`strix_cluster`], watching every process's command line while it runs: whether any
/// ever held `secret`.
fn strix_cluster_watched(
    cluster: &TestCluster,
    env: &[(String, String)],
    args: &[&str],
    secret: &str,
) -> (Output, bool) {
    let config = cluster.ssh_config().display().to_string();
    let nodes = cluster.nodes_arg();
    let argv = cluster_argv(args, &config, &nodes);
    let child = strix_command(env, &argv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run strix-toolbox");
    let (done, seen) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let watcher = {
        let (done, seen, secret) = (done.clone(), seen.clone(), secret.to_string());
        std::thread::spawn(move || {
            // Bounded: the command's own limits end it long before.
            for _ in 0..30_000 {
                if done.load(Ordering::SeqCst) {
                    break;
                }
                if any_command_line_holds(&secret) {
                    seen.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let output = child.wait_with_output().expect("wait for strix-toolbox");
    done.store(true, Ordering::SeqCst);
    watcher.join().expect("watcher");
    (output, seen.load(Ordering::SeqCst))
}

/// What `ps` would show: every process's argv.
fn any_command_line_holds(secret: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else { return false };
    entries.filter_map(Result::ok).any(|entry| {
        std::fs::read(entry.path().join("cmdline")).is_ok_and(|argv| String::from_utf8_lossy(&argv).contains(secret))
    })
}

/// The node's cache folder for the stand-in repo.
fn repo_dir(cluster: &TestCluster, index: usize) -> PathBuf {
    cluster.node(index).home.join(".cache/huggingface/hub/models--acme--tiny")
}

/// Node `index` holds the snapshot exactly: `refs/main` is the commit (40 bytes), every file is
/// a relative link to its blob, whose content is the Hub's.
fn assert_snapshot(cluster: &TestCluster, index: usize, commit: &str, files: &[HubFile]) {
    let repo = repo_dir(cluster, index);
    assert_eq!(std::fs::read(repo.join("refs/main")).expect("refs/main"), commit.as_bytes(), "node{index}");
    for file in files {
        let pointer = repo.join("snapshots").join(commit).join(&file.path);
        let target = std::fs::read_link(&pointer).unwrap_or_else(|e| panic!("node{index} {}: {e}", file.path));
        let depth = file.path.matches('/').count();
        assert_eq!(target, Path::new(&format!("../../{}blobs/{}", "../".repeat(depth), file.etag())), "node{index}");
        assert!(std::fs::read(&pointer).expect("read through the link") == file.data, "node{index} {}", file.path);
    }
}

/// huggingface_hub itself, in node `index`'s toolbox, offline, finds the snapshot as vLLM's
/// `get_model_path` asks for it; returns the path it found.
fn offline_lookup(cluster: &TestCluster, index: usize, revision: &str) -> String {
    const LOOKUP: &str = "import sys\nfrom huggingface_hub import snapshot_download\n\
                          print(snapshot_download(sys.argv[1], revision=sys.argv[2], local_files_only=True))";
    // The pull started only the head's toolbox.
    cluster.node(index).podman().podman_ok(&["start", "vllm"]);
    cluster.node(index).podman().podman_ok(&[
        "exec",
        "-e",
        "HF_HUB_OFFLINE=1",
        "vllm",
        "python3",
        "-c",
        LOOKUP,
        REPO,
        revision,
    ])
}

/// No `*.log` the nodes' sshd and podman wrote holds `secret`.
fn assert_no_log_holds(cluster: &TestCluster, secret: &str) {
    for node in &cluster.nodes {
        let dirs = [
            node.home.parent().expect("node dir").to_path_buf(),
            node.podman().socket.parent().expect("podman dir").to_path_buf(),
        ];
        for dir in dirs {
            for entry in walkdir::WalkDir::new(&dir).max_depth(2).into_iter().filter_map(Result::ok) {
                if entry.file_name().to_string_lossy().ends_with(".log") {
                    let text = std::fs::read(entry.path()).unwrap_or_default();
                    assert!(
                        !String::from_utf8_lossy(&text).contains(secret),
                        "the token is in {}",
                        entry.path().display()
                    );
                }
            }
        }
    }
}

#[test]
fn model_pull_takes_the_hub_once_and_gives_every_node_a_verified_snapshot() {
    let bed = model_bed();
    let (cluster, hub, files) = (&bed.cluster, &bed.hub, &bed.files);
    let size = repo_bytes(files);
    let before: Vec<u64> = (1..=3).map(|i| cluster.uplink().node_bytes_down(i)).collect();

    let (pulled, token_in_a_command_line) =
        strix_cluster_watched(cluster, &hub_env(hub), &["model", "pull", REPO], TOKEN);
    assert!(pulled.status.success(), "{}", stderr(&pulled));
    let report = json(&pulled);

    // The Hub: one copy, to the head; the other nodes never touched it.
    let down: Vec<u64> = (1..=3).map(|i| cluster.uplink().node_bytes_down(i) - before[i - 1]).collect();
    assert!(down[0] >= size && down[0] < size + (64 << 10), "the head took {} bytes for a {size}-byte model", down[0]);
    assert_eq!((down[1], down[2]), (0, 0), "only the head reaches the Hub");
    let requests = hub.requests();
    let gets: Vec<_> = requests.iter().filter(|r| r.method == "GET" && r.path.contains("/resolve/")).collect();
    assert_eq!(gets.len(), files.len(), "each file once: {requests:?}");
    assert!(requests.iter().all(|r| r.authorized && r.status < 400), "{requests:?}");

    // The report: the head downloaded it, the others received all of it over the link.
    let commit = report["commit"].as_str().expect("commit").to_string();
    assert_eq!((report["files"].as_u64(), report["bytes"].as_u64()), (Some(3), Some(size)), "{report}");
    assert_eq!(report["head"]["node"], "node1");
    assert_eq!(report["head"]["downloaded_bytes"].as_u64(), Some(size), "{report}");
    assert_eq!(report["head"]["hub_version"], "0.36.2");
    for node in report["nodes"].as_array().expect("nodes") {
        assert_eq!((node["fetched"].as_u64(), node["fetched_bytes"].as_u64()), (Some(3), Some(size)), "{node}");
    }
    assert_eq!(report["link_bytes"].as_u64(), Some(2 * size), "{report}");
    eprintln!("uplink bytes down per node {down:?} for a {size}-byte model; cluster link {}", report["link_bytes"]);

    // Every node: the same snapshot, links and ref as huggingface_hub writes them, and
    // huggingface_hub itself finds it offline.
    for index in 1..=3 {
        assert_snapshot(cluster, index, &commit, files);
        let found = offline_lookup(cluster, index, "main");
        assert!(found.ends_with(&format!("snapshots/{commit}")), "node{index}: {found}");
    }

    let listed = strix_cluster(cluster, &[], &["model", "list", "--verify"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let listed = json(&listed);
    for node in listed["nodes"].as_array().expect("nodes") {
        let revision = &node["cache"]["repos"][0]["revisions"][0];
        assert_eq!(node["cache"]["repos"][0]["repo"], REPO, "{node}");
        assert_eq!(revision["commit"], commit.as_str());
        assert_eq!(revision["refs"], serde_json::json!(["main"]));
        assert_eq!(
            (revision["complete"].as_bool(), revision["verified"].as_bool()),
            (Some(true), Some(true)),
            "{node}"
        );
        assert!(revision["pulled"].is_string(), "{node}");
    }

    // The token reached the Hub (the stand-in wants it) and nothing else.
    assert!(!token_in_a_command_line, "the token was in a process's command line");
    for output in [stdout(&pulled), stderr(&pulled)] {
        assert!(!output.contains(TOKEN), "the token was printed: {output}");
    }
    assert_no_log_holds(cluster, TOKEN);
}

#[test]
fn a_corrupted_or_missing_blob_on_a_node_is_found_and_fetched_again() {
    let bed = model_bed();
    let (cluster, hub, files) = (&bed.cluster, &bed.hub, &bed.files);
    let first = strix_cluster(cluster, &hub_env(hub), &["model", "pull", REPO]);
    assert!(first.status.success(), "{}", stderr(&first));
    let commit = json(&first)["commit"].as_str().expect("commit").to_string();

    // node3: the weights keep their size but not their bytes; node2: a blob is gone.
    let weights = files.iter().find(|f| f.is_lfs()).expect("an LFS file");
    let blob = repo_dir(cluster, 3).join("blobs").join(weights.etag());
    let mut bytes = std::fs::read(&blob).expect("node3's blob");
    bytes[1000] ^= 0xff;
    std::fs::write(&blob, bytes).expect("corrupt it");
    let notes = files.iter().find(|f| f.path == "sub/notes.txt").expect("notes");
    std::fs::remove_file(repo_dir(cluster, 2).join("blobs").join(notes.etag())).expect("remove node2's blob");

    let listed = strix_cluster(cluster, &[], &["model", "list", "--verify"]);
    assert_eq!(listed.status.code(), Some(1), "a bad blob fails the listing: {}", stdout(&listed));
    let listed = json(&listed);
    let revision = |node: usize| listed["nodes"][node - 1]["cache"]["repos"][0]["revisions"][0].clone();
    assert_eq!(revision(3)["verified"], false);
    assert_eq!(revision(3)["bad"], serde_json::json!(["model.safetensors"]));
    assert_eq!(revision(2)["complete"], false);
    assert_eq!(revision(2)["missing"], serde_json::json!(["sub/notes.txt"]));
    assert_eq!((revision(1)["complete"].as_bool(), revision(1)["verified"].as_bool()), (Some(true), Some(true)));

    let before: Vec<u64> = (1..=3).map(|i| cluster.uplink().node_bytes_down(i)).collect();
    let again = strix_cluster(cluster, &hub_env(hub), &["model", "pull", REPO]);
    assert!(again.status.success(), "{}", stderr(&again));
    let report = json(&again);
    // The head had it: the Hub only resolved `main` again; the nodes fetched what was wrong.
    assert_eq!(report["head"]["downloaded_bytes"].as_u64(), Some(0), "{report}");
    let down: Vec<u64> = (1..=3).map(|i| cluster.uplink().node_bytes_down(i) - before[i - 1]).collect();
    assert!(down[0] < 16 << 10 && down[1] == 0 && down[2] == 0, "uplink bytes {down:?}");
    let node = |name: &str| report["nodes"].as_array().expect("nodes").iter().find(|n| n["node"] == name).cloned();
    let node2 = node("node2").expect("node2");
    assert_eq!((node2["fetched"].as_u64(), node2["fetched_bytes"].as_u64()), (Some(1), Some(notes.data.len() as u64)));
    let node3 = node("node3").expect("node3");
    assert_eq!(node3["repaired"], serde_json::json!(["model.safetensors"]), "{node3}");
    assert_eq!(node3["fetched_bytes"].as_u64(), Some(WEIGHTS_SIZE as u64));
    assert_eq!(node3["kept"].as_u64(), Some(2));
    assert_eq!(report["link_bytes"].as_u64(), Some((WEIGHTS_SIZE + notes.data.len()) as u64));

    for index in 1..=3 {
        assert_snapshot(cluster, index, &commit, files);
    }
    let listed = strix_cluster(cluster, &[], &["model", "list", "--verify"]);
    assert!(listed.status.success(), "{}", stdout(&listed));
}
