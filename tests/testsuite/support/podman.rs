//! A private podman: its own storage, configuration and API service (TESTBED.md: runc, not crun;
//! default ulimits within this machine's hard limits; the loopback registry marked insecure).
//! A test cluster's node runs its podman inside the node's network namespace.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use super::netns::{self, NetNs};
use super::registry::Registry;
use super::user::TestUser;
use super::{stop_child, wait_until};

pub struct PodmanService {
    /// `None` while stopped (see `stop`).
    child: Option<Child>,
    pub socket: PathBuf,
    env: Vec<(String, String)>,
    dir: tempfile::TempDir,
    /// Who runs it: root, or the rootless test user.
    pub user: Option<TestUser>,
    /// The network namespace it runs in (`None`: the test's own).
    netns: Option<String>,
    /// Whether it (and every container it runs) has a /dev/shm of its own, as a machine of its
    /// own has: vLLM tells the ranks on one node by a segment they all see in /dev/shm
    /// (`in_the_same_node_as`), so nodes sharing this machine's would be one node to it.
    own_shm: bool,
}

/// sh: a tmpfs of its own on /dev/shm (this mount namespace's alone), then the command.
const OWN_SHM: &str = "mount -t tmpfs -o mode=1777,size=8g strix-node-shm /dev/shm && exec \"$@\"";

impl PodmanService {
    pub fn start(registry: &Registry) -> PodmanService {
        PodmanService::start_as(registry, None, None)
    }

    /// A rootless podman: its service, storage and CLI all run as `user`.
    pub fn start_rootless(registry: &Registry, user: &TestUser) -> PodmanService {
        PodmanService::start_as(registry, Some(user.clone()), None)
    }

    /// A node's podman: its service and CLI run inside `netns`, so its `--network host`
    /// containers see the node's interfaces, and it reaches the registry as the node does (the
    /// cluster's uplink forwards the registry's port into the namespace).
    pub fn start_in(registry: &Registry, netns: &NetNs) -> PodmanService {
        PodmanService::start_as(registry, None, Some(netns.name().to_string()))
    }

    /// A node's podman with `store` (a podman storage of overlay layers, the vLLM CPU image's)
    /// beside its own as a read-only additional image store: its images are there without a
    /// copy, and a pull of one of them moves only its manifest and config. Overlay, as the store
    /// is, and as a container of a 6 GB image wants (vfs would copy it per container).
    pub fn start_in_with_store(registry: &Registry, netns: &NetNs, store: &Path) -> PodmanService {
        PodmanService::start_with(registry, None, Some(netns.name().to_string()), Some(store))
    }

    /// The same in the test's own namespace: one node, on the machine's network.
    pub fn start_with_store(registry: &Registry, store: &Path) -> PodmanService {
        PodmanService::start_with(registry, None, None, Some(store))
    }

    fn start_as(registry: &Registry, user: Option<TestUser>, netns: Option<String>) -> PodmanService {
        PodmanService::start_with(registry, user, netns, None)
    }

    fn start_with(
        registry: &Registry,
        user: Option<TestUser>,
        netns: Option<String>,
        store: Option<&Path>,
    ) -> PodmanService {
        assert!(
            user.is_none() || netns.is_none(),
            "nsenter needs root: a rootless podman runs in the test's namespace"
        );
        // Short path: unix socket paths are limited to ~108 bytes.
        let dir = tempfile::Builder::new().prefix("pm-").tempdir_in("/tmp").expect("tempdir");
        let root = dir.path();
        let write = |name: &str, text: String| {
            let path = root.join(name);
            std::fs::write(&path, text).expect("write podman config");
            path.display().to_string()
        };
        let containers_conf = write(
            "containers.conf",
            format!(
                "[containers]\ndefault_ulimits = [\"nofile=1024:1024\", \"nproc=1024:1024\"]\nnetns = \"host\"\n\
                 [engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n\
                 events_logfile_path = \"{0}/events.log\"\ntmp_dir = \"{0}/tmp\"\nvolume_path = \"{0}/volumes\"\n\
                 lock_type = \"file\"\n",
                root.display()
            ),
        );
        let registries_conf =
            write("registries.conf", format!("[[registry]]\nlocation = \"{}\"\ninsecure = true\n", registry.host()));
        let storage_conf = write(
            "storage.conf",
            match store {
                // Rootless podman ignores graphroot and would share ~/.local/share with every other testbed.
                None => format!(
                    "[storage]\ndriver = \"vfs\"\ngraphroot = \"{0}/graph\"\nrunroot = \"{0}/run\"\n\
                     rootless_storage_path = \"{0}/graph\"\n",
                    root.display()
                ),
                Some(store) => format!(
                    "[storage]\ndriver = \"overlay\"\ngraphroot = \"{0}/graph\"\nrunroot = \"{0}/run\"\n\
                     [storage.options]\nadditionalimagestores = [\"{1}\"]\n",
                    root.display(),
                    store.display()
                ),
            },
        );
        let socket = root.join("podman.sock");
        let runtime_dir = root.join("xdg");
        std::fs::create_dir_all(&runtime_dir).expect("mkdir xdg");
        let env = vec![
            ("CONTAINERS_CONF".to_string(), containers_conf),
            ("CONTAINERS_REGISTRIES_CONF".to_string(), registries_conf),
            ("CONTAINERS_STORAGE_CONF".to_string(), storage_conf),
            ("CONTAINER_HOST".to_string(), format!("unix://{}", socket.display())),
            // Locks and the default podman socket path stay inside the testbed.
            ("XDG_RUNTIME_DIR".to_string(), runtime_dir.display().to_string()),
        ];
        if let Some(user) = &user {
            user.give(root);
        }
        let own_shm = netns.is_some() && store.is_some();
        let mut service = PodmanService { child: None, socket, env, dir, user, netns, own_shm };
        service.spawn();
        service
    }

