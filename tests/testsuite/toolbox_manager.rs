//! The Toolbx manager with the real `toolbox` (and a D-Bus system bus): `toolbox enter` keeps
//! working AND the devices, groups, seccomp and memlock reach the container — which the seed's
//! `toolbox create -- <flags>` never achieved (Toolbx drops everything after `--`).

use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::support::cli::{json, run_strix, stderr, strix_command};
use crate::support::host_tree::materialize;
use crate::support::image::push_rootfs_image;
use crate::support::podman::PodmanService;
use crate::support::registry::Registry;
use crate::support::terminal::assert_interactive_shell;
use crate::support::toolbox_image::toolbox_rootfs_tar;
use crate::support::user::{open_to_all, stop_processes_in, BinaryFor, TestUser};
use crate::support::{stop_child, wait_until};

const BUS: &str = "/run/dbus/system_bus_socket";

/// The system bus Toolbx needs: one for every test that wants it, started here only when none is
/// running, stopped when the last test holding it is done (the tests run in parallel threads).
struct SystemBus(Option<Child>);

/// The bus the running tests share; empty while none holds it.
static SHARED_BUS: Mutex<Weak<SystemBus>> = Mutex::new(Weak::new());

impl SystemBus {
    fn ensure() -> Arc<SystemBus> {
        let mut shared = SHARED_BUS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(bus) = shared.upgrade() {
            return bus;
        }
        let bus = Arc::new(SystemBus::start_unless_running());
        *shared = Arc::downgrade(&bus);
        bus
    }

    fn start_unless_running() -> SystemBus {
        if UnixStream::connect(BUS).is_ok() {
            return SystemBus(None);
        }
        std::fs::create_dir_all("/run/dbus").unwrap();
        let _ = std::fs::remove_file(BUS);
        let child = Command::new("dbus-daemon")
            .args(["--system", "--nofork", "--nopidfile"])
            .stdin(Stdio::null())
            .spawn()
            .expect("start dbus-daemon (scripts/test-deps.sh installs dbus)");
        wait_until("system bus", Duration::from_secs(10), || UnixStream::connect(BUS).is_ok());
        SystemBus(Some(child))
    }
}

impl Drop for SystemBus {
    fn drop(&mut self) {
        // Under the lock: a test asking for the bus meanwhile waits, then starts a new one.
        let _shared = SHARED_BUS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(child) = &mut self.0 {
            stop_child(child);
        }
    }
}

fn toolbox_image(podman: &PodmanService, registry: &Registry) -> String {
    push_rootfs_image(
        podman,
        registry,
        "kyuz0/vllm-toolbx:latest",
        &toolbox_rootfs_tar(),
        &[("com.github.containers.toolbox", "true"), ("org.opencontainers.image.created", "2026-11-01T10:00:00Z")],
    )
}

fn refresh_with_toolbox(podman: &PodmanService, host: &Path, image: &str, name: &str) -> serde_json::Value {
    let args = [
        "--host-root",
        host.to_str().unwrap(),
        "--json",
        "refresh",
        "--image",
        image,
        "--name",
        name,
        "--manager",
        "toolbox",
        // Toolbx bind-mounts the host's /dev over ours: the fake host tree's device nodes are not
        // there (on a node, host root and /dev are one), so its toolbox cannot pass verify here.
        "--no-verify",
    ];
    let output = run_strix(&podman.env(), &args);
    assert!(output.status.success(), "{}", stderr(&output));
    json(&output)
}

fn strings(value: &serde_json::Value) -> Vec<String> {
    value.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
}

#[test]
fn toolbox_enter_works_and_the_flags_are_there() {
    let _bus = SystemBus::ensure();
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let image = toolbox_image(&podman, &registry);
    let host = materialize("strix-thunderbolt-only");

    let summary = refresh_with_toolbox(&podman, host.path(), &image, "vllm");
    assert_eq!(summary["action"], "created");
    assert_eq!(summary["manager"], "toolbox");

    let inspect = podman.inspect("vllm");
    let create_command = strings(&inspect["Config"]["CreateCommand"]);
    let root = host.path().display().to_string();
    for pair in [
        ["--device".to_string(), format!("{root}/dev/kfd:/dev/kfd")],
        ["--device".into(), format!("{root}/dev/dri:/dev/dri")],
        ["--group-add".into(), "39".into()],
        ["--group-add".into(), "105".into()],
        ["--security-opt".into(), "seccomp=unconfined".into()],
    ] {
        assert!(create_command.windows(2).any(|w| w == pair), "{pair:?} missing from {create_command:?}");
    }
    // Toolbx's own parts are still there: its label and its init-container entry point.
    assert!(create_command.iter().any(|a| a == "init-container"), "{create_command:?}");
    assert_eq!(inspect["Config"]["Labels"]["com.github.containers.toolbox"], "true");
    assert_eq!(inspect["Config"]["Labels"]["io.github.strix-toolbox.manager"], "toolbox");
    assert_eq!(inspect["HostConfig"]["GroupAdd"], serde_json::json!(["39", "105"]));
    assert!(inspect["HostConfig"]["SecurityOpt"].to_string().contains("seccomp=unconfined"));

    // And Toolbx itself still enters it (as from a login session, which always sets SHELL).
    let toolbox = podman
        .local_command("toolbox")
        .args(["run", "--container", "vllm", "cat", "/etc/os-release"])
        .output()
        .unwrap();
    assert!(toolbox.status.success(), "toolbox run failed: {}", String::from_utf8_lossy(&toolbox.stderr));
    assert!(String::from_utf8_lossy(&toolbox.stdout).contains("bookworm"));

    // strix-toolbox enter reaches it through the API too.
    let output = run_strix(&podman.env(), &["enter", "vllm", "--", "sh", "-c", "exit 7"]);
    assert_eq!(output.status.code(), Some(7), "{}", stderr(&output));

    // And bare `enter` is `toolbox enter`: an interactive shell on the terminal.
    assert_interactive_shell(strix_command(&podman.env(), &["enter", "vllm"]), 6, Duration::from_secs(120));

    // A second refresh is a no-op.
    assert_eq!(refresh_with_toolbox(&podman, host.path(), &image, "vllm")["action"], "unchanged");
}

