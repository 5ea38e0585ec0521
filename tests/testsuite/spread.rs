//! Image spread end to end, on clusters wired like the real ones (support/cluster): the upstream
//! registry is reachable from the nodes only through the shared, byte-counting, rate-limited
//! uplink; three nodes sit on a switch at MTU 9000, two on the direct cable. The head copies the
//! image from upstream once into the registry it runs on the cluster link (a stand-in for
//! `registry:2` built from Debian's docker-registry), relaying it to every node as it comes.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::cli::{json, stderr, strix_command};
use crate::support::cluster::{Link, NodeEngine, TestCluster};
use crate::support::oci_image::{layer, noise, publish, stand_in_root, Entry, ImageSpec, Published};
use crate::support::registry::Registry;
use crate::support::registry_image::publish_registry_image;
use crate::support::wait_until;

const CREATED_V1: &str = "2026-11-01T10:00:00Z";
const CREATED_V2: &str = "2026-11-08T10:00:00Z";
const CREATED_V3: &str = "2026-11-15T10:00:00Z";
/// The layer every version of the toolbox image shares: the stand-in's root and this much more.
const BASE_NOISE: usize = 4 << 20;
/// Each version's own layer.
const OWN_LAYER: usize = 512 << 10;

/// Version `version` of the toolbox image `name` (`vllm:latest`): the shared base layer, and a
/// layer of `own` bytes of its own; an index with an attestation, as buildx publishes.
fn toolbox_image(name: &str, created: &str, version: u64, own: usize) -> ImageSpec {
    let mut base = stand_in_root();
    base.push(Entry::Dir("opt", 0o755));
    base.push(Entry::File("opt/base.bin".into(), noise(0, BASE_NOISE), 0o644));
    let own =
        layer(&[Entry::Dir("opt", 0o755), Entry::File(format!("opt/v{version}.bin"), noise(version, own), 0o644)]);
    ImageSpec {
        name: name.into(),
        created: created.into(),
        layers: vec![layer(&base), own],
        entrypoint: None,
        cmd: vec!["/bin/sh".into()],
        index: true,
    }
}

/// `strix-toolbox --json cluster ARGS --ssh-config … --nodes …`, the head being this process.
fn cluster_command(bed: &TestCluster, args: &[&str]) -> Command {
    let config = bed.ssh_config();
    let nodes = bed.nodes_arg();
    let mut argv = vec!["--json", "cluster"];
    argv.extend_from_slice(args);
    argv.extend(["--ssh-config", config.to_str().expect("utf-8"), "--nodes", &nodes, "--connect-timeout", "3"]);
    strix_command(&[], &argv)
}

fn cluster(bed: &TestCluster, args: &[&str]) -> Output {
    cluster_command(bed, args).stdin(Stdio::null()).output().expect("run strix-toolbox cluster")
}

/// `cluster refresh` of toolbox `vllm` from `image`, spread with the stand-in registry on the
/// cluster's own port. RDMA nodes: no verification (their toolboxes cannot start here).
fn refresh_args(bed: &TestCluster, image: &str, registry: &Published, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["refresh", "--image", image, "--name", "vllm", "--manager", "native", "--no-verify"]
        .map(String::from)
        .to_vec();
    args.extend(["--spread-port".into(), bed.spread_port().to_string()]);
    args.extend(["--spread-relay-port".into(), bed.relay_port().to_string()]);
    args.extend(["--spread-registry-image".into(), registry.reference.clone()]);
    args.extend(extra.iter().map(|arg| arg.to_string()));
    args
}

