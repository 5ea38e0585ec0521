//! The cluster commands end to end: a head (this process's namespace) and nodes in network
//! namespaces with real sshd, each with its own podman service, fake host tree and strix-toolbox
//! (support/cluster.rs). Images come from a loopback registry, each node pulling its own
//! (`--spread off`: the spread from the head is spread.rs's).

use crate::support::cli::{json, run_strix, stderr, stdout};
use crate::support::cluster::TestCluster;
use crate::support::image::stand_in_image;
use crate::support::registry::Registry;
use crate::support::toolbox_lock::hold_toolbox_lock;

const CREATED_V1: &str = "2026-11-01T10:00:00Z";
const CREATED_V2: &str = "2026-11-08T10:00:00Z";

/// `strix-toolbox --json cluster COMMAND --ssh-config … --nodes …` from the head.
fn cluster(cluster: &TestCluster, args: &[&str]) -> std::process::Output {
    let config = cluster.ssh_config();
    let nodes = cluster.nodes_arg();
    let mut argv = vec!["--json", "cluster"];
    argv.extend_from_slice(args);
    if args.first() == Some(&"refresh") {
        argv.extend(["--spread", "off"]);
    }
    argv.extend(["--ssh-config", config.to_str().expect("utf-8"), "--nodes", &nodes, "--connect-timeout", "3"]);
    run_strix(&[], &argv)
}

/// The nodes have RDMA, whose toolbox (memlock=-1) this machine cannot start: no verification
/// (`verification_stops_the_cluster_refresh_before_any_node_swaps` shows why).
fn refresh<'a>(image: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["refresh", "--image", image, "--name", "vllm", "--manager", "native", "--no-verify"];
    args.extend_from_slice(extra);
    args
}

/// Each node's `vllm` toolbox: (image id label, every container name), read from its own podman.
fn node_state(cluster: &TestCluster, index: usize) -> (String, Vec<String>) {
    let podman = cluster.node(index).podman();
    let names = podman.container_names();
    let image_id = if names.iter().any(|n| n == "vllm") {
        podman.inspect("vllm")["Config"]["Labels"]["io.github.strix-toolbox.image-id"]
            .as_str()
            .unwrap_or("")
            .to_string()
    } else {
        String::new()
    };
    (image_id, names)
}

/// A cluster of `nodes` whose toolbox `vllm` was just refreshed (unverified: RDMA nodes) from
/// `image`, with each node's state then.
struct Refreshed {
    cluster: TestCluster,
    image: String,
    before: ((String, Vec<String>), (String, Vec<String>)),
    registry: Registry,
}

fn refreshed(nodes: usize) -> Refreshed {
    let registry = Registry::start();
    let cluster_bed = TestCluster::start(&registry, nodes);
    let image = stand_in_image(cluster_bed.node(1).podman(), &registry, "vllm:latest", CREATED_V1);
    let first = cluster(&cluster_bed, &refresh(&image, &[]));
    assert!(first.status.success(), "{}", stderr(&first));
    let before = (node_state(&cluster_bed, 1), node_state(&cluster_bed, 2));
    Refreshed { cluster: cluster_bed, image, before, registry }
}

#[test]
fn refresh_gives_every_node_one_digest_and_a_second_is_a_no_op() {
    let registry = Registry::start();
    let cluster_bed = TestCluster::start(&registry, 2);
    let image = stand_in_image(cluster_bed.node(1).podman(), &registry, "vllm:latest", CREATED_V1);

    let first = cluster(&cluster_bed, &refresh(&image, &[]));
    assert!(first.status.success(), "{}", stderr(&first));
    let report = json(&first);
    assert_eq!(report["outcome"], "refreshed");
    let pinned = report["pinned"].as_str().expect("pinned");
    assert!(pinned.contains("@sha256:"), "{pinned}");
    for node in report["nodes"].as_array().expect("nodes") {
        assert_eq!(node["report"]["action"], "created", "{node}");
        assert_eq!(node["report"]["image"], pinned);
        assert_eq!(node["swapped"], true);
    }
    let (id1, names1) = node_state(&cluster_bed, 1);
    let (id2, names2) = node_state(&cluster_bed, 2);
    assert!(!id1.is_empty() && id1 == id2, "{id1} vs {id2}");
    assert_eq!((names1, names2), (vec!["vllm".to_string()], vec!["vllm".to_string()]));
    // Each node's podman pulled from the registry through the cluster's uplink.
    for index in 1..=2 {
        assert!(cluster_bed.uplink().node_bytes_down(index) > 0, "node{index} pulled nothing through the uplink");
    }

    let second = cluster(&cluster_bed, &refresh(&image, &[]));
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(json(&second)["outcome"], "unchanged");

    let status = cluster(&cluster_bed, &["status"]);
    assert!(status.status.success(), "{}", stdout(&status));
    let status = json(&status);
    assert_eq!(status["disagreements"].as_array().expect("list").len(), 0, "{status}");
    for node in status["nodes"].as_array().expect("nodes") {
        assert_eq!(node["reachable"], true);
        let toolbox = &node["status"]["toolboxes"][0];
        assert_eq!(toolbox["name"], "vllm");
        assert_eq!(toolbox["image_digest"].as_str(), pinned.split_once('@').map(|(_, d)| d));
    }
}