    fn spawn(&mut self) {
        let log = self.dir.path().join("service.log");
        let mut command = if self.own_shm {
            let mut command = self.program("unshare");
            command.args(["--mount", "--propagation", "private", "sh", "-c", OWN_SHM, "sh", "podman"]);
            command
        } else {
            self.program("podman")
        };
        let child = command
            .args(["system", "service", "--time=0"])
            .arg(format!("unix://{}", self.socket.display()))
            // With CONTAINER_HOST set, podman would act as a remote client.
            .envs(self.env.iter().filter(|(k, _)| k != "CONTAINER_HOST").map(|(k, v)| (k.as_str(), v.as_str())))
            // podman system service exits at once without stdin from /dev/null.
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("service log"))
            .spawn()
            .expect("start podman system service (scripts/test-deps.sh installs podman)");
        self.child = Some(child);
        let probe = self.socket.clone();
        wait_until("podman service", Duration::from_secs(20), || {
            let up = std::os::unix::net::UnixStream::connect(&probe).is_ok();
            if !up && child_exited(&log) {
                panic!("podman system service failed: {}", std::fs::read_to_string(&log).unwrap_or_default());
            }
            up
        });
    }

    /// Take the API service down (storage and containers stay): "this node's podman is down".
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Waits for the exit: the old service deletes its socket as it goes, which could be
            // the new one's socket (TESTBED.md).
            stop_child(&mut child);
        }
    }

    /// Bring the API service back on the same socket and storage.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// The API service's pid (it listens on the socket itself: the engine's own process).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the podman service runs").id()
    }

    /// What the strix-toolbox binary, podman and toolbox need to share this testbed.
    pub fn env(&self) -> Vec<(String, String)> {
        self.env.clone()
    }

    /// `program` (podman, toolbox) as this testbed's user, on its storage through the local podman
    /// (with CONTAINER_HOST podman would act as a remote client), as from a login session (SHELL).
    /// A node's runs on the node: what it pulls or pushes crosses the node's uplink.
    pub fn local_command(&self, program: &str) -> Command {
        let mut command = self.program(program);
        command
            .envs(self.env.iter().filter(|(k, _)| k != "CONTAINER_HOST").map(|(k, v)| (k.as_str(), v.as_str())))
            .env("SHELL", "/bin/sh")
            .stdin(Stdio::null());
        command
    }

    /// `program` where this podman runs: as its user, in its network namespace.
    fn program(&self, program: &str) -> Command {
        match (&self.user, &self.netns) {
            (Some(user), _) => {
                let mut command = Command::new(program);
                user.run_as(&mut command);
                command
            }
            (None, Some(netns)) => netns::enter(netns, program),
            (None, None) => Command::new(program),
        }
    }

    /// Run the podman CLI against this testbed's storage (argv, no shell).
    pub fn podman(&self, args: &[&str]) -> Output {
        self.local_command("podman").args(args).output().expect("run podman")
    }

    /// Run the podman CLI as a remote client of this service, from the test's namespace: what it
    /// creates runs where the service runs (a node's: in the node's network namespace).
    pub fn remote(&self, args: &[&str]) -> Output {
        let mut command = Command::new("podman");
        if let Some(user) = &self.user {
            user.run_as(&mut command);
        }
        command
            .args(["--remote", "--url"])
            .arg(format!("unix://{}", self.socket.display()))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run podman --remote")
    }

    /// Run podman and return its trimmed stdout, failing the test on a non-zero exit.
    pub fn podman_ok(&self, args: &[&str]) -> String {
        let output = self.podman(args);
        assert!(output.status.success(), "podman {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    /// `podman inspect NAME` as JSON (the first element). `ExecIDs` (verify's exec sessions) come
    /// in no particular order: sorted, so two inspections of an unchanged container compare equal.
    pub fn inspect(&self, name: &str) -> serde_json::Value {
        let text = self.podman_ok(&["container", "inspect", name]);
        let mut value: serde_json::Value = serde_json::from_str(&text).expect("inspect JSON");
        let mut container = value[0].take();
        if let Some(ids) = container["ExecIDs"].as_array_mut() {
            ids.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
        }
        container
    }

    /// The names of the processes that run in `container` (zombies excluded; the images have no
    /// pgrep), asked through the node's podman service. A container that does not run runs
    /// nothing; an exec that fails on one that runs is asked again (bounded), then fails the test
    /// saying why: a failed exec must never read as "nothing runs".
    pub fn processes_in(&self, container: &str) -> Vec<String> {
        let listing = "for f in /proc/[0-9]*/stat; do s=$(cat \"$f\" 2>/dev/null) || continue; \
                       case $s in *\") \"[ZX]*) ;; *) c=${s#*\\(}; echo \"${c%%)*}\";; esac; done";
        let mut failures = Vec::new();
        for _ in 0..3 {
            let output = self.remote(&["exec", container, "sh", "-c", listing]);
            if output.status.success() {
                let names: Vec<String> = String::from_utf8_lossy(&output.stdout).lines().map(str::to_string).collect();
                if names.is_empty() {
                    eprintln!(
                        "processes_in({container}): the listing ran and found nothing: {}",
                        String::from_utf8_lossy(&output.stderr).trim()
                    );
                }
                return names;
            }
            // Only an answer that it is stopped or gone is "nothing runs": an inspect that fails
            // under load is one more failure.
            let state = self.remote(&["container", "inspect", "--format", "{{.State.Running}}", container]);
            let (said, why) = (String::from_utf8_lossy(&state.stdout), String::from_utf8_lossy(&state.stderr));
            if (state.status.success() && said.trim() == "false") || why.contains("no such container") {
                // Said, so a test that expected something running shows why nothing did.
                eprintln!(
                    "processes_in({container}): exec failed ({}), and the container is not running: {} {}",
                    String::from_utf8_lossy(&output.stderr).trim(),
                    said.trim(),
                    why.trim()
                );
                return Vec::new();
            }
            failures.push(format!(
                "{} (inspect: {} {})",
                String::from_utf8_lossy(&output.stderr).trim(),
                said.trim(),
                why.trim()
            ));
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
        panic!("podman exec {container} failed while it runs: {failures:?}");
    }

    /// Names of every container in this testbed.
    pub fn container_names(&self) -> Vec<String> {
        self.podman_ok(&["ps", "-a", "--format", "{{.Names}}"]).lines().map(str::to_string).collect()
    }
}

/// The service logs "Error" and exits when its configuration is wrong.
fn child_exited(log: &Path) -> bool {
    std::fs::read_to_string(log).is_ok_and(|text| text.contains("Error"))
}

impl Drop for PodmanService {
    fn drop(&mut self) {
        // Containers first (a started one holds runc processes), then the service.
        let _ = self.podman(&["rm", "--all", "--force", "--time", "0"]);
        self.stop();
        // podman 4.3 leaves one conmon per exec session running after the container is gone;
        // every process of this testbed names its directory.
        // SIGKILL: a terminated conmon would first run podman's cleanup, re-creating files here.
        let _ = Command::new("pkill").arg("-9").arg("-f").arg(self.dir.path()).status();
        if self.user.is_some() {
            super::user::stop_processes_in(self.dir.path());
        }
        // vfs layers can be read-only directories; make them removable.
        let _ = Command::new("chmod").args(["-R", "u+w"]).arg(self.dir.path()).status();
    }
}
