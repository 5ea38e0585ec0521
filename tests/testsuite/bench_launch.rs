//! A benchmark, not a test (ignored; `scripts/bench.sh` runs it): `cluster launch` to serving
//! without Ray (vLLM's multiprocessing executor, the default) and over Ray (`--backend ray`),
//! against the same Ray steps typed by hand over ssh one after another (Ray's head, each worker,
//! `vllm serve`, then polling /health), on three Thunderbolt nodes with real Ray and the stand-in
//! vLLM, side by side in one hyperfine run. Every run starts from freshly restarted toolboxes.

use std::process::Command;

use crate::launch::serving_cluster;
use crate::support::cli::STRIX;

/// Runs per side.
const RUNS: &str = "3";
const MODEL: &str = "org/tiny-model";
const HEAD: &str = "192.168.2.1";

#[test]
#[ignore = "a benchmark: scripts/bench.sh runs it"]
fn launch_against_the_same_steps_by_hand() {
    let nodes = 3;
    let bed = serving_cluster(nodes);
    let cluster = &bed.cluster;
    let port = crate::support::free_port();
    let work = tempfile::tempdir().expect("tempdir");
    let config = cluster.ssh_config().display().to_string();
    let ssh = |node: usize, command: &str| format!("ssh -F {config} node{node} {command}");

    // What a person types: the same environment and commands `cluster launch --dry-run` shows.
    let env = |ip: &str| {
        format!(
            "-e VLLM_HOST_IP={ip} -e NCCL_NET_GDR_LEVEL=0 -e RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES=1 \
             -e RAY_memory_monitor_refresh_ms=0 -e RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION=0.01"
        )
    };
    let mut by_hand = vec!["set -e".to_string()];
    by_hand.push(ssh(
        1,
        &format!(
            "podman exec {} vllm ray start --head --port 6379 --node-ip-address {HEAD} --num-gpus 1 \
             --disable-usage-stats --include-dashboard=false >/dev/null",
            env(HEAD)
        ),
    ));
    for node in 2..=nodes {
        let ip = format!("192.168.2.{node}");
        by_hand.push(ssh(
            node,
            &format!(
                "podman exec {} vllm ray start --address {HEAD}:6379 --node-ip-address {ip} --num-gpus 1 \
                 --disable-usage-stats >/dev/null",
                env(&ip)
            ),
        ));
    }
    by_hand.push(ssh(
        1,
        &format!(
            "podman exec -d {} vllm vllm serve {MODEL} --tensor-parallel-size {nodes} \
             --distributed-executor-backend ray --port {port}",
            env(HEAD)
        ),
    ));
    by_hand.push(format!(
        "for _ in $(seq 300); do {} && exit 0; sleep 1; done; exit 1",
        ssh(1, &format!("curl -sf http://{HEAD}:{port}/health"))
    ));
    let by_hand_script = work.path().join("by-hand.sh");
    std::fs::write(&by_hand_script, by_hand.join("\n") + "\n").expect("write the by-hand script");

    let restart: Vec<String> = (1..=nodes).map(|node| ssh(node, "podman restart -t 0 vllm >/dev/null")).collect();
    let prepare = restart.join(" && ");
    let launch = format!(
        "{STRIX} cluster --ssh-config {config} --nodes {} launch {MODEL} --port {port} --timeout 300",
        cluster.nodes_arg()
    );
    // Over Ray as by hand: tensor parallel across the nodes.
    let launch_over_ray =
        format!("{launch} --backend ray --tp {nodes} -e RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION=0.01");
    let report = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench/launch.md");
    std::fs::create_dir_all(report.parent().unwrap()).expect("mkdir target/bench");
    let status = Command::new("hyperfine")
        // The warm-up run pulls the model (cluster launch's first step when a node lacks it).
        .args(["--warmup", "1", "--runs", RUNS, "--prepare", &prepare, "--export-markdown"])
        .arg(&report)
        .args(["-n", "by hand over ssh (ray head, each worker, vllm serve, poll /health)"])
        .arg(format!("bash {}", by_hand_script.display()))
        .args(["-n", "strix-toolbox cluster launch --backend ray"])
        .arg(&launch_over_ray)
        .args(["-n", "strix-toolbox cluster launch (mp: no Ray)"])
        .arg(&launch)
        .env("NO_COLOR", "1")
        .envs(crate::launch::hub_env(&bed.hub))
        .status()
        .expect("hyperfine (scripts/test-deps.sh installs it)");
    assert!(status.success(), "hyperfine failed");
}