fn refresh(bed: &TestCluster, image: &str, registry: &Published, extra: &[&str]) -> Value {
    let args = refresh_args(bed, image, registry, extra);
    let output = cluster(bed, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(output.status.success(), "cluster refresh of {image}: {}", stderr(&output));
    json(&output)
}

/// Bytes each node received from upstream (its uplink) and over the cluster link.
struct Traffic {
    upstream: Vec<u64>,
    link: Vec<u64>,
}

impl Traffic {
    fn now(bed: &TestCluster) -> Traffic {
        Traffic {
            upstream: bed.nodes.iter().map(|node| bed.uplink().node_bytes_down(node.index)).collect(),
            link: bed.nodes.iter().map(|node| node.link_bytes_received()).collect(),
        }
    }

    fn since(&self, bed: &TestCluster) -> Traffic {
        let now = Traffic::now(bed);
        Traffic {
            upstream: now.upstream.iter().zip(&self.upstream).map(|(now, then)| now - then).collect(),
            link: now.link.iter().zip(&self.link).map(|(now, then)| now - then).collect(),
        }
    }
}

/// `podman image inspect` on node `index`, of `reference`.
fn podman_image(bed: &TestCluster, index: usize, reference: &str) -> Option<Value> {
    let output = bed.node(index).podman().remote(&["image", "inspect", reference]);
    output.status.success().then(|| serde_json::from_slice::<Value>(&output.stdout).expect("inspect JSON")[0].take())
}

/// Every node has `image` as an upstream pull would have left it: the same Id, its digest under
/// its canonical name, its pin, and no trace of the head's registry.
fn same_image_everywhere(bed: &TestCluster, image: &Published, pin: &str) {
    let mut ids = Vec::new();
    for node in &bed.nodes {
        let inspect = podman_image(bed, node.index, &image.pinned())
            .unwrap_or_else(|| panic!("{} has no {}", node.name, image.pinned()));
        let digests: Vec<&str> = inspect["RepoDigests"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert!(digests.contains(&image.pinned().as_str()), "{}: {digests:?}", node.name);
        assert!(
            digests.iter().all(|d| d.starts_with(&image.repository)),
            "{}: a name from elsewhere: {digests:?}",
            node.name
        );
        assert_eq!(inspect["Digest"], image.digest, "{}", node.name);
        let tags = inspect["RepoTags"].as_array().unwrap();
        assert!(tags.contains(&json!(format!("{}:{pin}", image.repository))), "{}: {tags:?}", node.name);
        ids.push(inspect["Id"].as_str().unwrap().to_string());
    }
    assert!(ids.windows(2).all(|pair| pair[0] == pair[1]), "{ids:?}");
}

/// The `vllm` toolbox's image digest label on every node, from `cluster status`; and that status.
fn status(bed: &TestCluster) -> Value {
    let output = cluster(bed, &["status"]);
    let report = json(&output);
    assert!(output.status.success(), "cluster status: {report}");
    report
}

fn warnings_of<'a>(report: &'a Value, node: &str) -> Vec<&'a str> {
    let nodes = report["nodes"].as_array().expect("nodes");
    let node = nodes.iter().find(|n| n["node"] == node).unwrap_or_else(|| panic!("{node} in {report}"));
    node["warnings"].as_array().expect("warnings").iter().filter_map(Value::as_str).collect()
}

