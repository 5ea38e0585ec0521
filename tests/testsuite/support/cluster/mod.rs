//! A cluster of "nodes" on this machine (TESTBED.md, "A cluster in network namespaces"): each node
//! is a network namespace with a real sshd, reached from the test's namespace over its own
//! management veth, with its own podman API service, fake host tree and home directory.
//!
//! Layout of cluster slot S (one per running cluster, so tests run in parallel):
//! - namespaces `stxS-nodeI`; management veth `stxS-mI` (test side, 10.213.S.(4I+1)/30) to `mgmt0`
//!   (node side, 10.213.S.(4I+2)/30). 10.213.0.0/16 is this harness's; a node has no other route.
//! - RoCE link `enp194s0np0`, MTU 9000, in every node. Two nodes: a "DAC cable", one veth pair
//!   node1 ↔ node2, 192.168.100.1/30 and .2/30. Three or more: a "switch", a bridge in namespace
//!   `stxS-switch`, node I at 192.168.100.I/24 (every node reaches every peer, as with a real switch).
//! - ssh: `ssh -F cluster.ssh_config() nodeI` logs in as root with a test key; the node's sessions
//!   get `TestNode::env()` (sshd `SetEnv`): its podman (CONTAINER_HOST...), STRIX_HOST_ROOT, HOME
//!   and a PATH of `$HOME/.local/bin`, the node's bin dir (holding strix-toolbox), the system dirs.
//!
//! Everything is removed on drop, after a panic too; a slot is an flock, so one left by a killed
//! test is cleaned up by the next test that takes it.

use std::fs::{File, OpenOptions, TryLockError};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::host_tree;
use super::podman::PodmanService;
use super::registry::Registry;
use super::{stop_child, wait_until};

/// The E810 port's netdev, as the RoCE link is named in every node.
pub const ROCE_NETDEV: &str = "enp194s0np0";
pub const JUMBO_MTU: u32 = 9000;
/// The fixture each node's host tree is copied from (its RoCE port is rewired to the node's link).
const HOST_FIXTURE: &str = "strix-e810-healthy";
/// The fixture's active RoCE port and the netdev it names.
const FIXTURE_ROCE_PORT: &str = "sys/class/infiniband/rocep194s0f0/ports/1";
const FIXTURE_NETDEV: &str = "enp194s0f0";
/// Every wait for a service of the cluster.
const START_LIMIT: Duration = Duration::from_secs(15);

pub struct TestCluster {
    /// node1, node2, ... (index 0 is node1, the head).
    pub nodes: Vec<TestNode>,
    switch: Option<Netns>,
    dir: TempDir,
    slot: Slot,
}

pub struct TestNode {
    /// 1 for node1...
    pub index: usize,
    /// The ssh alias in the cluster's ssh config: `node1`, `node2`...
    pub name: String,
    pub netns: String,
    /// Where its sshd listens.
    pub mgmt_address: Ipv4Addr,
    /// Its address on `enp194s0np0` (and in its fake host tree's RoCE GID).
    pub roce_address: Ipv4Addr,
    /// Its sessions' HOME: `~/.local/bin` is per node.
    pub home: PathBuf,
    /// On its PATH; holds `strix-toolbox` unless removed.
    pub bin_dir: PathBuf,
    pub host_tree: TempDir,
    /// Its own podman API service (in the test's namespace, so it reaches the loopback registry).
    podman: Option<PodmanService>,
    dir: PathBuf,
    /// The test side of its management veth.
    host_link: String,
    sshd: Option<Child>,
    env: Vec<(String, String)>,
    netns_guard: Netns,
}

impl TestCluster {
    /// `nodes` nodes, each with its own podman service using `registry`.
    pub fn start(registry: &Registry, nodes: usize) -> TestCluster {
        TestCluster::build(Some(registry), nodes)
    }

    /// Nodes without podman: for tests of the transport and the network alone.
    pub fn start_network_only(nodes: usize) -> TestCluster {
        TestCluster::build(None, nodes)
    }

