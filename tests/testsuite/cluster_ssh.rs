//! The ssh transport against real sshds in network namespaces (support/cluster.rs): what a command
//! sends arrives byte-exact, exit codes and stdin go through, one master connection carries every
//! command, and each way of failing to reach a node is named with its fix.

use std::time::{Duration, Instant};

use strix_toolbox::node::ssh::{NodeSession, RemoteOutput, SshOptions};

use crate::support::cluster::{TestCluster, JUMBO_MTU, ROCE_NETDEV};
use crate::support::registry::Registry;

fn options(cluster: &TestCluster) -> SshOptions {
    SshOptions {
        config_file: Some(cluster.ssh_config()),
        connect_timeout: Duration::from_secs(2),
        ..SshOptions::default()
    }
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|word| word.to_string()).collect()
}

async fn connect(cluster: &TestCluster, node: usize) -> NodeSession {
    let name = &cluster.node(node).name;
    match NodeSession::connect(name, &options(cluster)).await {
        Ok(session) => session,
        Err(error) => panic!("connect to {name}: {error}\nsshd log:\n{}", cluster.node(node).sshd_log()),
    }
}

async fn run(session: &NodeSession, words: &[&str]) -> RemoteOutput {
    session.run(&argv(words), None).await.unwrap_or_else(|error| panic!("{words:?}: {error}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn hostile_arguments_arrive_byte_exact() {
    let cluster = TestCluster::start_network_only(1);
    let session = connect(&cluster, 1).await;
    let hostile = [
        "",
        " ",
        "two  words",
        "it's",
        "\"double\"",
        "$HOME ${PATH} $(id -u) `id -u`",
        "line one\nline two\n",
        "back\\slash",
        "*?[a-z] {a,b} ~ ~root",
        "; rm -rf / #",
        "&& | < > ( ) !",
        "%s %d",
        "A=b",
        "-n",
        "--",
        "héllo ✓",
    ];
    let mut words = vec!["printf", "%s\\0"];
    words.extend(hostile);
    let output = run(&session, &words).await;
    assert!(output.success(), "printf failed: {}", text(&output.stderr));
    let back: Vec<&[u8]> = output.stdout.split(|byte| *byte == 0).collect();
    let expected: Vec<&[u8]> = hostile.iter().map(|word| word.as_bytes()).chain([&b""[..]]).collect();
    assert_eq!(back, expected);
    session.close().await;
}

#[tokio::test]
async fn exit_codes_stdin_and_the_node_environment_go_through() {
    let cluster = TestCluster::start_network_only(1);
    let node = cluster.node(1);
    let session = connect(&cluster, 1).await;

    for code in [0, 1, 42, 127, 255] {
        let output = run(&session, &["sh", "-c", &format!("echo out; echo err >&2; exit {code}")]).await;
        assert_eq!(output.status, Some(code), "stderr: {}", text(&output.stderr));
        assert_eq!(output.stdout, b"out\n");
        assert_eq!(output.stderr, b"err\n");
    }
    // A missing program is the shell's 127.
    assert_eq!(run(&session, &["no-such-program-here"]).await.status, Some(127));

    // Every byte value, more than a pipe buffer of it, back unchanged.
    let input: Vec<u8> = (0..(1 << 20)).map(|i: u32| (i % 251) as u8).collect();
    let output = session.run(&argv(&["cat"]), Some(input.clone())).await.expect("cat");
    assert!(output.success(), "{}", text(&output.stderr));
    assert!(output.stdout == input, "cat returned {} bytes, not the {} sent", output.stdout.len(), input.len());

    // The node's own environment (sshd SetEnv): HOME, host tree, and strix-toolbox on its PATH.
    let env =
        run(&session, &["sh", "-c", "printf '%s\\n' \"$HOME\" \"$STRIX_HOST_ROOT\" \"$(command -v strix-toolbox)\""])
            .await;
    let expected = format!(
        "{}\n{}\n{}\n",
        node.home.display(),
        node.host_tree.path().display(),
        node.bin_dir.join("strix-toolbox").display()
    );
    assert_eq!(text(&env.stdout), expected);
    assert!(run(&session, &["strix-toolbox", "--version"]).await.success());
    node.remove_strix_toolbox();
    assert_eq!(run(&session, &["strix-toolbox", "--version"]).await.status, Some(127));
    session.close().await;
}

#[tokio::test]
async fn one_master_connection_carries_every_command() {
    let cluster = TestCluster::start_network_only(1);
    let started = Instant::now();
    let session = connect(&cluster, 1).await;
    let connect_time = started.elapsed();
    assert!(session.control_path().exists(), "no control socket at {}", session.control_path().display());

    let mut connections = Vec::new();
    let mut command_times = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let output = run(&session, &["sh", "-c", "echo \"$SSH_CONNECTION\""]).await;
        command_times.push(started.elapsed());
        connections.push(text(&output.stdout));
    }
    // SSH_CONNECTION holds the client's port: one TCP connection for all five.
    assert!(connections.iter().all(|c| c == &connections[0] && !c.trim().is_empty()), "{connections:?}");
    let logins = cluster.node(1).sshd_log().matches("Accepted publickey").count();
    assert_eq!(logins, 1, "sshd log:\n{}", cluster.node(1).sshd_log());
    let fastest = command_times.iter().min().expect("five runs");
    println!("connect (login + master) {connect_time:?}; commands over it {command_times:?}");
    assert!(*fastest < connect_time, "a command over the master ({fastest:?}) is no faster than a login");

    let control_path = session.control_path().to_path_buf();
    session.close().await;
    assert!(!control_path.exists(), "close left {}", control_path.display());
    // The master was told to exit over its socket: no ssh process holds that path any more.
    let master_runs = || {
        let listing = std::process::Command::new("pgrep").arg("-f").arg(control_path.as_os_str()).output();
        listing.is_ok_and(|listing| listing.status.success())
    };
    crate::support::wait_until("the ssh master's exit", Duration::from_secs(5), || !master_runs());
}

#[tokio::test]
async fn a_node_without_sshd_is_refused_with_the_fix() {
    let mut cluster = TestCluster::start_network_only(2);
    let session = connect(&cluster, 2).await;
    cluster.node_mut(2).stop_sshd();

    // The open session's connection is gone too: the next command says so rather than hanging.
    let error = session.run(&argv(&["true"]), None).await.expect_err("node2's sshd is stopped");
    let message = error.to_string();
    assert!(message.contains("node node2") && message.contains("Fix:"), "{message}");

    // Refused, not timed out: sshd's port answers with a reset.
    let error = NodeSession::connect("node2", &options(&cluster)).await.expect_err("no sshd");
    let message = error.to_string();
    assert!(message.contains("node node2 refused the ssh connection"), "{message}");
    assert!(message.contains("Connection refused") && message.contains("Fix: start sshd"), "{message}");
    // node1 is unaffected.
    assert!(run(&connect(&cluster, 1).await, &["true"]).await.success());
}

#[tokio::test]
async fn a_node_that_is_down_fails_within_the_connect_timeout() {
    let cluster = TestCluster::start_network_only(1);
    cluster.node(1).unplug();
    let started = Instant::now();
    let error = NodeSession::connect("node1", &options(&cluster)).await.expect_err("unplugged");
    let elapsed = started.elapsed();
    let message = error.to_string();
    println!("an unplugged node failed after {elapsed:?} (ConnectTimeout 2 s)");
    assert!(elapsed >= Duration::from_secs(2) && elapsed < Duration::from_secs(6), "took {elapsed:?}");
    assert!(message.contains("cannot reach node node1: it is down or unreachable"), "{message}");
    assert!(message.contains("Fix:"), "{message}");
    cluster.node(1).plug();
    connect(&cluster, 1).await.close().await;
}

#[tokio::test]
async fn a_key_the_node_does_not_accept_is_named() {
    let cluster = TestCluster::start_network_only(1);
    let options = SshOptions { config_file: Some(cluster.ssh_config_with_unauthorized_key()), ..options(&cluster) };
    let error = NodeSession::connect("node1", &options).await.expect_err("unauthorized key");
    let message = error.to_string();
    assert!(message.contains("node node1 refused our ssh key"), "{message}");
    assert!(message.contains("Permission denied (publickey)") && message.contains("ssh-copy-id node1"), "{message}");
}

#[tokio::test]
async fn a_changed_host_key_is_named_with_the_ssh_keygen_fix() {
    let mut cluster = TestCluster::start_network_only(1);
    // The first login records the key (StrictHostKeyChecking accept-new).
    connect(&cluster, 1).await.close().await;
    cluster.node_mut(1).replace_host_key();
    let error = NodeSession::connect("node1", &options(&cluster)).await.expect_err("changed host key");
    let message = error.to_string();
    assert!(message.contains("node node1's host key has CHANGED"), "{message}");
    let address = cluster.node(1).mgmt_address.to_string();
    assert!(message.contains("ssh-keygen -f") && message.contains(&format!("-R \"{address}\"")), "{message}");
}

/// `ping -M do -s MTU-28`: a jumbo frame that may not be fragmented.
async fn jumbo_ping(session: &NodeSession, peer: &str) -> RemoteOutput {
    let size = (JUMBO_MTU - 28).to_string();
    run(session, &["ping", "-M", "do", "-s", &size, "-c", "1", "-W", "2", "-I", ROCE_NETDEV, peer]).await
}

#[tokio::test]
async fn the_dac_cable_carries_jumbo_frames_only_when_both_ends_have_mtu_9000() {
    let cluster = TestCluster::start_network_only(2);
    let session = connect(&cluster, 1).await;
    let peer = cluster.node(2).link_address.to_string();
    assert_eq!(peer, "192.168.100.2");
    let output = jumbo_ping(&session, &peer).await;
    assert!(output.success(), "jumbo ping at MTU 9000: {}{}", text(&output.stdout), text(&output.stderr));

    cluster.node(2).set_link_mtu(1500);
    let output = jumbo_ping(&session, &peer).await;
    assert_eq!(output.status, Some(1), "a jumbo frame reached an MTU 1500 end: {}", text(&output.stdout));
    // The fake host tree says the same as the link.
    let tree_mtu = cluster.node(2).host_tree.path().join(format!("sys/class/net/{ROCE_NETDEV}/mtu"));
    assert_eq!(std::fs::read_to_string(tree_mtu).expect("tree mtu").trim(), "1500");

    cluster.node(2).set_link_mtu(JUMBO_MTU);
    assert!(jumbo_ping(&session, &peer).await.success());
}

#[tokio::test]
async fn three_nodes_reach_each_other_through_the_switch() {
    let cluster = TestCluster::start_network_only(3);
    for from in 1..=3 {
        let session = connect(&cluster, from).await;
        for to in (1..=3).filter(|to| *to != from) {
            let peer = cluster.node(to).link_address.to_string();
            let output = jumbo_ping(&session, &peer).await;
            assert!(output.success(), "node{from} → node{to}: {}{}", text(&output.stdout), text(&output.stderr));
        }
    }
    cluster.node(3).set_link_mtu(1500);
    let session = connect(&cluster, 1).await;
    assert!(!jumbo_ping(&session, &cluster.node(3).link_address.to_string()).await.success());
    assert!(jumbo_ping(&session, &cluster.node(2).link_address.to_string()).await.success());
}

#[tokio::test]
async fn each_node_runs_strix_toolbox_on_its_own_host_tree_and_podman() {
    let registry = Registry::start();
    let mut cluster = TestCluster::start(&registry, 2);
    for index in 1..=2 {
        let session = connect(&cluster, index).await;
        let output = run(&session, &["strix-toolbox", "detect", "--json"]).await;
        assert!(output.success(), "detect on node{index}: {}", text(&output.stderr));
        let facts: serde_json::Value = serde_json::from_slice(&output.stdout).expect("detect --json");
        let port = &facts["rdma"]["ports"][0];
        assert_eq!(port["netdev"], ROCE_NETDEV, "{facts}");
        assert_eq!(port["mtu"], JUMBO_MTU, "{facts}");
        // Its IPv4 tables are the namespace's: the cable's /30.
        let link = facts["interfaces"].as_array().expect("interfaces").iter().find(|i| i["name"] == ROCE_NETDEV);
        let address = format!("{}/30", cluster.node(index).link_address);
        assert_eq!(link.map(|link| &link["ipv4"]), Some(&serde_json::json!([address])), "{facts}");
        // The node's RoCE v2 GID carries its own address.
        let gid_file = format!("sys/class/infiniband/rocep194s0f0/ports/1/gids/{}", port["roce_v2_gid_index"]);
        let gid = std::fs::read_to_string(cluster.node(index).host_tree.path().join(gid_file)).expect("gid");
        assert_eq!(gid.trim(), format!("0000:0000:0000:0000:0000:ffff:c0a8:640{index}"));
        // Its podman answers over the API the session's CONTAINER_HOST names.
        let socket = run(&session, &["sh", "-c", "printf %s \"$CONTAINER_HOST\""]).await;
        assert_eq!(text(&socket.stdout), format!("unix://{}", cluster.node(index).podman().socket.display()));
    }
    // Node 2's podman down: strix-toolbox there says so; back up, it answers again.
    let session = connect(&cluster, 2).await;
    cluster.node_mut(2).stop_podman();
    let down = run(&session, &["strix-toolbox", "list"]).await;
    assert_eq!(down.status, Some(1), "list with podman down: {}", text(&down.stdout));
    assert!(text(&down.stderr).contains("nothing answers at CONTAINER_HOST"), "{}", text(&down.stderr));
    cluster.node_mut(2).start_podman();
    let up = run(&session, &["strix-toolbox", "list"]).await;
    assert!(up.success(), "list with podman back: {}", text(&up.stderr));
}

/// sshd allows 10 sessions per connection (MaxSessions); more at once each open a connection of
/// their own, and still run.
#[tokio::test]
async fn more_parallel_commands_than_max_sessions_all_run() {
    const COMMANDS: usize = 12;
    let cluster = TestCluster::start_network_only(1);
    let session = connect(&cluster, 1).await;
    // Each command marks its start in a directory the node shares with the test, then waits
    // (bounded) until all twelve have: they end only if all ran at once, whatever the load.
    let started = tempfile::tempdir().expect("tempdir");
    let wait = format!(
        "touch \"$1/$$\"; i=0; while [ \"$(ls \"$1\" | wc -l)\" -lt {COMMANDS} ]; do i=$((i+1)); \
         [ $i -lt 3000 ] || {{ echo \"only $(ls \"$1\" | wc -l) began\"; exit 3; }}; sleep 0.1; done"
    );
    let dir = started.path().to_str().expect("utf-8");
    let command = argv(&["sh", "-c", &wait, "sh", dir]);
    let outputs = futures_util::future::join_all((0..COMMANDS).map(|_| session.run(&command, None))).await;
    for output in outputs {
        let output = output.expect("a command beyond MaxSessions");
        assert!(output.success(), "the twelve did not all run at once: {}", text(&output.stdout));
        assert!(output.stderr.is_empty(), "ssh's own notices leaked: {}", text(&output.stderr));
    }
    assert_eq!(std::fs::read_dir(started.path()).expect("the marks").count(), COMMANDS);
}

#[tokio::test]
async fn an_unknown_host_key_is_not_accepted_silently() {
    let cluster = TestCluster::start_network_only(1);
    // The user's config demands a known key (ssh's default under BatchMode), and none is known.
    let strict = cluster.ssh_config().with_extension("strict");
    let config = std::fs::read_to_string(cluster.ssh_config()).expect("ssh config");
    let empty_known_hosts = strict.with_extension("known_hosts");
    let config = config
        .replace("StrictHostKeyChecking accept-new", "StrictHostKeyChecking yes")
        .lines()
        .map(|line| match line.trim_start().strip_prefix("UserKnownHostsFile ") {
            Some(_) => format!("  UserKnownHostsFile {}", empty_known_hosts.display()),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&strict, config).expect("write strict config");
    let options = SshOptions { config_file: Some(strict), ..options(&cluster) };
    let error = NodeSession::connect("node1", &options).await.expect_err("unknown host key");
    let message = error.to_string();
    assert!(message.contains("node node1's host key is not in known_hosts"), "{message}");
    assert!(message.contains("No ED25519 host key is known for"), "{message}");
    assert!(!empty_known_hosts.exists(), "the key was recorded anyway");
}