#[test]
fn three_nodes_fetch_the_image_once_and_get_it_over_the_link() {
    let registry = Registry::start();
    let bed = TestCluster::start_with(&registry, 3, Link::Roce);
    let registry_image = publish_registry_image(&registry);
    // The head pulls its registry's image once per cluster, ever: what follows counts the toolbox's.
    let pulled = bed.node(1).podman().remote(&["pull", "--quiet", &registry_image.reference]);
    assert!(pulled.status.success(), "{}", stderr(&pulled));
    let head = format!("{}:{}", bed.node(1).link_address, bed.spread_port());
    let relay = format!("{}:{}", bed.node(1).link_address, bed.relay_port());

    // 1. A new image: one copy from upstream, through the head; the layers reach the others over the link.
    let v1 = publish(&registry, &toolbox_image("vllm:latest", CREATED_V1, 1, OWN_LAYER));
    let before = Traffic::now(&bed);
    let report = refresh(&bed, &v1.reference, &registry_image, &[]);
    let moved = before.since(&bed);
    println!("v1 ({} bytes): upstream {:?}, link {:?}", v1.size, moved.upstream, moved.link);
    assert_eq!(report["outcome"], "refreshed", "{report}");
    assert_eq!(report["pinned"], v1.pinned());
    let spread = &report["spread"];
    assert_eq!(spread["registry"], head, "{report}");
    assert_eq!(spread["relay"], relay, "{report}");
    assert_eq!(spread["from_head"], json!(["node1", "node2", "node3"]), "{report}");
    let layers: u64 = v1.layers.iter().map(|(_, size)| size).sum();
    assert!(spread["relayed"].as_u64().unwrap() >= 2 * layers, "relayed to the nodes: {report}");
    assert_eq!((spread["size"].as_u64(), spread["fetched"].as_u64()), (Some(v1.size), Some(v1.size)), "{report}");
    assert!(moved.upstream[0] >= v1.size && moved.upstream[0] as f64 <= 1.05 * v1.size as f64, "{:?}", moved.upstream);
    assert_eq!(moved.upstream[1..], [0, 0], "nodes 2 and 3 pulled nothing from upstream");
    assert!(moved.link[1] >= layers && moved.link[2] >= layers, "the layers crossed the link: {:?}", moved.link);
    same_image_everywhere(&bed, &v1, "20261101-100000");
    let state = status(&bed);
    assert_eq!(state["disagreements"], json!([]), "{state}");
    for node in state["nodes"].as_array().unwrap() {
        assert_eq!(node["status"]["toolboxes"][0]["image_digest"], v1.digest, "{node}");
    }

    // 2. A second image sharing all but one layer: only that layer crosses, upstream and link.
    let v2 = publish(&registry, &toolbox_image("vllm:latest", CREATED_V2, 2, OWN_LAYER));
    let before = Traffic::now(&bed);
    let report = refresh(&bed, &v2.reference, &registry_image, &[]);
    let moved = before.since(&bed);
    println!(
        "v2 ({} bytes, new layer {}): upstream {:?}, link {:?}",
        v2.size, v2.layers[1].1, moved.upstream, moved.link
    );
    let (base, own) = (v2.layers[0].1, v2.layers[1].1);
    // The head's registry had the base layer, and the attestation's two blobs (the same statement).
    assert_eq!(report["spread"]["blobs_present"], 3, "{report}");
    assert_eq!(report["spread"]["blobs_copied"], 2, "the new layer and the new config: {report}");
    assert!(moved.upstream[0] >= own && moved.upstream[0] < own + base / 4, "{:?}", moved.upstream);
    assert_eq!(moved.upstream[1..], [0, 0]);
    for index in 1..=2 {
        assert!(moved.link[index] >= own && moved.link[index] < own + base / 4, "link: {:?}", moved.link);
    }
    same_image_everywhere(&bed, &v2, "20261108-100000");

    // 3. node3 cannot reach the head's registry: it pulls from upstream itself, and says why.
    let v3 = publish(&registry, &toolbox_image("vllm:latest", CREATED_V3, 3, OWN_LAYER));
    let unreachable = format!("{}/32", bed.node(1).link_address);
    bed.node(3).netns().ip(&["route", "add", "unreachable", &unreachable]);
    let before = Traffic::now(&bed);
    let report = refresh(&bed, &v3.reference, &registry_image, &["--keep", "1"]);
    let moved = before.since(&bed);
    bed.node(3).netns().ip(&["route", "del", "unreachable", &unreachable]);
    assert_eq!(report["spread"]["from_head"], json!(["node1", "node2"]), "{report}");
    assert_eq!(report["spread"]["from_upstream"], json!(["node3"]), "{report}");
    let warnings = warnings_of(&report, "node3");
    assert!(
        warnings.iter().any(|w| w.contains("cannot reach the head's registry") && w.contains(&relay)),
        "{warnings:?}"
    );
    assert!(moved.upstream[2] >= own && moved.upstream[1] == 0, "{:?}", moved.upstream);
    same_image_everywhere(&bed, &v3, "20261115-100000");

    // 4. --keep 1: the head's registry keeps v3 and v2; v1 is gone from it, and status says its size.
    let pruned: Vec<&str> = report["spread"]["pruned"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(pruned.contains(&format!("vllm@{}", v1.digest).as_str()), "{report}");
    let state = status(&bed);
    let held = &state["registry"];
    assert_eq!(held["node"], "node1", "{state}");
    let mut digests: Vec<&str> =
        held["images"].as_array().unwrap().iter().filter_map(|i| i["digest"].as_str()).collect();
    digests.sort();
    let mut expected = [v2.digest.as_str(), v3.digest.as_str()];
    expected.sort();
    assert_eq!(digests, expected, "{state}");
    let disk = held["disk_bytes"].as_u64().unwrap();
    assert!(disk >= base + 2 * own && disk < base + 3 * own + (2 << 20), "{disk} bytes on disk: {state}");
    assert_eq!(state["disagreements"], json!([]), "{state}");
    let config = bed.ssh_config();
    let nodes = bed.nodes_arg();
    let text = strix_command(&[], &["cluster", "status", "--ssh-config", config.to_str().unwrap(), "--nodes", &nodes])
        .output()
        .expect("cluster status");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("head registry on node1:") && text.contains("2 image(s), running"), "{text}");
}

/// `skopeo ARGS` on node `index` (its network namespace: it reaches what the node reaches).
fn skopeo(bed: &TestCluster, index: usize, args: &[&str]) -> Output {
    let mut command = bed.node(index).netns().enter("skopeo");
    command.arg("--insecure-policy").args(args).stdin(Stdio::null());
    command.output().expect("run skopeo")
}