    fn build(registry: Option<&Registry>, count: usize) -> TestCluster {
        assert!((1..=8).contains(&count), "a test cluster has 1 to 8 nodes, not {count}");
        std::fs::create_dir_all("/run/sshd").expect("mkdir /run/sshd (sshd's privilege separation dir)");
        let slot = Slot::claim();
        // Short path: it ends up in unix socket paths.
        let dir = tempfile::Builder::new().prefix("stx-").tempdir_in("/tmp").expect("cluster dir");
        let mut cluster = TestCluster { nodes: Vec::new(), switch: None, dir, slot };
        let key = cluster.key_path();
        keygen(&key, "strix-test-client");
        std::fs::copy(key.with_extension("pub"), cluster.dir.path().join("authorized_keys")).expect("authorized_keys");
        for index in 1..=count {
            let node = TestNode::start(&cluster, index, registry);
            cluster.nodes.push(node);
        }
        cluster.wire_roce_links();
        cluster.write_ssh_config(&cluster.ssh_config(), &key);
        for node in &mut cluster.nodes {
            node.start_sshd();
        }
        cluster
    }

    /// For `ssh -F` / `--ssh-config`: `Host node1`... with the test key and the cluster's known_hosts.
    pub fn ssh_config(&self) -> PathBuf {
        self.dir.path().join("ssh_config")
    }

    /// `node1,node2,...` for `--nodes`.
    pub fn nodes_arg(&self) -> String {
        self.nodes.iter().map(|node| node.name.as_str()).collect::<Vec<_>>().join(",")
    }

    /// Node `index`, counting from 1 like the names.
    pub fn node(&self, index: usize) -> &TestNode {
        &self.nodes[index - 1]
    }

    pub fn node_mut(&mut self, index: usize) -> &mut TestNode {
        &mut self.nodes[index - 1]
    }

    /// An ssh config like `ssh_config()` but with a fresh key no node accepts.
    pub fn ssh_config_with_unauthorized_key(&self) -> PathBuf {
        let key = self.dir.path().join("stranger_ed25519");
        if !key.exists() {
            keygen(&key, "strix-test-stranger");
        }
        let config = self.dir.path().join("ssh_config.stranger");
        self.write_ssh_config(&config, &key);
        config
    }

    fn key_path(&self) -> PathBuf {
        self.dir.path().join("id_ed25519")
    }

    fn write_ssh_config(&self, path: &Path, key: &Path) {
        let known_hosts = self.dir.path().join("known_hosts");
        let mut text = String::new();
        for node in &self.nodes {
            text.push_str(&format!(
                "Host {}\n  HostName {}\n  User root\n  IdentityFile {}\n  IdentitiesOnly yes\n  \
                 UserKnownHostsFile {}\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking accept-new\n  \
                 BatchMode yes\n",
                node.name,
                node.mgmt_address,
                key.display(),
                known_hosts.display()
            ));
        }
        std::fs::write(path, text).expect("write ssh config");
    }

    /// The RoCE link: a cable between two nodes, a switch for more (see the module doc).
    fn wire_roce_links(&mut self) {
        let mtu = JUMBO_MTU.to_string();
        if let [first, second] = &self.nodes[..] {
            ip(&[
                "-n",
                &first.netns,
                "link",
                "add",
                ROCE_NETDEV,
                "mtu",
                &mtu,
                "type",
                "veth",
                "peer",
                "name",
                ROCE_NETDEV,
                "mtu",
                &mtu,
                "netns",
                &second.netns,
            ]);
        } else if self.nodes.len() > 2 {
            let switch = Netns::create(format!("stx{}-switch", self.slot.number));
            ip(&["-n", &switch.name, "link", "add", "br0", "mtu", &mtu, "type", "bridge"]);
            for node in &self.nodes {
                let port = format!("port{}", node.index);
                ip(&[
                    "-n",
                    &node.netns,
                    "link",
                    "add",
                    ROCE_NETDEV,
                    "mtu",
                    &mtu,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &port,
                    "mtu",
                    &mtu,
                    "netns",
                    &switch.name,
                ]);
                ip(&["-n", &switch.name, "link", "set", &port, "master", "br0", "up"]);
            }
            ip(&["-n", &switch.name, "link", "set", "br0", "up"]);
            self.switch = Some(switch);
        }
        let prefix = if self.nodes.len() == 2 { 30 } else { 24 };
        for node in &self.nodes {
            if self.nodes.len() > 1 {
                let address = format!("{}/{prefix}", node.roce_address);
                ip(&["-n", &node.netns, "addr", "add", &address, "dev", ROCE_NETDEV]);
                ip(&["-n", &node.netns, "link", "set", ROCE_NETDEV, "up"]);
            }
        }
    }
}

