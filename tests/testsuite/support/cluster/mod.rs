//! A cluster of "nodes" on this machine (TESTBED.md, "A cluster in network namespaces"): each node
//! is a network namespace with a real sshd and its own podman API service running inside it, a
//! fake host tree and a home directory, reached from the test's namespace over its own management
//! veth.
//!
//! Layout of cluster slot S (one per running cluster, so tests run in parallel):
//! - namespaces `stxS-nodeI`; management veth `stxS-mI` (test side, 10.213.S.(4I+1)/30) to `mgmt0`
//!   (node side, 10.213.S.(4I+2)/30). 10.213.0.0/16 is this harness's; a node has no other route.
//! - the cluster link, a [`Link`]: RoCE (`enp194s0np0`: a cable for two nodes, a switch for more)
//!   or Thunderbolt (`thunderbolt0` on a switch), in namespace `stxS-switch` when switched.
//! - the uplink, [`ClusterUplink`]: the only way from a node to services on the machine's
//!   loopback. A cluster started with a registry forwards the registry's port, so a node's podman
//!   pulls `127.0.0.1:PORT/...` through it.
//! - ssh: `ssh -F cluster.ssh_config() nodeI` logs in as root with a test key; the node's sessions
//!   get `TestNode::env()` (sshd `SetEnv`): its podman (CONTAINER_HOST...), STRIX_HOST_ROOT, HOME
//!   and a PATH of `$HOME/.local/bin`, the node's bin dir (holding strix-toolbox), the system dirs.
//!   A node may run dockerd instead ([`TestCluster::start_with_engines`]; DOCKER_HOST and
//!   STRIX_CONTAINER_ENGINE=docker in its sessions).
//! - the spread's registry: `spread_port()` is this slot's own port, so clusters running at once
//!   never share the `certs.d/HOST:PORT` directories they install in the machine's one /etc; those
//!   directories go when the cluster does.
//!
//! ```ignore
//! let registry = Registry::start();
//! let cluster = TestCluster::start_with(&registry, 2, Link::Thunderbolt);
//! cluster.uplink().set_rate_limit(Some(1 << 20));
//! // ... `cluster refresh` ...
//! assert!(cluster.uplink().node_bytes_down(2) > 0);
//! ```
//!
//! Everything is removed on drop, after a panic too; a slot is an flock, so one left by a killed
//! test is cleaned up by the next test that takes it.

mod link;
mod slot;
mod uplink;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

pub use link::{Link, JUMBO_MTU, ROCE_NETDEV, THUNDERBOLT_MTU, THUNDERBOLT_NETDEV};
pub use uplink::ClusterUplink;

use super::cli::STRIX;
use super::docker::DockerDaemon;
use super::host_tree;
use super::netns::{ip, NetNs};
use super::podman::PodmanService;
use super::registry::Registry;
use super::wait_until;
use slot::Slot;

/// Every wait for a service of the cluster.
const START_LIMIT: Duration = Duration::from_secs(15);

pub struct TestCluster {
    /// First to go: its relays and routes end before the namespaces do.
    uplink: ClusterUplink,
    /// node1, node2, ... (index 0 is node1, the head).
    pub nodes: Vec<TestNode>,
    /// Held for its drop, which deletes the switch (when the link has one).
    _switch: Option<NetNs>,
    dir: TempDir,
    /// Held for its drop, which frees the slot for the next cluster.
    slot: Slot,
}

/// The engine a node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeEngine {
    Podman,
    Docker,
}

pub struct TestNode {
    /// 1 for node1...
    pub index: usize,
    /// The ssh alias in the cluster's ssh config: `node1`, `node2`...
    pub name: String,
    /// Where its sshd listens.
    pub mgmt_address: Ipv4Addr,
    /// The test side of its management veth, where its uplink routes listen.
    pub gateway: Ipv4Addr,
    /// Its address on the cluster link (and in its fake host tree).
    pub link_address: Ipv4Addr,
    pub link: Link,
    /// Its sessions' HOME: `~/.local/bin` is per node.
    pub home: PathBuf,
    /// On its PATH; holds `strix-toolbox` unless removed.
    pub bin_dir: PathBuf,
    pub host_tree: TempDir,
    /// Its own podman API service, inside its namespace. Dropped before the namespace: its
    /// cleanup runs podman there.
    podman: Option<PodmanService>,
    /// Or its own dockerd, inside its namespace.
    docker: Option<DockerDaemon>,
    dir: PathBuf,
    /// The test side of its management veth.
    host_link: String,
    sshd: Option<Child>,
    env: Vec<(String, String)>,
    /// Last: dropping it ends whatever still runs inside and deletes its veths.
    netns: NetNs,
}

