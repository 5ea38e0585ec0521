//! `cluster watch` on vLLM across two namespace nodes (the stand-in in the node image, its
//! multiprocessing executor, as launch.rs launches it), the watch run as the binary in the
//! foreground. The service is launched with `--cuda-graphs` (across nodes graph capture is off
//! unless asked) and an `-e` setting: the stand-in's stall switch, a file in the head's home (the
//! toolbox mounts the home at its own path, so the test and the head's vLLM see one file). The
//! file made, completions hang while /health and /metrics answer, as in vLLM's reported deadlock:
//! the watch relaunches the stalled service from its record, and the relaunched ranks run as the
//! operator launched them: graph capture not turned off, the `-e` setting in their environment.
//! Between the launch and the stall every node's cache is left as a `model pull` of a newer
//! commit leaves it (`main` names another snapshot): the relaunch serves the recorded commit.
//! States and events are asserted, never how long anything took; every wait is bounded.

use std::process::Output;

use serde_json::Value;

use crate::launch::{cluster_command, get_on_node, hub_env, serving_cluster};
use crate::support::cli::{json, stderr, stdout};
use crate::support::cluster::{TestCluster, TestNode};
use crate::support::running_watch::RunningWatch;
use crate::support::serving_files::record;

const MODEL: &str = "org/tiny-model";
const SERVICE: &str = "tiny";
/// The stand-in's stall switch (stand_in_vllm.py): while the file it names exists, no token comes.
const STALL_SWITCH: &str = "STANDIN_STALL_FILE";
/// What the launch adds to turn graph capture off across nodes (src/serving/vllm.rs): neither may
/// be in a rank's argv when the operator asked `--cuda-graphs`.
const CAPTURE_OFF: [&str; 2] = [r#"cudagraph_mode":"NONE"#, "--enforce-eager"];
/// The commit a `model pull` since the launch moved `main` to.
const PULLED_SINCE: &str = "2222222222222222222222222222222222222222";

#[test]
fn a_stalled_vllm_launched_with_cuda_graphs_is_relaunched_with_them_and_its_environment() {
    let bed = serving_cluster(2);
    let cluster = &bed.cluster;
    let state = tempfile::tempdir().expect("the watch's state directory");
    let mut env = hub_env(&bed.hub);
    env.push(("XDG_STATE_HOME".into(), state.path().display().to_string()));
    let strix = |args: &[&str]| -> Output {
        let mut command = cluster_command(cluster, &env, args);
        command.stdin(std::process::Stdio::null()).output().expect("run strix-toolbox")
    };
    for index in 1..=2 {
        cluster.node(index).free_gpu_memory();
    }
    let stall = cluster.node(1).home.join("stall");
    let switch = format!("{STALL_SWITCH}={}", stall.display());
    let port = crate::support::free_port().to_string();
    let launch =
        ["launch", MODEL, "--name", SERVICE, "--port", &port, "--timeout", "120", "--cuda-graphs", "-e", &switch];
    let launched = strix(&launch);
    assert!(launched.status.success(), "{}{}", stdout(&launched), stderr(&launched));
    let report = json(&launched);
    assert_eq!(report["backend"], "mp", "across both nodes, no Ray: {report}");
    for node in report["nodes"].as_array().expect("nodes") {
        let argv = node["commands"][0]["argv"].to_string();
        assert!(!CAPTURE_OFF.iter().any(|off| argv.contains(off)), "--cuda-graphs asked: {argv}");
    }
    let first = head_record(cluster);
    assert_eq!(
        (&first["cuda_graphs"], &first["env"][STALL_SWITCH]),
        (&Value::Bool(true), &stall.display().to_string().into())
    );

    // A pull since: `main` names another commit on every node. The relaunch serves the recorded one.
    let served = first["identity"]["commit"].as_str().expect("the commit served").to_string();
    assert_ne!(served, PULLED_SINCE);
    for index in 1..=2 {
        main_moved(cluster.node(index), &served, PULLED_SINCE);
    }

    let mut watch = RunningWatch::start(cluster_command(
        cluster,
        &env,
        &["watch", SERVICE, "--interval", "3s", "--stall", "6s", "--failures", "5", "--grace", "120s"],
    ));
    let found = watch.action("watching", None);
    assert_eq!(found["service"], SERVICE, "{found}");
    watch.serving();

    // The head's vLLM stalls: completions taken, counted as running, no token.
    std::fs::write(&stall, "").expect("the stall switch");
    let relaunch = watch.action("relaunch", Some("stalled"));
    std::fs::remove_file(&stall).expect("the stall switch off");
    assert!(relaunch["reason"].as_str().is_some_and(|r| r.starts_with("stalled: ")), "{relaunch}");
    watch.action("relaunched", None);
    watch.serving();

    // Relaunched as the operator launched it: every rank's own command line and environment say
    // so, and so does the new launch's record.
    for index in 1..=2 {
        let (argv, environ) = vllm_process(cluster, index);
        assert!(!CAPTURE_OFF.iter().any(|off| argv.iter().any(|word| word.contains(off))), "node{index}: {argv:?}");
        assert!(argv.iter().any(|word| word == MODEL), "node{index}'s vLLM: {argv:?}");
        assert!(environ.contains(&switch), "node{index}'s vLLM has the -e setting: {environ:?}");
    }
    let again = head_record(cluster);
    assert_ne!(again["started"], first["started"], "a new launch: {again}");
    assert_eq!((&again["cuda_graphs"], &again["env"]), (&first["cuda_graphs"], &first["env"]), "{again}");
    // At the commit that served, not the one `main` names now: each rank was asked it, and
    // found its snapshot offline (the stand-in reads the cache with huggingface_hub).
    assert_eq!((&again["identity"], &again["image"]), (&first["identity"], &first["image"]), "{again}");
    for index in 1..=2 {
        let (argv, _) = vllm_process(cluster, index);
        assert!(argv.windows(2).any(|pair| pair == ["--revision", served.as_str()]), "node{index}: {argv:?}");
    }
    let upstream = format!("http://{}:{}/ranks", again["head_ip"].as_str().expect("head_ip"), again["port"]);
    let ranks: Value = serde_json::from_str(&get_on_node(cluster, 2, &upstream)).expect("/ranks");
    let found: Vec<&str> = ranks.as_array().expect("ranks").iter().filter_map(|rank| rank["model"].as_str()).collect();
    assert_eq!(found.len(), 2, "{ranks}");
    assert!(found.iter().all(|path| path.ends_with(&format!("/snapshots/{served}"))), "{ranks}");

    // Its operator stops it: no failure, no longer watched, nothing relaunched.
    let stopped = strix(&["stop", SERVICE]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    watch.action("dropped", None);
    assert_eq!(watch.interrupt(), Some(130), "Ctrl-C ends the watch with 130");
    let relaunches = watch.seen.iter().filter(|event| event["action"] == "relaunch").count();
    assert_eq!(relaunches, 1, "one fault, one relaunch: {:#?}", watch.seen);
    assert!(record(&cluster.node(1).serving_dir(), SERVICE).is_none(), "nothing was started after the stop");
}

/// Node `node`'s cache as a `model pull` of commit `to` leaves it when `to` has the same files as
/// `from`: its snapshot linking the same blobs, `main` naming it.
fn main_moved(node: &TestNode, from: &str, to: &str) {
    let repo = node.home.join(".cache/huggingface/hub").join(format!("models--{}", MODEL.replace('/', "--")));
    let (old, new) = (repo.join("snapshots").join(from), repo.join("snapshots").join(to));
    std::fs::create_dir_all(&new).expect("the new snapshot");
    for entry in std::fs::read_dir(&old).expect("the served snapshot") {
        let entry = entry.expect("a snapshot entry");
        let target = std::fs::read_link(entry.path()).expect("a snapshot file is a link to its blob");
        std::os::unix::fs::symlink(target, new.join(entry.file_name())).expect("a link in the new snapshot");
    }
    std::fs::write(repo.join("refs/main"), to).expect("refs/main");
}

/// The service's record on its head.
fn head_record(cluster: &TestCluster) -> Value {
    record(&cluster.node(1).serving_dir(), SERVICE).expect("the service's record on its head")
}

/// Node `index`'s vLLM as it runs in its toolbox (the pid its record names): its argv, and its
/// environment as `KEY=VALUE` entries.
fn vllm_process(cluster: &TestCluster, index: usize) -> (Vec<String>, Vec<String>) {
    let record = record(&cluster.node(index).serving_dir(), SERVICE).expect("the service's record");
    let processes = record["processes"].as_array().expect("processes");
    let vllm = processes.iter().find(|p| p["name"] == "vllm").unwrap_or_else(|| panic!("no vllm: {record}"));
    let pid = vllm["pid"].to_string();
    let read = |file: &str| -> Vec<String> {
        let path = format!("/proc/{pid}/{file}");
        let output = cluster.node(index).podman().remote(&["exec", "vllm", "cat", &path]);
        assert!(output.status.success(), "node{index}: {path}: {}", String::from_utf8_lossy(&output.stderr));
        output
            .stdout
            .split(|byte| *byte == 0)
            .filter(|word| !word.is_empty())
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect()
    };
    (read("cmdline"), read("environ"))
}