impl TestNode {
    fn start(cluster: &TestCluster, index: usize, registry: Option<&Registry>) -> TestNode {
        let slot = cluster.slot.number;
        let name = format!("node{index}");
        let netns_guard = Netns::create(format!("stx{slot}-{name}"));
        let netns = netns_guard.name.clone();
        let index_u8 = u8::try_from(index).expect("node index");
        let host_side = Ipv4Addr::new(10, 213, slot, 4 * index_u8 + 1);
        let mgmt_address = Ipv4Addr::new(10, 213, slot, 4 * index_u8 + 2);
        let host_link = format!("stx{slot}-m{index}");
        ip(&["link", "add", &host_link, "type", "veth", "peer", "name", "mgmt0", "netns", &netns]);
        ip(&["addr", "add", &format!("{host_side}/30"), "dev", &host_link]);
        ip(&["link", "set", &host_link, "up"]);
        ip(&["-n", &netns, "addr", "add", &format!("{mgmt_address}/30"), "dev", "mgmt0"]);
        ip(&["-n", &netns, "link", "set", "mgmt0", "up"]);
        ip(&["-n", &netns, "link", "set", "lo", "up"]);

        let dir = cluster.dir.path().join(&name);
        let home = dir.join("home");
        let bin_dir = dir.join("bin");
        for path in [&home, &bin_dir] {
            std::fs::create_dir_all(path).expect("mkdir node dir");
        }
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_strix-toolbox"), bin_dir.join("strix-toolbox"))
            .expect("strix-toolbox on the node's PATH");
        let roce_address = Ipv4Addr::new(192, 168, 100, index_u8);
        let host_tree = host_tree::materialize(HOST_FIXTURE);
        wire_host_tree(host_tree.path(), roce_address, JUMBO_MTU);

        let podman = registry.map(PodmanService::start);
        let mut env = match &podman {
            Some(podman) => podman.env(),
            None => {
                let runtime = dir.join("xdg");
                std::fs::create_dir_all(&runtime).expect("mkdir xdg");
                vec![("XDG_RUNTIME_DIR".to_string(), runtime.display().to_string())]
            }
        };
        let path = format!(
            "{}/.local/bin:{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            home.display(),
            bin_dir.display()
        );
        env.extend([
            ("STRIX_HOST_ROOT".to_string(), host_tree.path().display().to_string()),
            ("HOME".to_string(), home.display().to_string()),
            ("PATH".to_string(), path),
            // As `strix_command` sets them for a local run.
            ("NO_COLOR".to_string(), "1".to_string()),
            ("USER".to_string(), "alice".to_string()),
        ]);
        let node = TestNode {
            index,
            name,
            netns,
            mgmt_address,
            roce_address,
            home,
            bin_dir,
            host_tree,
            podman,
            dir,
            host_link,
            sshd: None,
            env,
            netns_guard,
        };
        keygen(&node.host_key(), &format!("{}-host", node.name));
        node.write_sshd_config(&cluster.dir.path().join("authorized_keys"));
        node
    }

    /// What the node's ssh sessions see (also usable to run strix-toolbox "on" the node locally).
    pub fn env(&self) -> Vec<(String, String)> {
        self.env.clone()
    }

    pub fn podman(&self) -> &PodmanService {
        self.podman.as_ref().expect("a cluster started with podman (TestCluster::start)")
    }

    /// "This node's podman is down": the API service stops, its storage stays.
    pub fn stop_podman(&mut self) {
        self.podman.as_mut().expect("a cluster with podman").stop();
    }

    pub fn start_podman(&mut self) {
        self.podman.as_mut().expect("a cluster with podman").restart();
    }

    /// A node without strix-toolbox (until something installs it in `~/.local/bin`).
    pub fn remove_strix_toolbox(&self) {
        std::fs::remove_file(self.bin_dir.join("strix-toolbox")).expect("remove strix-toolbox from the node");
    }