impl TestCluster {
    /// `nodes` RoCE nodes, each with its own podman service using `registry` through the uplink.
    pub fn start(registry: &Registry, nodes: usize) -> TestCluster {
        TestCluster::build(Some(registry), &vec![NodeEngine::Podman; nodes], Link::Roce)
    }

    /// `nodes` nodes on `link`, each with its own podman service using `registry` through the uplink.
    pub fn start_with(registry: &Registry, nodes: usize, link: Link) -> TestCluster {
        TestCluster::build(Some(registry), &vec![NodeEngine::Podman; nodes], link)
    }

    /// One node per entry of `engines`, each running that engine, on `link`.
    pub fn start_with_engines(registry: &Registry, engines: &[NodeEngine], link: Link) -> TestCluster {
        TestCluster::build(Some(registry), engines, link)
    }

    /// RoCE nodes without podman: for tests of the transport and the network alone.
    pub fn start_network_only(nodes: usize) -> TestCluster {
        TestCluster::build(None, &vec![NodeEngine::Podman; nodes], Link::Roce)
    }

    /// Nodes on `link` without podman.
    pub fn start_network_only_with(nodes: usize, link: Link) -> TestCluster {
        TestCluster::build(None, &vec![NodeEngine::Podman; nodes], link)
    }

    /// `nodes` nodes on `link` whose sessions all have node1's home as theirs, as nodes that
    /// mount one NFS /home do (each keeps its own host tree, machine id and podman).
    pub fn start_sharing_home(registry: &Registry, nodes: usize, link: Link) -> TestCluster {
        TestCluster::build_with(Some(registry), &vec![NodeEngine::Podman; nodes], link, true, None)
    }

    /// `nodes` nodes on `link` whose podman has `store` (the vLLM CPU image's, support/vllm_cpu.rs)
    /// beside its own storage: the image is on every node without a copy.
    pub fn start_with_store(registry: &Registry, nodes: usize, link: Link, store: &Path) -> TestCluster {
        TestCluster::build_with(Some(registry), &vec![NodeEngine::Podman; nodes], link, false, Some(store))
    }

    fn build(registry: Option<&Registry>, engines: &[NodeEngine], link: Link) -> TestCluster {
        TestCluster::build_with(registry, engines, link, false, None)
    }

    fn build_with(
        registry: Option<&Registry>,
        engines: &[NodeEngine],
        link: Link,
        one_home: bool,
        store: Option<&Path>,
    ) -> TestCluster {
        let count = engines.len();
        assert!((1..=8).contains(&count), "a test cluster has 1 to 8 nodes, not {count}");
        std::fs::create_dir_all("/run/sshd").expect("mkdir /run/sshd (sshd's privilege separation dir)");
        let slot = Slot::claim();
        remove_certs_d(spread_port_of(&slot));
        remove_certs_d(relay_port_of(&slot));
        // Short path: it ends up in unix socket paths.
        let dir = tempfile::Builder::new().prefix("stx-").tempdir_in("/tmp").expect("cluster dir");
        let key = dir.path().join("id_ed25519");
        keygen(&key, "strix-test-client");
        let authorized_keys = dir.path().join("authorized_keys");
        std::fs::copy(key.with_extension("pub"), &authorized_keys).expect("authorized_keys");
        let mut nodes: Vec<TestNode> = Vec::new();
        for index in 1..=count {
            let engine = engines[index - 1];
            let home = nodes.first().filter(|_| one_home).map(|head| head.home.clone());
            let registry = registry.map(|r| (r, engine));
            let setup = NodeSetup { link, registry, store, authorized_keys: &authorized_keys, shared_home: home };
            nodes.push(TestNode::start(slot.number, dir.path(), index, setup));
        }
        let switch = link.connect(slot.number, &nodes);
        for node in &nodes {
            link.wire_host_tree(node);
        }
        let uplink = ClusterUplink::new(&nodes, dir.path());
        if let Some(registry) = registry {
            uplink.forward(registry.port);
        }
        let mut cluster = TestCluster { uplink, nodes, _switch: switch, dir, slot };
        cluster.write_ssh_config(&cluster.ssh_config(), &key);
        for node in &mut cluster.nodes {
            node.start_sshd();
        }
        cluster
    }