#[test]
fn a_node_that_cannot_stage_leaves_every_node_on_its_old_toolbox() {
    let Refreshed { cluster: mut cluster_bed, image, before, registry } = refreshed(2);

    // A new image upstream, and node2's engine down.
    stand_in_image(cluster_bed.node(1).podman(), &registry, "vllm:latest", CREATED_V2);
    cluster_bed.node_mut(2).stop_podman();
    let failed = cluster(&cluster_bed, &refresh(&image, &[]));
    assert_eq!(failed.status.code(), Some(1));
    let message = stderr(&failed);
    assert!(message.contains("before any node swapped") && message.contains("node2"), "{message}");

    // node1 staged and was aborted: its old toolbox, nothing left under the temporary name.
    assert_eq!(node_state(&cluster_bed, 1), before.0);
    cluster_bed.node_mut(2).start_podman();
    assert_eq!(node_state(&cluster_bed, 2), before.1);

    // With node2 back, the same refresh moves both.
    let again = cluster(&cluster_bed, &refresh(&image, &[]));
    assert!(again.status.success(), "{}", stderr(&again));
    let (id1, _) = node_state(&cluster_bed, 1);
    let (id2, _) = node_state(&cluster_bed, 2);
    assert!(id1 == id2 && id1 != before.0 .0, "{id1} {id2}");
}

/// A node busy with a refresh of its own fails the cluster refresh at once (nodes never wait:
/// the others would sit staged), and no node changes.
#[test]
fn a_node_busy_with_another_refresh_fails_the_cluster_refresh_at_once() {
    let Refreshed { cluster: cluster_bed, image, before, registry } = refreshed(2);
    stand_in_image(cluster_bed.node(1).podman(), &registry, "vllm:latest", CREATED_V2);
    let held = hold_toolbox_lock(&cluster_bed.node(2).env(), "vllm");

    let failed = cluster(&cluster_bed, &refresh(&image, &[]));
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    let message = stderr(&failed);
    assert!(message.contains("node2") && message.contains("already refreshing vllm"), "{message}");
    // It did not wait for the lock (held all along): a wait that ran out says `still refreshing`.
    assert!(!message.contains("still refreshing"), "{message}");
    assert_eq!((node_state(&cluster_bed, 1), node_state(&cluster_bed, 2)), before, "no node changed");
    drop(held);
}

#[test]
fn doctor_names_the_short_mtu_the_other_image_and_the_unreachable_node() {
    let Refreshed { cluster: mut cluster_bed, image: _, registry, .. } = refreshed(2);

    let healthy = cluster(&cluster_bed, &["doctor"]);
    let report = json(&healthy);
    let problems = |report: &serde_json::Value, check: &str| -> Vec<serde_json::Value> {
        let row = report["checks"].as_array().expect("checks").iter().find(|c| c["name"] == check).cloned();
        row.map(|r| r["problems"].as_array().cloned().unwrap_or_default()).unwrap_or_default()
    };
    for check in ["transport", "roce subnet", "mtu", "jumbo path", "image"] {
        assert!(problems(&report, check).is_empty(), "{check}: {report}");
    }

    // One end at 1500: the MTU row and the jumbo path both say so.
    cluster_bed.node(2).set_link_mtu(1500);
    let short = cluster(&cluster_bed, &["doctor"]);
    assert_eq!(short.status.code(), Some(1));
    let report = json(&short);
    let mtu = problems(&report, "mtu");
    assert_eq!(mtu.len(), 1, "{report}");
    assert_eq!(mtu[0]["node"], "node2");
    assert!(mtu[0]["message"].as_str().unwrap().contains("1500"));
    assert!(!problems(&report, "jumbo path").is_empty(), "{report}");
    cluster_bed.node(2).set_link_mtu(9000);

    // node2 on another image.
    let other = stand_in_image(cluster_bed.node(2).podman(), &registry, "other:latest", CREATED_V2);
    let moved = run_strix(&cluster_bed.node(2).env(), &refresh(&other, &[]));
    assert!(moved.status.success(), "{}", stderr(&moved));
    let report = json(&cluster(&cluster_bed, &["doctor"]));
    let image = problems(&report, "image");
    assert_eq!(image.len(), 1, "{report}");
    assert_eq!(image[0]["node"], "node2");

    // node2 down: named, with the reason.
    cluster_bed.node_mut(2).stop_sshd();
    let down = cluster(&cluster_bed, &["doctor"]);
    assert_eq!(down.status.code(), Some(1));
    let report = json(&down);
    let reach = problems(&report, "strix-toolbox");
    assert_eq!(reach[0]["node"], "node2", "{report}");
    assert!(reach[0]["message"].as_str().unwrap().contains("node2"), "{report}");
}