/// Only the cluster's nodes read the head's registry, and only the head writes: a client without
/// a certificate is refused in the TLS handshake; a node's certificate, as its engines find it in
/// certs.d, pulls but neither pushes nor deletes; the head's writer on its loopback accepts the
/// head's own certificate alone.
#[test]
fn only_the_cluster_s_nodes_pull_from_the_head_and_only_the_head_writes() {
    use std::os::unix::fs::MetadataExt;
    let registry = Registry::start();
    let bed = TestCluster::start_with(&registry, 2, Link::Roce);
    let registry_image = publish_registry_image(&registry);
    let v1 = publish(&registry, &toolbox_image("vllm:latest", CREATED_V1, 1, OWN_LAYER));
    let report = refresh(&bed, &v1.reference, &registry_image, &[]);
    assert_eq!(report["spread"]["from_head"], json!(["node1", "node2"]), "{report}");
    let head = format!("{}:{}", bed.node(1).link_address, bed.spread_port());
    // The nodes pulled from the relay: their trust is kept for its address, the same CA's.
    let relay = format!("{}:{}", bed.node(1).link_address, bed.relay_port());
    let trust = std::path::PathBuf::from("/etc/containers/certs.d").join(&relay);
    let mode =
        |name: &str| std::fs::metadata(trust.join(name)).unwrap_or_else(|e| panic!("{name}: {e}")).mode() & 0o777;
    assert_eq!((mode("ca.crt"), mode("client.cert"), mode("client.key")), (0o644, 0o644, 0o600));
    let cert_dir = trust.to_str().unwrap();
    let image = format!("docker://{head}/vllm@{}", v1.digest);

    // A node's certificate pulls.
    let pulled = skopeo(&bed, 2, &["inspect", "--raw", "--cert-dir", cert_dir, &image]);
    assert!(pulled.status.success(), "{}", stderr(&pulled));
    // Without one, the handshake fails.
    let stranger = tempfile::tempdir().unwrap();
    std::fs::copy(trust.join("ca.crt"), stranger.path().join("ca.crt")).unwrap();
    let refused = skopeo(&bed, 2, &["inspect", "--raw", "--cert-dir", stranger.path().to_str().unwrap(), &image]);
    assert!(!refused.status.success(), "a client without a certificate pulled");
    assert!(stderr(&refused).contains("tls: "), "refused in the handshake: {}", stderr(&refused));
    // It can neither push nor delete.
    let stolen = format!("docker://{head}/stolen:1");
    let pushed = skopeo(&bed, 2, &["copy", "--src-cert-dir", cert_dir, "--dest-cert-dir", cert_dir, &image, &stolen]);
    assert!(!pushed.status.success(), "a node pushed");
    let deleted = skopeo(&bed, 2, &["delete", "--cert-dir", cert_dir, &image]);
    assert!(!deleted.status.success(), "a node deleted");
    println!("push: {}\ndelete: {}", stderr(&pushed), stderr(&deleted));
    for said in [stderr(&pushed), stderr(&deleted)] {
        assert!(said.contains("405") || said.to_lowercase().contains("unsupported"), "read-only: {said}");
    }
    let still = skopeo(&bed, 2, &["inspect", "--raw", "--cert-dir", cert_dir, &image]);
    assert!(still.status.success(), "the image is still there: {}", stderr(&still));
    // The writer, on the head's loopback, takes the head's certificate alone: not a node's.
    let writer = format!("docker://127.0.0.1:{}/vllm@{}", bed.spread_port(), v1.digest);
    let at_writer = skopeo(&bed, 1, &["delete", "--cert-dir", cert_dir, &writer]);
    assert!(!at_writer.status.success(), "a node's certificate reached the writer");
    assert!(stderr(&at_writer).contains("tls: "), "refused in the handshake: {}", stderr(&at_writer));
}