    /// The RoCE link's MTU, on the real veth and in the fake host tree alike.
    pub fn set_roce_mtu(&self, mtu: u32) {
        ip(&["-n", &self.netns, "link", "set", ROCE_NETDEV, "mtu", &mtu.to_string()]);
        std::fs::write(self.host_tree.path().join(format!("sys/class/net/{ROCE_NETDEV}/mtu")), format!("{mtu}\n"))
            .expect("write the fake tree's MTU");
    }

    /// Stop its sshd and end every session on it: new connections are refused.
    pub fn stop_sshd(&mut self) {
        if let Some(mut child) = self.sshd.take() {
            stop_child(&mut child);
        }
        self.netns_guard.end_processes();
    }

    /// (Re)start its sshd; returns once it listens.
    pub fn start_sshd(&mut self) {
        self.stop_sshd();
        let log = self.dir.join("sshd.log");
        let already = std::fs::read_to_string(&log).map(|text| text.len()).unwrap_or(0);
        let child = Command::new("ip")
            .args(["netns", "exec", &self.netns, "/usr/sbin/sshd", "-D", "-f"])
            .arg(self.dir.join("sshd_config"))
            .arg("-E")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sshd (scripts/test-deps.sh installs openssh-server)");
        self.sshd = Some(child);
        let sshd = self.sshd.as_mut().expect("just set");
        wait_until(&format!("sshd of {}", self.name), START_LIMIT, || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Ok(Some(status)) = sshd.try_wait() {
                panic!("sshd of the test node exited ({status}): {}", text.get(already..).unwrap_or(&text));
            }
            text.get(already..).is_some_and(|new| new.contains("Server listening on"))
        });
    }

    /// A new host key (as if the node were reinstalled): known_hosts now holds a changed key.
    pub fn replace_host_key(&mut self) {
        let key = self.host_key();
        for file in [key.clone(), key.with_extension("pub")] {
            let _ = std::fs::remove_file(file);
        }
        keygen(&key, &format!("{}-host-reinstalled", self.name));
        self.start_sshd();
    }

    /// Pull its management cable: packets to it vanish, so ssh times out (a node that is down).
    pub fn unplug(&self) {
        ip(&["-n", &self.netns, "link", "set", "mgmt0", "down"]);
    }

    /// Plug it back; the test side forgets the failed ARP lookups (else "No route to host" for a while).
    pub fn plug(&self) {
        ip(&["-n", &self.netns, "link", "set", "mgmt0", "up"]);
        ip(&["neigh", "flush", "dev", &self.host_link]);
    }

    /// The sshd log (for failure messages).
    pub fn sshd_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sshd.log")).unwrap_or_default()
    }

    fn host_key(&self) -> PathBuf {
        self.dir.join("ssh_host_ed25519_key")
    }

    fn write_sshd_config(&self, authorized_keys: &Path) {
        let set_env: Vec<String> = self
            .env
            .iter()
            .map(|(name, value)| {
                assert!(!value.contains(|c: char| c.is_whitespace() || c == '"'), "SetEnv value {value:?}");
                format!("{name}={value}")
            })
            .collect();
        let config = format!(
            "ListenAddress {}:22\nHostKey {}\nPidFile {}\nAuthorizedKeysFile {}\nPermitRootLogin prohibit-password\n\
             StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             PrintMotd no\nPrintLastLog no\nLogLevel VERBOSE\nSetEnv {}\n",
            self.mgmt_address,
            self.host_key().display(),
            self.dir.join("sshd.pid").display(),
            authorized_keys.display(),
            set_env.join(" ")
        );
        std::fs::write(self.dir.join("sshd_config"), config).expect("write sshd_config");
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        self.stop_sshd();
        // Then podman (its own Drop), the namespace and the host tree, in field order.
    }
}

