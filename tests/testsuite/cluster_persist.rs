//! ssh masters that outlive one cluster command (`--ssh-persist`), against real sshds in network
//! namespaces: the next command rides the same master (one login in sshd's log, the same master
//! process), `cluster disconnect` closes it, persistence off or run out leaves none, and a master
//! to a node that rebooted or changed its host key is never reused.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::cli::{json, run_strix, stderr};
use crate::support::cluster::TestCluster;

/// Every wait here: a master starts, exits or idles out well within it.
const LIMIT: Duration = Duration::from_secs(15);

/// The head: its own runtime directory (where the masters live), so a test sees only its own.
struct Head {
    runtime: tempfile::TempDir,
}

impl Head {
    fn new() -> Head {
        Head { runtime: tempfile::Builder::new().prefix("stx-head-").tempdir_in("/tmp").expect("runtime dir") }
    }

    /// `strix-toolbox --json cluster ARGS --ssh-config … --nodes …`, with `env`.
    fn cluster(&self, cluster: &TestCluster, env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
        let config = cluster.ssh_config();
        let nodes = cluster.nodes_arg();
        let mut argv = vec!["--json", "cluster"];
        argv.extend_from_slice(args);
        argv.extend(["--ssh-config", config.to_str().expect("utf-8"), "--nodes", &nodes, "--connect-timeout", "3"]);
        let mut environment = vec![("XDG_RUNTIME_DIR".to_string(), self.runtime.path().display().to_string())];
        environment.extend(env.iter().map(|(name, value)| (name.to_string(), value.to_string())));
        run_strix(&environment, &argv)
    }

    /// A cluster command that asks every node (`model list`: no engine needed), which must pass.
    fn list_models(&self, cluster: &TestCluster, env: &[(&str, &str)], extra: &[&str]) {
        let mut args = vec!["model", "list"];
        args.extend_from_slice(extra);
        let output = self.cluster(cluster, env, &args);
        assert!(output.status.success(), "{}\nsshd log of node1:\n{}", stderr(&output), cluster.node(1).sshd_log());
    }

    fn masters_dir(&self) -> PathBuf {
        self.runtime.path().join("strix-toolbox/ssh")
    }

    /// The ssh master processes whose control socket is in this head's runtime directory.
    fn master_pids(&self) -> BTreeSet<u32> {
        ssh_masters_under(&self.masters_dir())
    }

    /// Wait (bounded) until no master of this head runs.
    fn wait_for_no_master(&self, why: &str) {
        let started = Instant::now();
        while !self.master_pids().is_empty() {
            assert!(started.elapsed() < LIMIT, "{why}: masters still run: {:?}", self.master_pids());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The control sockets left in the runtime directory.
    fn sockets(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(self.masters_dir()) else { return Vec::new() };
        entries.flatten().map(|entry| entry.path().join("master")).filter(|socket| socket.exists()).collect()
    }
}

/// `ssh … -M …` processes whose arguments name a path under `dir` (their control socket).
fn ssh_masters_under(dir: &Path) -> BTreeSet<u32> {
    let dir = dir.display().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else { return BTreeSet::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(bytes) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
            let words: Vec<String> =
                bytes.split(|b| *b == 0).map(|word| String::from_utf8_lossy(word).into_owned()).collect();
            words.first().is_some_and(|program| program == "ssh")
                && words.iter().any(|word| word == "-M")
                && words.iter().any(|word| word.starts_with(&dir))
        })
        .collect()
}

fn logins(cluster: &TestCluster, node: usize) -> usize {
    cluster.node(node).sshd_log().matches("Accepted publickey").count()
}

#[test]
fn a_second_command_rides_the_same_master_until_cluster_disconnect_closes_it() {
    let cluster = TestCluster::start_network_only(2);
    let head = Head::new();
    head.list_models(&cluster, &[], &[]);
    let masters = head.master_pids();
    assert_eq!(masters.len(), 2, "one master per node stays up after the command");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(head.masters_dir()).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o700, "the masters' directory is private");

    head.list_models(&cluster, &[], &[]);
    assert_eq!(head.master_pids(), masters, "the second command reused both masters");
    for node in [1, 2] {
        assert_eq!(logins(&cluster, node), 1, "one ssh login on node{node}:\n{}", cluster.node(node).sshd_log());
    }

    let closed = head.cluster(&cluster, &[], &["disconnect"]);
    assert!(closed.status.success(), "{}", stderr(&closed));
    let report = json(&closed);
    assert_eq!(report["nodes"][0], serde_json::json!({"node": "node1", "closed": true}), "{report}");
    assert_eq!(report["nodes"][1], serde_json::json!({"node": "node2", "closed": true}), "{report}");
    head.wait_for_no_master("after cluster disconnect");
    assert!(head.sockets().is_empty(), "no control socket left: {:?}", head.sockets());

    let again = head.cluster(&cluster, &[], &["disconnect"]);
    assert_eq!(again.status.code(), Some(0), "nothing to close is no failure: {}", stderr(&again));
    assert!(json(&again)["nodes"].as_array().unwrap().iter().all(|node| node["closed"] == false), "{}", json(&again));
}