#[test]
fn a_spread_that_fails_midway_changes_no_node() {
    let registry = Registry::start();
    let bed = TestCluster::start_with(&registry, 2, Link::Roce);
    let registry_image = publish_registry_image(&registry);
    let v1 = publish(&registry, &toolbox_image("vllm:latest", CREATED_V1, 1, OWN_LAYER));
    refresh(&bed, &v1.reference, &registry_image, &[]);
    let before = toolboxes(&bed);

    // A new image with a big layer of its own, upstream crawling: the head's uplink goes mid-copy.
    let v2 = publish(&registry, &toolbox_image("vllm:latest", CREATED_V2, 2, 3 << 20));
    bed.uplink().set_rate_limit(Some(400_000));
    let started_with = bed.uplink().node_bytes_down(1);
    let mut child = start_refresh(&bed, &v2.reference, &registry_image);
    wait_until("the copy to be under way", Duration::from_secs(60), || {
        bed.uplink().node_bytes_down(1) > started_with + 400_000
    });
    bed.uplink().cut_off(1);
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "the refresh did not end after the cut");
        std::thread::sleep(Duration::from_millis(100));
    }
    let failed = child.wait_with_output().expect("output");
    bed.uplink().reconnect(1);
    bed.uplink().set_rate_limit(None);
    a_failed_spread_changed_no_node(&bed, &failed, "node1", &before, &v2);

    // With the uplink back, the same refresh completes.
    let report = refresh(&bed, &v2.reference, &registry_image, &[]);
    assert_eq!(report["outcome"], "refreshed", "{report}");
    same_image_everywhere(&bed, &v2, "20261108-100000");
}

/// Each node's toolbox as its engine shows it.
fn toolboxes(bed: &TestCluster) -> Vec<Value> {
    (1..=2).map(|index| bed.node(index).podman().inspect("vllm")).collect()
}

/// A refresh that `failed` in the spread (its message naming `why`) left each node as `before`:
/// the same toolbox, nothing staged, no trace of `new`; only the head went upstream.
fn a_failed_spread_changed_no_node(bed: &TestCluster, failed: &Output, why: &str, before: &[Value], new: &Published) {
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(failed));
    let message = stderr(failed);
    assert!(message.contains("the spread failed") && message.contains(why), "{message}");
    assert!(message.contains("No node was changed"), "{message}");
    for index in 1..=2 {
        let podman = bed.node(index).podman();
        assert_eq!(podman.inspect("vllm"), before[index - 1], "node{index}'s toolbox changed");
        let mut names = podman.container_names();
        names.sort();
        let expected: &[&str] =
            if index == 1 { &["strix-toolbox-registry", "strix-toolbox-registry-writer", "vllm"] } else { &["vllm"] };
        assert_eq!(names, expected, "node{index}: nothing staged");
        assert!(podman_image(bed, index, &new.pinned()).is_none(), "node{index} has the new image");
    }
    assert_eq!(bed.uplink().node_bytes_down(2), 0, "node2 never went upstream");
}

/// `cluster refresh` of `image` started in the background, its output captured.
fn start_refresh(bed: &TestCluster, image: &str, registry: &Published) -> std::process::Child {
    let args = refresh_args(bed, image, registry, &[]);
    cluster_command(bed, &args.iter().map(String::as_str).collect::<Vec<_>>())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cluster refresh")
}

/// The nodes pull while the head is still fetching: with the uplink slow, node2 has received a
/// good part of the image over the link before the head has fetched all of it from upstream.
#[test]
fn the_nodes_pull_the_image_while_the_head_still_fetches_it() {
    let registry = Registry::start();
    let bed = TestCluster::start_with(&registry, 2, Link::Roce);
    let registry_image = publish_registry_image(&registry);
    let pulled = bed.node(1).podman().remote(&["pull", "--quiet", &registry_image.reference]);
    assert!(pulled.status.success(), "{}", stderr(&pulled));
    let v1 = publish(&registry, &toolbox_image("vllm:latest", CREATED_V1, 1, 3 << 20));
    bed.uplink().set_rate_limit(Some(1_000_000));
    let before = Traffic::now(&bed);
    let mut child = start_refresh(&bed, &v1.reference, &registry_image);
    // (head's bytes from upstream, node2's bytes over the link) once node2 had 1 MiB.
    let mut seen = None;
    let deadline = Instant::now() + Duration::from_secs(180);
    while child.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "the refresh did not end");
        let moved = before.since(&bed);
        if seen.is_none() && moved.link[1] >= 1 << 20 {
            seen = Some((moved.upstream[0], moved.link[1]));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("output");
    bed.uplink().set_rate_limit(None);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).expect("the report");
    let moved = before.since(&bed);
    println!("{} bytes; when node2 had received its first MiB: {seen:?}; in all {:?}", v1.size, moved.upstream);
    let (head_fetched, _) = seen.expect("node2 received the image over the link");
    assert!(
        head_fetched + (1 << 20) < v1.size,
        "node2 got 1 MiB only once the head had fetched {head_fetched} of {} bytes",
        v1.size
    );
    assert_eq!(report["spread"]["from_head"], json!(["node1", "node2"]), "{report}");
    assert!(moved.upstream[0] as f64 <= 1.05 * v1.size as f64, "once through the uplink: {:?}", moved.upstream);
    assert_eq!(moved.upstream[1], 0, "node2 never went upstream");
    same_image_everywhere(&bed, &v1, "20261101-100000");
}