/// The fixture's active RoCE port rewired to this node's link: netdev `enp194s0np0` with `mtu`,
/// and its RoCE v2 GIDs (IPv4-mapped, `::ffff:c0a8:64NN`) carrying `address`.
fn wire_host_tree(tree: &Path, address: Ipv4Addr, mtu: u32) {
    let port = tree.join(FIXTURE_ROCE_PORT);
    let old_netdev = tree.join("sys/class/net").join(FIXTURE_NETDEV);
    let new_netdev = tree.join("sys/class/net").join(ROCE_NETDEV);
    std::fs::rename(&old_netdev, &new_netdev).expect("rename the fixture's netdev");
    std::fs::write(new_netdev.join("mtu"), format!("{mtu}\n")).expect("write mtu");
    let [a, b, c, d] = address.octets();
    let mapped = format!("0000:0000:0000:0000:0000:ffff:{:02x}{:02x}:{:02x}{:02x}", a, b, c, d);
    for entry in std::fs::read_dir(port.join("gid_attrs/ndevs")).expect("fixture ndevs") {
        let slot = entry.expect("ndev entry").file_name();
        std::fs::write(port.join("gid_attrs/ndevs").join(&slot), format!("{ROCE_NETDEV}\n")).expect("write ndev");
        let gid = port.join("gids").join(&slot);
        let text = std::fs::read_to_string(&gid).expect("fixture gid");
        if text.contains(":ffff:") {
            std::fs::write(&gid, format!("{mapped}\n")).expect("write gid");
        }
    }
}

/// `ssh-keygen` an ed25519 key with no passphrase.
fn keygen(path: &Path, comment: &str) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .expect("ssh-keygen (scripts/test-deps.sh installs openssh-client)");
    assert!(status.success(), "ssh-keygen {} failed", path.display());
}

/// `ip ARGS`, failing the test with ip's message.
fn ip(args: &[&str]) {
    let output = Command::new("ip").args(args).stdin(Stdio::null()).output().expect("run ip (iproute2)");
    assert!(
        output.status.success(),
        "ip {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    );
}

/// A network namespace this test made; on drop, the processes in it end and it is deleted (which
/// deletes the veths in it, and so their peers).
struct Netns {
    name: String,
}

impl Netns {
    fn create(name: String) -> Netns {
        ip(&["netns", "add", &name]);
        Netns { name }
    }

    /// Processes in the namespace: only what this test's sshd started.
    fn pids(&self) -> Vec<i32> {
        let output = Command::new("ip").args(["netns", "pids", &self.name]).output().expect("ip netns pids");
        String::from_utf8_lossy(&output.stdout).split_whitespace().filter_map(|pid| pid.parse().ok()).collect()
    }

    /// SIGTERM every process in it, SIGKILL what is left after 5 s.
    fn end_processes(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut signal = libc::SIGTERM;
        loop {
            let pids = self.pids();
            if pids.is_empty() {
                return;
            }
            if Instant::now() >= deadline {
                if signal == libc::SIGKILL {
                    return;
                }
                signal = libc::SIGKILL;
            }
            for pid in pids {
                // SAFETY: plain kill(2) on a process in a namespace this test created.
                unsafe { libc::kill(pid, signal) };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.end_processes();
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// One of 256 cluster slots: its number picks the namespaces' names and the management subnet.
/// Held as an flock, released when the test (or its process) ends.
struct Slot {
    number: u8,
    _lock: File,
}

impl Slot {
    fn claim() -> Slot {
        let dir = Path::new("/tmp/strix-test-clusters");
        std::fs::create_dir_all(dir).expect("mkdir cluster slots");
        for number in 0..=u8::MAX {
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join(format!("{number}.lock")))
                .expect("open slot lock");
            match file.try_lock() {
                Ok(()) => {
                    let slot = Slot { number, _lock: file };
                    slot.remove_leftovers();
                    return slot;
                }
                Err(TryLockError::WouldBlock) => continue,
                Err(TryLockError::Error(error)) => panic!("lock cluster slot {number}: {error}"),
            }
        }
        panic!("all 256 test cluster slots are in use");
    }

    /// What a killed test left in this slot: its namespaces (with their processes) and links.
    fn remove_leftovers(&self) {
        let prefix = format!("stx{}-", self.number);
        let list = Command::new("ip").args(["netns", "list"]).output().expect("ip netns list");
        for name in String::from_utf8_lossy(&list.stdout).lines().filter_map(|line| line.split_whitespace().next()) {
            if name.starts_with(&prefix) {
                drop(Netns { name: name.to_string() });
            }
        }
        let links = Command::new("ip").args(["-br", "link"]).output().expect("ip link");
        for name in String::from_utf8_lossy(&links.stdout).lines().filter_map(|line| line.split_whitespace().next()) {
            let name = name.split('@').next().unwrap_or(name);
            if name.starts_with(&prefix) {
                let _ = Command::new("ip").args(["link", "del", name]).status();
            }
        }
    }
}