    /// The one way out of the cluster: byte counts, rate limit, cutting a node off, and
    /// `forward(port)` for more upstream services.
    pub fn uplink(&self) -> &ClusterUplink {
        &self.uplink
    }

    /// The port of the head's registry (`--spread-port`): this slot's own.
    pub fn spread_port(&self) -> u16 {
        spread_port_of(&self.slot)
    }

    /// The port of the head's relay (`--spread-relay-port`): this slot's own, apart from every
    /// slot's registry port (the nodes' trust is kept per address and port).
    pub fn relay_port(&self) -> u16 {
        relay_port_of(&self.slot)
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

    /// An ssh config like `ssh_config()` whose every node is reached through its own namespace
    /// (`ProxyCommand nsenter --net=… socat`: sshd at its management address, from inside the
    /// node), so it works from the test's namespace and from inside any node's, where a node has
    /// no route to another's management address: how the cluster's head reaches the other nodes
    /// when it drives them (the router's starts on demand).
    pub fn ssh_config_from_any_node(&self) -> PathBuf {
        let config = self.dir.path().join("ssh_config.any_node");
        if !config.exists() {
            self.write_ssh_config_with(&config, &self.dir.path().join("id_ed25519"), true);
        }
        config
    }

    fn write_ssh_config(&self, path: &Path, key: &Path) {
        self.write_ssh_config_with(path, key, false);
    }

    fn write_ssh_config_with(&self, path: &Path, key: &Path, through_namespace: bool) {
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
            if through_namespace {
                let netns = node.netns().name();
                text.push_str(&format!("  ProxyCommand nsenter --net=/run/netns/{netns} socat STDIO TCP:%h:%p\n"));
            }
        }
        std::fs::write(path, text).expect("write ssh config");
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        remove_certs_d(self.spread_port());
        remove_certs_d(self.relay_port());
    }
}

/// Slot S's registry port.
fn spread_port_of(slot: &Slot) -> u16 {
    15000 + u16::from(slot.number)
}

/// Slot S's relay port.
fn relay_port_of(slot: &Slot) -> u16 {
    16000 + u16::from(slot.number)
}