/// Upstream sends other bytes in the middle of a layer the nodes are already receiving: the
/// head's digest check fails, the nodes' downloads are cut, and no node changes.
#[test]
fn upstream_sending_wrong_bytes_midway_changes_no_node() {
    let registry = Registry::start();
    let bed = TestCluster::start_with(&registry, 2, Link::Roce);
    let registry_image = publish_registry_image(&registry);
    let v1 = publish(&registry, &toolbox_image("vllm:latest", CREATED_V1, 1, OWN_LAYER));
    refresh(&bed, &v1.reference, &registry_image, &[]);
    let before = toolboxes(&bed);

    let v2 = publish(&registry, &toolbox_image("vllm:latest", CREATED_V2, 2, 3 << 20));
    let (own, size) = v2.layers[1].clone();
    let file = registry.blob_file(&own);
    let mut bytes = std::fs::read(&file).expect("the layer upstream");
    assert_eq!(bytes.len() as u64, size);
    let middle = bytes.len() / 2;
    bytes[middle..middle + 4096].iter_mut().for_each(|byte| *byte = !*byte);
    std::fs::write(&file, bytes).expect("spoil the layer upstream");
    bed.uplink().set_rate_limit(Some(1_000_000));
    let child = start_refresh(&bed, &v2.reference, &registry_image);
    let failed = child.wait_with_output().expect("output");
    bed.uplink().set_rate_limit(None);
    a_failed_spread_changed_no_node(&bed, &failed, "not the blob", &before, &v2);
}

#[test]
fn a_docker_node_gets_the_image_from_the_head_and_keeps_its_digest() {
    let registry = Registry::start();
    let bed = TestCluster::start_with_engines(&registry, &[NodeEngine::Podman, NodeEngine::Docker], Link::Roce);
    let registry_image = publish_registry_image(&registry);
    let relay = format!("{}:{}", bed.node(1).link_address, bed.relay_port());
    let v1 = publish(&registry, &toolbox_image("vllm:latest", CREATED_V1, 1, OWN_LAYER));
    let docker_image = |reference: &str| {
        let output = bed.node(2).docker().cli(&["image", "inspect", reference]);
        output.status.success().then(|| serde_json::from_slice::<Value>(&output.stdout).expect("JSON")[0].take())
    };

    let report = refresh(&bed, &v1.reference, &registry_image, &[]);
    assert_eq!(report["spread"]["from_head"], json!(["node1", "node2"]), "{report}");
    assert_eq!(bed.uplink().node_bytes_down(2), 0, "node2 pulled nothing from upstream");
    // Docker: the canonical pin, and the digest under the relay's name (the only one it keeps).
    let node_id = &report["nodes"][1]["report"]["image_id"];
    let inspect = docker_image(node_id.as_str().unwrap()).expect("the image on node2");
    assert_eq!(inspect["RepoTags"], json!([format!("{}:20261101-100000", v1.repository)]), "{inspect}");
    assert_eq!(inspect["RepoDigests"], json!([format!("{relay}/vllm@{}", v1.digest)]), "{inspect}");
    let state = status(&bed);
    assert_eq!(state["disagreements"], json!([]), "{state}");
    for node in 0..2 {
        assert_eq!(state["nodes"][node]["status"]["toolboxes"][0]["image_digest"], v1.digest, "{state}");
    }

    // The same refresh again: node2 knows it has the image; nothing moves.
    let again = refresh(&bed, &v1.reference, &registry_image, &[]);
    assert_eq!(again["outcome"], "unchanged", "{again}");
    assert_eq!(again["spread"]["had_it"], json!(["node1", "node2"]), "{again}");

    // A new image with --keep 0: the old one leaves node2 whole (its pin and the head's name).
    let v2 = publish(&registry, &toolbox_image("vllm:latest", CREATED_V2, 2, OWN_LAYER));
    let report = refresh(&bed, &v2.reference, &registry_image, &["--keep", "0"]);
    assert_eq!(report["outcome"], "refreshed", "{report}");
    assert!(docker_image(node_id.as_str().unwrap()).is_none(), "the old image is still on node2");
    assert_eq!(bed.uplink().node_bytes_down(2), 0);
}