#[test]
fn with_rdma_memlock_replaces_toolbx_ulimit_host() {
    let _bus = SystemBus::ensure();
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let image = toolbox_image(&podman, &registry);
    let host = materialize("strix-e810-healthy");

    refresh_with_toolbox(&podman, host.path(), &image, "vllm");
    let inspect = podman.inspect("vllm");
    let create_command = strings(&inspect["Config"]["CreateCommand"]);
    assert!(create_command.windows(2).any(|w| w == ["--ulimit", "memlock=-1:-1"]), "{create_command:?}");
    assert!(!create_command.windows(2).any(|w| w == ["--ulimit", "host"]), "`host` would win over memlock");
    let memlock = inspect["HostConfig"]["Ulimits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["Name"] == "RLIMIT_MEMLOCK")
        .cloned()
        .expect("memlock ulimit");
    assert_eq!((memlock["Soft"].as_i64(), memlock["Hard"].as_i64()), (Some(-1), Some(-1)));
    assert_eq!(inspect["HostConfig"]["GroupAdd"], serde_json::json!(["39", "105", "993"]));
    let env = inspect["Config"]["Env"].to_string();
    assert!(env.contains("NCCL_IB_GID_INDEX=3"), "{env}");
}

/// Toolbx's first run for a podman version runs `podman system migrate`, which restarts rootless
/// podman's user namespace under any API service already running; exec sessions then fail with
/// "error executing setns process" until the service restarts. A machine that has used Toolbx has
/// done this once; start from that state.
fn toolbx_has_run_before(user: &TestUser) {
    let dir = tempfile::Builder::new().prefix("tbx-first-run-").tempdir_in("/tmp").unwrap();
    // Throwaway storage too: podman's default one would remember this runtime dir for good.
    let storage_conf = dir.path().join("storage.conf");
    let storage = format!("[storage]\ndriver = \"vfs\"\nrootless_storage_path = \"{}/graph\"\n", dir.path().display());
    std::fs::write(&storage_conf, storage).unwrap();
    user.give(dir.path());
    let mut toolbox = Command::new("toolbox");
    user.run_as(&mut toolbox)
        .arg("list")
        .env("XDG_RUNTIME_DIR", dir.path())
        .env("CONTAINERS_STORAGE_CONF", &storage_conf)
        .env("SHELL", "/bin/sh");
    let output = toolbox.stdin(Stdio::null()).output().expect("run toolbox");
    stop_processes_in(dir.path());
    assert!(output.status.success(), "toolbox list: {}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn rootless_toolbx_gets_the_flags_and_still_enters() {
    let _bus = SystemBus::ensure();
    let user = TestUser::rootless();
    toolbx_has_run_before(&user);
    let strix = BinaryFor::new(&user);
    let registry = Registry::start();
    let podman = PodmanService::start_rootless(&registry, &user);
    let image = toolbox_image(&podman, &registry);
    let host = materialize("strix-thunderbolt-only");
    open_to_all(host.path());

    let args = ["--host-root", host.path().to_str().unwrap(), "--json", "refresh", "--image", &image];
    // --no-verify: Toolbx's /dev is the host's, without the fake tree's nodes (see refresh_with_toolbox).
    let toolbox = ["--name", "vllm", "--manager", "toolbox", "--no-verify"];
    let output = strix.run(&podman.env(), &[&args[..], &toolbox[..]].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json(&output)["action"], "created");

    let create_command = strings(&podman.inspect("vllm")["Config"]["CreateCommand"]);
    let root = host.path().display().to_string();
    for pair in [["--device".to_string(), format!("{root}/dev/kfd:/dev/kfd")], ["--group-add".into(), "39".into()]] {
        assert!(create_command.windows(2).any(|w| w == pair), "{pair:?} missing from {create_command:?}");
    }
    assert!(create_command.windows(2).any(|w| w == ["--userns", "keep-id"]), "Toolbx's own keep-id stays");

    // Toolbx runs commands as the user, and so does strix-toolbox enter.
    let toolbox = podman.local_command("toolbox").args(["run", "--container", "vllm", "id", "-u"]).output().unwrap();
    assert!(toolbox.status.success(), "toolbox run failed: {}", String::from_utf8_lossy(&toolbox.stderr));
    assert_eq!(String::from_utf8_lossy(&toolbox.stdout).trim(), user.uid.to_string());
    let output = strix.run(&podman.env(), &["enter", "vllm", "--", "id", "-u"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), user.uid.to_string());
}