/// The cluster CAs a spread installed for registries on `port` (`/etc/*/certs.d/ADDRESS:PORT`).
fn remove_certs_d(port: u16) {
    for certs_d in ["/etc/containers/certs.d", "/etc/docker/certs.d"] {
        let Ok(entries) = std::fs::read_dir(certs_d) else { continue };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().ends_with(&format!(":{port}")) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// What a node is started with.
struct NodeSetup<'a> {
    link: Link,
    /// Its engine and the registry it pulls from (None: no engine).
    registry: Option<(&'a Registry, NodeEngine)>,
    /// A read-only image store beside its podman's own.
    store: Option<&'a Path>,
    authorized_keys: &'a Path,
    /// Another node's home, as its own (None: its own).
    shared_home: Option<PathBuf>,
}

impl TestNode {
    /// The namespace, management veth, directories, host tree, engine and sshd configuration of
    /// node `index`; its link, uplink and sshd come once every node exists.
    fn start(slot: u8, cluster_dir: &Path, index: usize, setup: NodeSetup) -> TestNode {
        let NodeSetup { link, registry, store, authorized_keys, shared_home } = setup;
        let name = format!("node{index}");
        let netns = NetNs::named(format!("stx{slot}-{name}"));
        let index_u8 = u8::try_from(index).expect("node index");
        let gateway = Ipv4Addr::new(10, 213, slot, 4 * index_u8 + 1);
        let mgmt_address = Ipv4Addr::new(10, 213, slot, 4 * index_u8 + 2);
        let host_link = format!("stx{slot}-m{index}");
        ip(&["link", "add", &host_link, "type", "veth", "peer", "name", "mgmt0", "netns", netns.name()]);
        ip(&["addr", "add", &format!("{gateway}/30"), "dev", &host_link]);
        ip(&["link", "set", &host_link, "up"]);
        netns.ip(&["addr", "add", &format!("{mgmt_address}/30"), "dev", "mgmt0"]);
        netns.ip(&["link", "set", "mgmt0", "up"]);

        let dir = cluster_dir.join(&name);
        let home = shared_home.unwrap_or_else(|| dir.join("home"));
        let bin_dir = dir.join("bin");
        for path in [&home, &bin_dir] {
            std::fs::create_dir_all(path).expect("mkdir node dir");
        }
        std::os::unix::fs::symlink(STRIX, bin_dir.join("strix-toolbox")).expect("strix-toolbox on the node's PATH");
        let host_tree = host_tree::materialize(link.fixture());

        let (mut podman, mut docker) = (None, None);
        let mut env = match registry {
            Some((registry, NodeEngine::Podman)) => {
                let service = match store {
                    Some(store) => PodmanService::start_in_with_store(registry, &netns, store),
                    None => PodmanService::start_in(registry, &netns),
                };
                podman.insert(service).env()
            }
            Some((registry, NodeEngine::Docker)) => {
                let mut env = docker.insert(DockerDaemon::start_in(registry.port, &netns)).env();
                env.push(("STRIX_CONTAINER_ENGINE".to_string(), "docker".to_string()));
                env
            }
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
            // As `support::cli` sets them for a local run.
            ("NO_COLOR".to_string(), "1".to_string()),
            ("USER".to_string(), "alice".to_string()),
        ]);
        let node = TestNode {
            index,
            name,
            mgmt_address,
            gateway,
            link_address: link.address(index),
            link,
            home,
            bin_dir,
            host_tree,
            podman,
            docker,
            dir,
            host_link,
            sshd: None,
            env,
            netns,
        };
        keygen(&node.host_key(), &format!("{}-host", node.name));
        node.write_sshd_config(authorized_keys);
        node.new_boot_id();
        node.new_machine_id();
        node
    }

    /// A machine id of its own in its host tree (etc/machine-id), as every installed system has.
    fn new_machine_id(&self) {
        let uuid = std::fs::read_to_string("/proc/sys/kernel/random/uuid").expect("a random uuid from the kernel");
        std::fs::create_dir_all(self.host_tree.path().join("etc")).expect("mkdir the tree's etc");
        std::fs::write(self.host_tree.path().join("etc/machine-id"), format!("{}\n", uuid.trim().replace('-', "")))
            .expect("write the tree's machine id");
    }

    /// Its machine id (what its own state is kept under).
    pub fn machine_id(&self) -> String {
        let id = std::fs::read_to_string(self.host_tree.path().join("etc/machine-id")).expect("the tree's machine id");
        id.trim().to_string()
    }

    /// What amdgpu says of its GPU memory in its host tree: nothing held (a watch's relaunch
    /// waits until nothing is).
    pub fn free_gpu_memory(&self) {
        let device = self.host_tree.path().join("sys/class/drm/card0/device");
        std::fs::write(device.join("mem_info_gtt_used"), "0\n").expect("the tree's GTT in use");
        std::fs::write(device.join("mem_info_vram_used"), "0\n").expect("the tree's VRAM in use");
    }

    /// Where its serving records and logs are: under its home's state, its own by its machine id.
    pub fn serving_dir(&self) -> PathBuf {
        self.home.join(".local/state/strix-toolbox/nodes").join(self.machine_id()).join("serving")
    }

    /// A boot id of its own in its host tree, as the kernel gives each boot (the namespaces share
    /// the machine's /proc/sys/kernel/random/boot_id; the node's strix-toolbox reads its tree's).
    pub fn new_boot_id(&self) {
        let dir = self.host_tree.path().join("proc/sys/kernel/random");
        std::fs::create_dir_all(&dir).expect("mkdir the tree's proc/sys/kernel/random");
        let id = std::fs::read_to_string("/proc/sys/kernel/random/uuid").expect("a random uuid from the kernel");
        std::fs::write(dir.join("boot_id"), id).expect("write the tree's boot id");
    }

    /// As if the node rebooted: every ssh session on it ends (their connections close), it gets
    /// a new boot id, and its sshd starts again.
    pub fn reboot(&mut self) {
        self.stop_sshd();
        self.new_boot_id();
        self.start_sshd();
    }

    /// What the node's ssh sessions see (also usable to run strix-toolbox "on" the node locally).
    pub fn env(&self) -> Vec<(String, String)> {
        self.env.clone()
    }

    /// Its network namespace (`netns().enter(program)` runs a program on the node).
    pub fn netns(&self) -> &NetNs {
        &self.netns
    }

    pub fn podman(&self) -> &PodmanService {
        self.podman.as_ref().expect("a cluster started with podman (TestCluster::start)")
    }

    pub fn docker(&self) -> &DockerDaemon {
        self.docker.as_ref().expect("a docker node (TestCluster::start_with_engines)")
    }

    /// Bytes the node received on its cluster link so far (the kernel's counter).
    pub fn link_bytes_received(&self) -> u64 {
        let output = Command::new("ip")
            .args(["-n", self.netns.name(), "-j", "-s", "link", "show", "dev", self.link.netdev()])
            .output()
            .expect("ip -s link");
        let links: serde_json::Value = serde_json::from_slice(&output.stdout).expect("ip -j");
        links[0]["stats64"]["rx"]["bytes"].as_u64().expect("rx bytes")
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

    /// The cluster link's MTU, on the real veth and in the fake host tree alike.
    pub fn set_link_mtu(&self, mtu: u32) {
        let netdev = self.link.netdev();
        self.netns.ip(&["link", "set", netdev, "mtu", &mtu.to_string()]);
        std::fs::write(self.host_tree.path().join(format!("sys/class/net/{netdev}/mtu")), format!("{mtu}\n"))
            .expect("write the fake tree's MTU");
    }

    /// Stop its sshd and end every session on it: new connections are refused. The node's other
    /// processes (podman, the uplink relays, containers) keep running.
    pub fn stop_sshd(&mut self) {
        if let Some(mut sshd) = self.sshd.take() {
            end_process_tree(&mut sshd);
        }
    }

    /// (Re)start its sshd; returns once it listens.
    pub fn start_sshd(&mut self) {
        self.stop_sshd();
        let log = self.dir.join("sshd.log");
        let already = std::fs::read_to_string(&log).map(|text| text.len()).unwrap_or(0);
        // `ip netns exec` (not nsenter): sessions then see the node's own /sys/class/net.
        let child = Command::new("ip")
            .args(["netns", "exec", self.netns.name(), "/usr/sbin/sshd", "-D", "-f"])
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

    /// A new host key, sshd restarted the way a service manager restarts it: only the listener
    /// ends, the sessions it started (a head's master among them) keep running.
    pub fn replace_host_key_keeping_sessions(&mut self) {
        if let Some(mut listener) = self.sshd.take() {
            let pid = i32::try_from(listener.id()).expect("pid");
            // SAFETY: kill(2) on the sshd listener this node started.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let _ = listener.wait();
        }
        let key = self.host_key();
        for file in [key.clone(), key.with_extension("pub")] {
            let _ = std::fs::remove_file(file);
        }
        keygen(&key, &format!("{}-host-rekeyed", self.name));
        self.start_sshd();
    }

    /// Pull its management cable: packets to it vanish, so ssh times out (a node that is down).
    /// Its uplink runs over the same cable.
    pub fn unplug(&self) {
        self.netns.ip(&["link", "set", "mgmt0", "down"]);
    }

    /// Plug it back; the test side forgets the failed ARP lookups (else "No route to host" for a while).
    pub fn plug(&self) {
        self.netns.ip(&["link", "set", "mgmt0", "up"]);
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
        // Then podman (its own Drop), the host tree and the namespace, in field order.
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

/// End `root` and every process under it (sshd's sessions): SIGTERM, SIGKILL what is left after
/// 5 s. Descendants are remembered as they are seen, as an orphan moves to another parent.
fn end_process_tree(root: &mut Child) {
    let root_pid = i32::try_from(root.id()).expect("pid");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut tree = vec![root_pid];
    let mut signal = libc::SIGTERM;
    loop {
        for pid in descendants(root_pid) {
            if !tree.contains(&pid) {
                tree.push(pid);
            }
        }
        let _ = root.try_wait();
        tree.retain(|pid| is_running(*pid));
        if tree.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            if signal == libc::SIGKILL {
                break;
            }
            signal = libc::SIGKILL;
        }
        for pid in &tree {
            // SAFETY: kill(2) on our sshd and the processes it started.
            unsafe { libc::kill(*pid, signal) };
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = root.wait();
}

/// Every process under `root`, from the parent pids in /proc.
fn descendants(root: i32) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .filter_map(|pid| Some((pid, parent_of(pid)?)))
                .collect()
        })
        .unwrap_or_default();
    let mut found = vec![root];
    let mut index = 0;
    while index < found.len() {
        let parent = found[index];
        found.extend(parents.iter().filter(|(_, ppid)| *ppid == parent).map(|(pid, _)| *pid));
        index += 1;
    }
    found.remove(0);
    found
}

/// The parent pid, from `/proc/PID/stat` (the field after the `(comm)`, which may hold spaces).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// Alive and not a zombie.
fn is_running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().next() != Some("Z")))
        .unwrap_or(false)
}