#[test]
fn with_persistence_off_no_master_outlives_the_command() {
    let cluster = TestCluster::start_network_only(1);
    let head = Head::new();
    head.list_models(&cluster, &[("STRIX_SSH_PERSIST", "0")], &[]);
    head.wait_for_no_master("STRIX_SSH_PERSIST=0");
    head.list_models(&cluster, &[], &["--ssh-persist", "0"]);
    head.wait_for_no_master("--ssh-persist 0");
    assert_eq!(logins(&cluster, 1), 2, "each command logged in itself");
    assert!(head.sockets().is_empty());
}

#[test]
fn an_idle_master_ends_once_its_persist_time_is_over() {
    let cluster = TestCluster::start_network_only(1);
    let head = Head::new();
    head.list_models(&cluster, &[], &["--ssh-persist", "2"]);
    assert_eq!(head.master_pids().len(), 1);
    head.wait_for_no_master("2 s after the command");
    head.list_models(&cluster, &[], &["--ssh-persist", "2"]);
    assert_eq!(logins(&cluster, 1), 2, "the next command opened a new master");
}

#[test]
fn a_node_that_rebooted_gets_a_new_master() {
    let mut cluster = TestCluster::start_network_only(1);
    let head = Head::new();
    head.list_models(&cluster, &[], &[]);
    let before = head.master_pids();
    cluster.node_mut(1).reboot();
    head.list_models(&cluster, &[], &[]);
    let after = head.master_pids();
    assert_eq!(after.len(), 1);
    assert!(after.is_disjoint(&before), "a new master: {before:?} then {after:?}");
    assert_eq!(logins(&cluster, 1), 2, "{}", cluster.node(1).sshd_log());
}

/// The master survives (its connection is untouched) while what the node says of itself
/// changes: the head must not take the node's word from before. The boot id stands here for
/// anything the node says differently; the host key case is the next test.
#[test]
fn a_live_master_to_a_node_that_now_says_otherwise_is_replaced() {
    let cluster = TestCluster::start_network_only(1);
    let head = Head::new();
    head.list_models(&cluster, &[], &[]);
    let before = head.master_pids();
    cluster.node(1).new_boot_id();
    head.list_models(&cluster, &[], &[]);
    let after = head.master_pids();
    assert_eq!(after.len(), 1);
    assert!(after.is_disjoint(&before), "the old master was closed and a new one opened: {before:?} then {after:?}");
    assert_eq!(logins(&cluster, 1), 2, "{}", cluster.node(1).sshd_log());
    head.list_models(&cluster, &[], &[]);
    assert_eq!(head.master_pids(), after, "the new master is reused in turn");
}

#[test]
fn a_live_master_never_hides_a_changed_host_key() {
    let mut cluster = TestCluster::start_network_only(1);
    let head = Head::new();
    head.list_models(&cluster, &[], &[]);
    let before = head.master_pids();
    cluster.node_mut(1).replace_host_key_keeping_sessions();
    assert_eq!(head.master_pids(), before, "the old master still runs over its old connection");

    let refused = head.cluster(&cluster, &[], &["model", "list"]);
    let said = format!("{}{}", String::from_utf8_lossy(&refused.stdout), stderr(&refused));
    assert!(said.contains("host key has CHANGED"), "the host-key error, as a first login gives it: {said}");
    assert!(said.contains("ssh-keygen"), "with its fix: {said}");
    head.wait_for_no_master("after the refused login");
    assert_eq!(logins(&cluster, 1), 1, "nothing logged in with the new key:\n{}", cluster.node(1).sshd_log());
}

/// Two commands that start at the same moment: one opens the master, the other waits for it to
/// be recorded and rides it (never a second master fighting over the same socket).
#[test]
fn two_commands_at_once_share_one_master() {
    let cluster = TestCluster::start_network_only(1);
    let head = Head::new();
    std::thread::scope(|scope| {
        let runs: Vec<_> = (0..2).map(|_| scope.spawn(|| head.list_models(&cluster, &[], &[]))).collect();
        for run in runs {
            run.join().expect("a command failed");
        }
    });
    assert_eq!(head.master_pids().len(), 1, "one master for the node");
    assert_eq!(logins(&cluster, 1), 1, "{}", cluster.node(1).sshd_log());
}

/// A master whose connection died unseen (the node's answers vanish: no packet says so) still
/// answers on its control socket but carries nothing: the next command gives up on it within the
/// connect timeout and fails as a first login to a node that is down does.
#[test]
fn a_master_whose_node_went_silent_fails_within_the_connect_timeout() {
    let cluster = TestCluster::start_network_only(1);
    let head = Head::new();
    head.list_models(&cluster, &[], &[]);
    let before = head.master_pids();
    let node = cluster.node(1);
    let head_address = format!("{}/32", node.gateway);
    node.netns().ip(&["route", "add", "blackhole", &head_address]);
    assert_eq!(head.master_pids(), before, "the master has not noticed");
    let started = Instant::now();
    let failed = head.cluster(&cluster, &[], &["model", "list"]);
    let took = started.elapsed();
    node.netns().ip(&["route", "del", "blackhole", &head_address]);
    let said = format!("{}{}", String::from_utf8_lossy(&failed.stdout), stderr(&failed));
    assert!(!failed.status.success(), "{said}");
    assert!(said.contains("cannot reach node node1"), "named as down: {said}");
    // --connect-timeout 3: 3 s for the hello over the old master, 3 s for the new login.
    assert!(took < Duration::from_secs(12), "took {took:?}: {said}");
    assert!(head.master_pids().is_disjoint(&before), "the silent master was closed");
}