#[test]
fn a_node_without_strix_toolbox_is_refused_until_install() {
    let registry = Registry::start();
    let cluster_bed = TestCluster::start(&registry, 2);
    let image = stand_in_image(cluster_bed.node(1).podman(), &registry, "vllm:latest", CREATED_V1);
    cluster_bed.node(2).remove_strix_toolbox();
    // node1's ~/.local/bin (which wins over PATH) holds an older release, one without `agent`.
    let old_release = cluster_bed.node(1).home.join(".local/bin/strix-toolbox");
    std::fs::create_dir_all(old_release.parent().unwrap()).unwrap();
    std::fs::write(
        &old_release,
        "#!/bin/sh
[ \"$1\" = --version ] && { echo 'strix-toolbox 0.0.1'; exit 0; }
\
         echo \"error: unrecognized subcommand '$1'\" >&2; exit 2\n",
    )
    .unwrap();
    std::fs::set_permissions(&old_release, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let refused = cluster(&cluster_bed, &refresh(&image, &[]));
    assert_eq!(refused.status.code(), Some(1));
    let said = stderr(&refused);
    assert!(said.contains("node2 has no strix-toolbox") && said.contains("cluster install"), "{said}");
    assert!(said.contains("node1 runs strix-toolbox 0.0.1"), "{said}");
    assert!(node_state(&cluster_bed, 1).1.is_empty(), "nothing may change on node1");
    let status = json(&cluster(&cluster_bed, &["status"]));
    assert_eq!(status["nodes"][0]["version"], "0.0.1", "{status}");
    assert_eq!(status["nodes"][1]["version"], serde_json::Value::Null, "{status}");

    let install = cluster(&cluster_bed, &["install"]);
    assert!(install.status.success(), "{}", stderr(&install));
    let report = json(&install);
    assert_eq!(report["nodes"][0]["action"], "installed", "{report}");
    assert_eq!(report["nodes"][0]["previous_version"], "0.0.1", "{report}");
    assert_eq!(report["nodes"][1]["action"], "installed");
    let installed = cluster_bed.node(2).home.join(".local/bin/strix-toolbox");
    let sha = sha256_of(&installed);
    assert_eq!(report["sha256"], sha);

    let refreshed = cluster(&cluster_bed, &refresh(&image, &[]));
    assert!(refreshed.status.success(), "{}", stderr(&refreshed));
    let again = json(&cluster(&cluster_bed, &["install"]));
    assert!(again["nodes"].as_array().unwrap().iter().all(|n| n["action"] == "up-to-date"), "{again}");
}

#[test]
fn init_writes_the_cluster_file_that_later_commands_read() {
    let registry = Registry::start();
    let cluster_bed = TestCluster::start(&registry, 2);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("cluster.toml");
    let config = cluster_bed.ssh_config();
    let init = run_strix(
        &[],
        &[
            "cluster",
            "init",
            "--nodes",
            &cluster_bed.nodes_arg(),
            "--ssh-config",
            config.to_str().unwrap(),
            "--cluster",
            file.to_str().unwrap(),
        ],
    );
    assert!(init.status.success(), "{}", stderr(&init));
    let text = std::fs::read_to_string(&file).expect("cluster file");
    assert!(text.contains("nodes = [\"node1\", \"node2\"]"), "{text}");
    let status = run_strix(&[], &["--json", "cluster", "status", "--cluster", file.to_str().unwrap()]);
    let report = json(&status);
    assert_eq!(report["nodes"].as_array().expect("nodes").len(), 2, "{report}");
    assert!(report["nodes"].as_array().unwrap().iter().all(|n| n["reachable"] == true), "{report}");

    let missing = run_strix(&[], &["cluster", "status", "--cluster", dir.path().join("none.toml").to_str().unwrap()]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("cluster init"), "{}", stderr(&missing));
}

fn sha256_of(path: &std::path::Path) -> String {
    let output = std::process::Command::new("sha256sum").arg(path).output().expect("sha256sum");
    String::from_utf8_lossy(&output.stdout).split_whitespace().next().unwrap_or_default().to_string()
}

#[test]
fn ctrl_c_during_a_cluster_refresh_leaves_every_node_as_it_was() {
    use std::io::{BufRead, BufReader};
    let Refreshed { cluster: cluster_bed, image, before, registry } = refreshed(2);
    stand_in_image(cluster_bed.node(1).podman(), &registry, "vllm:latest", CREATED_V2);

    // Text mode: the head prints the resolved digest, then stages every node. Interrupt then.
    let config = cluster_bed.ssh_config();
    let nodes = cluster_bed.nodes_arg();
    let mut args = vec!["cluster"];
    args.extend(refresh(&image, &["--spread", "off"]));
    args.extend(["--ssh-config", config.to_str().unwrap(), "--nodes", &nodes]);
    let mut child = crate::support::cli::strix_command(&[], &args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start cluster refresh");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.expect("stderr line");
        seen.push(line.clone());
        if line.contains(" is sha256:") {
            break;
        }
    }
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    seen.extend(lines.map_while(Result::ok));
    crate::support::wait_until("cluster refresh to exit", std::time::Duration::from_secs(60), || {
        matches!(child.try_wait(), Ok(Some(_)))
    });
    let status = child.wait().expect("exit status");
    let text = seen.join("\n");
    assert_eq!(status.code(), Some(130), "Ctrl-C exits 130 after the cleanup: {text}");
    assert!(text.contains("interrupted during the cluster refresh"), "{text}");
    assert_eq!((node_state(&cluster_bed, 1), node_state(&cluster_bed, 2)), before, "{text}");
}

#[test]
fn verification_stops_the_cluster_refresh_before_any_node_swaps() {
    let Refreshed { cluster: cluster_bed, image, before, registry } = refreshed(2);

    // Verified this time: every node starts its staged toolbox to check it from the inside. Here
    // an RDMA toolbox (memlock=-1) cannot start, so no node may swap.
    stand_in_image(cluster_bed.node(1).podman(), &registry, "vllm:latest", CREATED_V2);
    let mut verified: Vec<&str> = refresh(&image, &[]).into_iter().filter(|a| *a != "--no-verify").collect();
    verified.push("--force");
    let failed = cluster(&cluster_bed, &verified);
    assert_eq!(failed.status.code(), Some(1));
    let message = stderr(&failed);
    assert!(message.contains("before any node swapped") && message.contains("failed verification"), "{message}");
    assert!(message.contains("start:") && message.contains("rlimit") && message.contains("memlock"), "{message}");
    assert_eq!((node_state(&cluster_bed, 1), node_state(&cluster_bed, 2)), before);
}

#[test]
fn cluster_verify_proves_every_node_and_skips_what_the_image_lacks() {
    let registry = Registry::start();
    let cluster_bed = TestCluster::start(&registry, 2);
    // The nodes keep their ACTIVE RoCE ports but lose /dev/infiniband: no memlock=-1, so their
    // toolboxes can start on this machine and be verified from the inside.
    for index in 1..=2 {
        std::fs::remove_dir_all(cluster_bed.node(index).host_tree.path().join("dev/infiniband")).expect("rm");
    }
    let image = stand_in_image(cluster_bed.node(1).podman(), &registry, "vllm:latest", CREATED_V1);
    let verified: Vec<&str> = refresh(&image, &[]).into_iter().filter(|a| *a != "--no-verify").collect();
    let refreshed = cluster(&cluster_bed, &verified);
    assert!(refreshed.status.success(), "{}", stderr(&refreshed));

    let output = cluster(&cluster_bed, &["verify"]);
    assert!(output.status.success(), "{}\n{}", stdout(&output), stderr(&output));
    let report = json(&output);
    for node in report["nodes"].as_array().expect("nodes") {
        assert_eq!(node["report"]["ok"], true, "{node}");
    }
    let pair = &report["pairs"][0];
    assert_eq!((pair["from"].as_str(), pair["to"].as_str()), (Some("node1"), Some("node2")));
    // The stand-in image has neither perftest nor torch: skipped, with the reason, never a pass.
    assert_eq!(pair["perftest"]["status"], "skipped", "{pair}");
    assert!(pair["perftest"]["message"].as_str().unwrap().contains("ib_write_lat"), "{pair}");
    assert_eq!(pair["rccl"]["status"], "skipped", "{pair}");
    assert!(pair["rccl"]["message"].as_str().unwrap().contains("python3"), "{pair}");
}
