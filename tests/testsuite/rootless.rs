//! Rootless podman, as most people run their toolboxes: the service, storage and our binary all
//! run as an unprivileged user. The engine is recognised as rootless, the native toolbox keeps the
//! user's uid inside (keep-id), a node with RDMA but a capped memlock is refused before anything
//! is created, and Distrobox's container keeps our flags and memlock.

use tempfile::TempDir;

use crate::support::cli::{json, refresh_vllm, stderr};
use crate::support::host_tree::materialize;
use crate::support::image::stand_in_image;
use crate::support::podman::PodmanService;
use crate::support::registry::Registry;
use crate::support::user::{open_to_all, BinaryFor, TestUser};

/// A rootless testbed: the user, our binary for them, their podman service with the stand-in
/// image in a loopback registry, and a fake host tree they can read.
struct RootlessBed {
    user: TestUser,
    strix: BinaryFor,
    podman: PodmanService,
    _registry: Registry,
    image: String,
    host: TempDir,
}

impl RootlessBed {
    fn start(fixture: &str) -> RootlessBed {
        let user = TestUser::rootless();
        let strix = BinaryFor::new(&user);
        let registry = Registry::start();
        let podman = PodmanService::start_rootless(&registry, &user);
        let image = stand_in_image(&podman, &registry, "kyuz0/vllm:latest", "2026-11-01T10:00:00Z");
        let host = materialize(fixture);
        open_to_all(host.path());
        RootlessBed { user, strix, podman, _registry: registry, image, host }
    }

    fn host(&self) -> &str {
        self.host.path().to_str().unwrap()
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        self.strix.run(&self.podman.env(), args)
    }
}

#[test]
fn rootless_podman_gets_a_keep_id_toolbox_that_runs_as_the_user() {
    let bed = RootlessBed::start("strix-thunderbolt-only");
    let (user, podman) = (&bed.user, &bed.podman);

    // Rootless on runc (this machine): `--group-add 105` is gid 105 of the user namespace, not the
    // host's, so the render node stays closed; only crun's keep-groups would keep the host gid.
    // Verification opens the device inside and refuses the toolbox, naming it.
    let verified = bed.run(&refresh_vllm(bed.host(), &bed.image, &[]));
    assert_eq!(verified.status.code(), Some(1));
    let message = stderr(&verified);
    assert!(message.contains("device:/dev/dri/renderD128") && message.contains("Permission denied"), "{message}");
    assert!(podman.container_names().is_empty(), "nothing may be left: {:?}", podman.container_names());

    let args = refresh_vllm(bed.host(), &bed.image, &["--json", "--no-verify"]);
    let output = bed.run(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = json(&output);
    assert_eq!(summary["action"], "created", "{summary:#}");

    let inspect = podman.inspect("vllm");
    // keep-id (podman 4.3 reports UsernsMode "private"): the user's uid maps to itself inside, i.e.
    // to uid 0 of the rootless namespace, which is the user on the host.
    let uid_map = inspect["HostConfig"]["IDMappings"]["UidMap"].to_string();
    assert!(uid_map.contains(&format!("\"{}:0:1\"", user.uid)), "{uid_map}");
    assert_eq!(inspect["Config"]["User"], format!("{}:{}", user.uid, user.gid), "runs as the invoking user");

    // Inside, the user is themself (keep-id), the GPU nodes are there (rootless podman bind-mounts
    // them, so inspect lists no Devices), and a command's output and exit code come back.
    let probe = "id -u; test -c /dev/kfd && test -c /dev/dri/renderD128 && echo gpu-nodes; exit 9";
    let output = bed.run(&["enter", "vllm", "--", "sh", "-c", probe]);
    assert_eq!(output.status.code(), Some(9), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), format!("{}\ngpu-nodes\n", user.uid));

    // Nothing changed: a no-op.
    let output = bed.run(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json(&output)["action"], "unchanged");
}

#[test]
fn rootless_with_rdma_and_a_capped_memlock_is_refused_before_anything_is_created() {
    // RDMA devices, and a memlock hard limit of 8 MiB.
    let bed = RootlessBed::start("strix-misconfigured");
    let podman = &bed.podman;

    let output = bed.run(&refresh_vllm(bed.host(), &bed.image, &[]));
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("memlock") && message.contains("runs rootless"), "{message}");
    assert!(message.contains("/etc/security/limits.d/"), "names the fix: {message}");
    assert!(podman.container_names().is_empty(), "nothing was created");
}

#[test]
fn distrobox_keeps_our_flags_and_memlock_on_an_rdma_node() {
    // RDMA devices and an unlimited memlock: the spec asks for memlock=-1, which distrobox's own
    // `--ulimit host` would silently replace. (Created, not started: this machine's hard memlock
    // limit is 8 MiB, which no container here can exceed.)
    let bed = RootlessBed::start("strix-e810-healthy");
    let podman = &bed.podman;
    let args = ["--host-root", bed.host(), "--json", "refresh", "--image", &bed.image, "--name", "vllm"];
    let args = [&args[..], &["--manager", "distrobox", "--no-verify"]].concat();

    let output = bed.run(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json(&output)["action"], "created");
    assert_eq!(json(&output)["manager"], "distrobox");

    let inspect = podman.inspect("vllm");
    let ulimits = inspect["HostConfig"]["Ulimits"].as_array().cloned().unwrap_or_default();
    let memlock = ulimits.iter().find(|u| u["Name"] == "RLIMIT_MEMLOCK").unwrap_or_else(|| panic!("{ulimits:?}"));
    assert_eq!((memlock["Soft"].as_i64(), memlock["Hard"].as_i64()), (Some(-1), Some(-1)), "{memlock}");

    let create_command: Vec<String> = serde_json::from_value(inspect["Config"]["CreateCommand"].clone()).unwrap();
    assert!(!create_command.windows(2).any(|w| w == ["--ulimit", "host"]), "{create_command:?}");
    let root = bed.host().to_string();
    for flag in [
        ["--device".to_string(), format!("{root}/dev/kfd:/dev/kfd")],
        ["--device".into(), format!("{root}/dev/infiniband:/dev/infiniband")],
        ["--group-add".into(), "993".into()],
        ["--security-opt".into(), "seccomp=unconfined".into()],
        ["--ulimit".into(), "memlock=-1:-1".into()],
    ] {
        assert!(create_command.windows(2).any(|w| w == flag), "{flag:?} missing from {create_command:?}");
    }
    // Distrobox's own container stays: its label, its init as the entry point, the host's /dev.
    assert_eq!(inspect["Config"]["Labels"]["manager"], "distrobox", "distrobox's own label stays");
    assert_eq!(inspect["Config"]["Labels"]["io.github.strix-toolbox.manager"], "distrobox");
    assert!(create_command.windows(2).any(|w| w == ["--entrypoint", "/usr/bin/entrypoint"]), "{create_command:?}");

    let output = bed.run(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json(&output)["action"], "unchanged");
}
