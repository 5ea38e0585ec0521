//! The test cluster is wired like the real one (support/cluster): a node's podman runs inside the
//! node, so its host-network containers see the node's interfaces and nothing else; images reach
//! a node only through the shared uplink, which counts them per node and can cut a node off; and a
//! Thunderbolt cluster's nodes say in their host trees what their real `thunderbolt0` is.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use strix_toolbox::node::ssh::{NodeSession, SshOptions};

use crate::support::cli::stderr;
use crate::support::cluster::{Link, TestCluster, THUNDERBOLT_MTU, THUNDERBOLT_NETDEV};
use crate::support::image::stand_in_image;
use crate::support::registry::Registry;

const CREATED: &str = "2026-11-01T10:00:00Z";

/// The interface names in a `/proc/net/dev`.
fn netdevs(proc_net_dev: &str) -> BTreeSet<String> {
    proc_net_dev.lines().skip(2).filter_map(|line| Some(line.split_once(':')?.0.trim().to_string())).collect()
}

#[test]
fn a_nodes_podman_runs_in_the_node_and_pulls_only_through_the_uplink() {
    let registry = Registry::start();
    let cluster = TestCluster::start_with(&registry, 2, Link::Thunderbolt);
    let uplink = cluster.uplink();
    // The test's podman CLI on node1 runs on node1 too: the push goes up node1's uplink.
    let image = stand_in_image(cluster.node(1).podman(), &registry, "vllm:latest", CREATED);
    assert!(uplink.node_bytes_up(1) > 500_000, "the push sent {} bytes up", uplink.node_bytes_up(1));
    assert_eq!(uplink.node_bytes_down(2), 0);

    let node2 = cluster.node(2).podman();
    let pulled = node2.remote(&["pull", "--quiet", &image]);
    assert!(pulled.status.success(), "pull on node2: {}", stderr(&pulled));
    let size: u64 = node2.podman_ok(&["image", "inspect", "--format", "{{.Size}}", &image]).parse().expect("size");
    // The layer arrives compressed; busybox compresses to about half.
    let down = uplink.node_bytes_down(2);
    assert!(down > size / 4 && down < size * 2, "{down} bytes down for an image of {size}");
    assert_eq!(uplink.node_bytes_down(1), uplink.bytes_down() - down, "node2's pull is counted on node2 alone");

    // A `--network host` container through node2's podman: node2's interfaces, only those.
    let run = |args: &[&str]| {
        let mut argv = vec!["run", "--rm", "--network", "host", image.as_str()];
        argv.extend_from_slice(args);
        let output = node2.remote(&argv);
        assert!(output.status.success(), "{argv:?}: {}", stderr(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let expected: BTreeSet<String> = ["lo", "mgmt0", THUNDERBOLT_NETDEV].map(str::to_string).into();
    assert_eq!(netdevs(&run(&["cat", "/proc/net/dev"])), expected);
    let addresses = run(&["cat", "/proc/net/fib_trie"]);
    for address in [cluster.node(2).link_address, cluster.node(2).mgmt_address] {
        assert!(addresses.contains(&format!("|-- {address}\n")), "{address} not in:\n{addresses}");
    }
}

#[test]
fn a_node_cut_off_from_the_uplink_cannot_pull_while_the_others_can() {
    let registry = Registry::start();
    let cluster = TestCluster::start_with(&registry, 2, Link::Thunderbolt);
    let image = stand_in_image(cluster.node(1).podman(), &registry, "vllm:latest", CREATED);

    cluster.uplink().cut_off(2);
    let started = Instant::now();
    let refused = cluster.node(2).podman().remote(&["pull", "--quiet", &image]);
    let took = started.elapsed();
    println!("a pull without an uplink failed after {took:?}");
    assert!(!refused.status.success(), "node2 pulled without an uplink");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert_eq!(cluster.uplink().node_bytes_down(2), 0);
    let pulled = cluster.node(1).podman().remote(&["pull", "--quiet", &image]);
    assert!(pulled.status.success(), "node1: {}", stderr(&pulled));

    cluster.uplink().reconnect(2);
    let pulled = cluster.node(2).podman().remote(&["pull", "--quiet", &image]);
    assert!(pulled.status.success(), "node2 reconnected: {}", stderr(&pulled));
}

#[tokio::test]
async fn thunderbolt_nodes_share_a_bridge_and_their_host_trees_say_so() {
    let cluster = TestCluster::start_network_only_with(2, Link::Thunderbolt);
    let options = SshOptions { config_file: Some(cluster.ssh_config()), connect_timeout: Duration::from_secs(2) };
    for node in &cluster.nodes {
        let session = NodeSession::connect(&node.name, &options).await.expect("ssh");
        let argv = |words: &[&str]| words.iter().map(|word| word.to_string()).collect::<Vec<_>>();

        let detect = session.run(&argv(&["strix-toolbox", "--json", "detect"]), None).await.expect("detect");
        assert!(detect.success(), "detect on {}: {}", node.name, String::from_utf8_lossy(&detect.stderr));
        let facts: serde_json::Value = serde_json::from_slice(&detect.stdout).expect("detect --json");
        assert_eq!(facts["transport"], serde_json::json!({"kind": "thunderbolt_tcp", "netdev": THUNDERBOLT_NETDEV}));
        let interface = &facts["interfaces"][0];
        assert_eq!(interface["name"], THUNDERBOLT_NETDEV, "{facts}");
        assert_eq!(interface["operstate"], "up");
        assert_eq!(interface["mtu"], THUNDERBOLT_MTU);
        assert_eq!(interface["ipv4"], serde_json::json!([format!("{}/24", node.link_address)]));

        // The peer, over the link, with the largest frame its MTU carries.
        let peer = cluster.nodes.iter().find(|other| other.index != node.index).expect("two nodes");
        let size = (THUNDERBOLT_MTU - 28).to_string();
        let peer_address = peer.link_address.to_string();
        let ping =
            argv(&["ping", "-M", "do", "-s", &size, "-c", "1", "-W", "2", "-I", THUNDERBOLT_NETDEV, &peer_address]);
        let output = session.run(&ping, None).await.expect("ping");
        assert!(output.success(), "{} → {}: {}", node.name, peer.name, String::from_utf8_lossy(&output.stdout));
        session.close().await;
    }
}
