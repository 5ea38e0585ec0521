//! `refresh` end to end on a real podman API service with a loopback registry and a fake host
//! tree whose device nodes are real (mknod).

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

use crate::support::cli::{json, refresh_vllm, run_strix, stderr, strix_command};
use crate::support::host_tree::materialize;
use crate::support::image::stand_in_image;
use crate::support::podman::PodmanService;
use crate::support::registry::Registry;
use crate::support::wait_until;

const CREATED: &str = "2026-11-01T10:00:00Z";

fn refresh(podman: &PodmanService, host: &std::path::Path, image: &str, extra: &[&str]) -> std::process::Output {
    let host = host.to_str().unwrap();
    let mut args = refresh_vllm(host, image, &["--json"]);
    args.extend(extra);
    run_strix(&podman.env(), &args)
}

/// A registry with the stand-in image, a podman service, a host tree, and (for `refreshed`)
/// the toolbox already created from the image.
struct Bed {
    registry: Registry,
    podman: PodmanService,
    host: tempfile::TempDir,
    image: String,
}

impl Bed {
    fn new(fixture: &str) -> Bed {
        let registry = Registry::start();
        let podman = PodmanService::start(&registry);
        let image = stand_in_image(&podman, &registry, "kyuz0/vllm:latest", CREATED);
        Bed { registry, podman, host: materialize(fixture), image }
    }

    fn refreshed(fixture: &str) -> Bed {
        let bed = Bed::new(fixture);
        let output = bed.refresh(&[]);
        assert!(output.status.success(), "{}", stderr(&output));
        bed
    }

    fn refresh(&self, extra: &[&str]) -> std::process::Output {
        refresh(&self.podman, self.host.path(), &self.image, extra)
    }

    fn host_arg(&self) -> &str {
        self.host.path().to_str().unwrap()
    }
}

#[test]
fn creates_the_right_container_then_a_second_refresh_is_a_no_op() {
    let Bed { registry, podman, host, image } = Bed::new("strix-e810-healthy");

    let output = refresh(&podman, host.path(), &image, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = json(&output);
    assert_eq!(summary["action"], "created");
    assert_eq!(summary["pin"], "20261101-100000");

    let inspect = podman.inspect("vllm");
    let root = host.path().display().to_string();
    let devices: Vec<String> = inspect["HostConfig"]["Devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["PathInContainer"].as_str().unwrap().to_string())
        .collect();
    for device in
        ["/dev/kfd", "/dev/dri/renderD128", "/dev/dri/card0", "/dev/infiniband/uverbs0", "/dev/infiniband/rdma_cm"]
    {
        assert!(devices.iter().any(|d| d == device), "{device} missing from {devices:?}");
    }
    assert_eq!(inspect["HostConfig"]["GroupAdd"], serde_json::json!(["39", "105", "993"]));
    let ulimits = inspect["HostConfig"]["Ulimits"].to_string();
    assert!(ulimits.contains("RLIMIT_MEMLOCK") && ulimits.contains("-1") || ulimits.contains("memlock"), "{ulimits}");
    let security = inspect["HostConfig"]["SecurityOpt"].to_string();
    assert!(security.contains("seccomp=unconfined"), "{security}");
    assert_eq!(inspect["HostConfig"]["Privileged"], false);
    assert_eq!(inspect["HostConfig"]["NetworkMode"], "host");
    // (podman 4.3 reports IpcMode "shareable" even for host IPC; the enter test checks the real namespace.)
    let labels = &inspect["Config"]["Labels"];
    assert_eq!(labels["io.github.strix-toolbox.managed"], "true");
    assert_eq!(labels["io.github.strix-toolbox.pin"], "20261101-100000");
    assert_eq!(labels["io.github.strix-toolbox.image"], image);
    let env = inspect["Config"]["Env"].to_string();
    assert!(env.contains("NCCL_IB_GID_INDEX=3") && env.contains("NCCL_SOCKET_IFNAME==enp194s0f0"), "{env}");
    assert!(env.contains("NCCL_IB_HCA==rocep194s0f0:1") && !env.contains("NCCL_IB_DISABLE"), "{env}");
    let create_command = inspect["Config"]["CreateCommand"].to_string();
    assert!(create_command.contains(&format!("{root}/dev/kfd:/dev/kfd")), "{create_command}");
    // The image is pinned under its date so a later refresh cannot take it away.
    let repository = image.rsplit_once(':').unwrap().0;
    podman.podman_ok(&["image", "exists", &format!("{repository}:20261101-100000")]);

    let id = inspect["Id"].clone();
    let answered_before = registry.requests().len();
    let output = refresh(&podman, host.path(), &image, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = json(&output);
    assert_eq!(summary["action"], "unchanged", "{summary:#}");
    // The no-op asked the registry for the tag's digest (a manifest HEAD); the engine pulled nothing.
    assert_eq!(summary["pull"], false, "{summary:#}");
    let manifest = "/v2/kyuz0/vllm/manifests/latest";
    let asked = || registry.requests()[answered_before..].to_vec();
    wait_until("the registry's log of the HEAD", Duration::from_secs(5), || {
        asked().contains(&format!("HEAD {manifest}"))
    });
    let fetched = asked().into_iter().filter(|request| request.starts_with("GET ") && request.contains("/manifests/"));
    assert_eq!(fetched.collect::<Vec<_>>(), Vec::<String>::new(), "no pull by the engine");
    assert_eq!(summary["steps"], serde_json::json!([]));
    assert_eq!(podman.inspect("vllm")["Id"], id);
    assert_eq!(podman.container_names(), ["vllm"]);
}

/// A plan reads the model in the head's toolbox and asks its engine's build at once, each call
/// opening the stopped toolbox: the node's agent (as a cluster's head speaks to it) runs both,
/// and each starts the toolbox or finds it started. Libpod answers the later start 304; that was
/// an error, so the question failed and the plan assumed the head's GPU.
#[test]
fn two_calls_that_open_one_stopped_toolbox_at_once_both_run() {
    use std::io::{BufRead, BufReader, Write};

    // Without RDMA: its toolbox asks no memlock past this machine's limit, so it starts here.
    let bed = Bed::refreshed("strix-thunderbolt-only");
    let mut env = bed.podman.env();
    env.push(("STRIX_HOST_ROOT".into(), bed.host_arg().into()));
    for attempt in 0..3 {
        let _ = bed.podman.podman(&["stop", "-t", "0", "vllm"]);
        assert_eq!(bed.podman.inspect("vllm")["State"]["Running"], false, "stopped before attempt {attempt}");
        let mut agent = strix_command(&env, &["agent"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("strix-toolbox agent");
        let mut answers = BufReader::new(agent.stdout.take().expect("its stdout"));
        let mut hello = String::new();
        answers.read_line(&mut hello).expect("the agent's hello");
        let hello: serde_json::Value = serde_json::from_str(&hello).expect("a JSON hello");
        let head = json!({"head": {"version": hello["version"], "protocol": hello["protocol"]}});
        let exec = |id: u64| json!({"id": id, "call": {"call": "exec", "toolbox": "vllm", "argv": ["true"]}});
        let mut calls = agent.stdin.take().expect("its stdin");
        writeln!(calls, "{head}\n{}\n{}", exec(1), exec(2)).expect("the calls");
        for _ in 0..2 {
            let mut line = String::new();
            answers.read_line(&mut line).expect("an answer");
            let answer: serde_json::Value = serde_json::from_str(&line).expect("a JSON answer");
            assert_eq!(answer["outcome"]["ok"]["exit_code"], 0, "attempt {attempt}: {answer}");
        }
        drop(calls);
        assert!(agent.wait().expect("the agent ends").success());
        assert_eq!(bed.podman.inspect("vllm")["State"]["Running"], true);
    }
}

fn container_id(podman: &PodmanService, name: &str) -> String {
    podman.inspect(name)["Id"].as_str().unwrap().to_string()
}

#[test]
fn a_new_image_upstream_is_picked_up_and_the_old_one_stays_pinned_for_rollback() {
    let Bed { registry, podman, host, image } = Bed::refreshed("strix-thunderbolt-only");
    let first_id = container_id(&podman, "vllm");

    // Upstream publishes a newer image under the same tag; this refresh also sets an --env.
    stand_in_image(&podman, &registry, "kyuz0/vllm:latest", "2026-11-08T09:30:00Z");
    let output = refresh(&podman, host.path(), &image, &["--env", "HF_HOME=/models,shared"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = json(&output);
    assert_eq!(summary["action"], "recreated", "{summary:#}");
    assert!(summary["reason"].as_str().unwrap().contains("image changed"));
    assert_eq!(summary["pin"], "20261108-093000");
    assert_ne!(container_id(&podman, "vllm"), first_id);
    assert_eq!(podman.inspect("vllm")["Config"]["Labels"]["io.github.strix-toolbox.pin"], "20261108-093000");
    assert_eq!(podman.container_names(), ["vllm"], "old and temporary containers are gone");
    let repository = image.rsplit_once(':').unwrap().0;
    podman.podman_ok(&["image", "exists", &format!("{repository}:20261101-100000")]);

    // Rollback goes back to the previous pin.
    let output =
        run_strix(&podman.env(), &["--host-root", host.path().to_str().unwrap(), "--json", "rollback", "vllm"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json(&output)["pin"], "20261101-100000");
    let rolled_back = podman.inspect("vllm");
    assert_eq!(rolled_back["Config"]["Labels"]["io.github.strix-toolbox.pin"], "20261101-100000");
    // The same toolbox, only older: the --env it was made with comes along.
    let env = rolled_back["Config"]["Env"].as_array().unwrap();
    assert!(env.iter().any(|e| e == "HF_HOME=/models,shared"), "{env:?}");
}

#[test]
fn a_dead_registry_leaves_the_toolbox_exactly_as_it_was() {
    let mut bed = Bed::refreshed("strix-thunderbolt-only");
    let before = bed.podman.inspect("vllm");

    bed.registry.stop();
    let output = bed.refresh(&["--force"]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(message.contains("pull") && message.contains(&bed.image), "{message}");
    assert_eq!(bed.podman.inspect("vllm"), before);
    assert_eq!(bed.podman.container_names(), ["vllm"]);
}

#[test]
fn a_refused_create_leaves_the_toolbox_and_no_temporary_container() {
    let bed = Bed::refreshed("strix-thunderbolt-only");
    let before = bed.podman.inspect("vllm");

    // The engine refuses to bind-mount a home that does not exist.
    let mut env = bed.podman.env();
    env.push(("HOME".into(), "/nonexistent/home/alice".into()));
    let args = refresh_vllm(bed.host_arg(), &bed.image, &[]);
    let output = run_strix(&env, &args);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("create container vllm-strix-new") && message.contains("/nonexistent/home/alice"),
        "{message}"
    );
    assert_eq!(bed.podman.inspect("vllm"), before);
    assert_eq!(bed.podman.container_names(), ["vllm"]);
}

#[test]
fn dry_run_prints_the_plan_and_changes_nothing() {
    let Bed { registry: _registry, podman, host, image } = Bed::new("strix-e810-healthy");
    podman.podman_ok(&["pull", "-q", &image]);

    let host_arg = host.path().to_str().unwrap();
    let args = refresh_vllm(host_arg, &image, &["--dry-run"]);
    let output = run_strix(&podman.env(), &args);
    assert!(output.status.success(), "{}", stderr(&output));
    let plan = String::from_utf8_lossy(&output.stdout);
    for needle in [
        "pull",
        "pin the image",
        "podman create --name vllm-strix-new",
        "--ulimit memlock=-1:-1",
        "--security-opt seccomp=unconfined",
        "podman rename vllm-strix-new vllm",
    ] {
        assert!(plan.contains(needle), "{needle} missing from:\n{plan}");
    }
    assert!(podman.container_names().is_empty());
}

#[test]
fn list_and_rm_manage_only_our_toolboxes() {
    let Bed { registry: _registry, podman, image, host: _host } = Bed::refreshed("strix-thunderbolt-only");
    podman.podman_ok(&["create", "--name", "someone-else", &image, "sleep", "1"]);

    let listed = json(&run_strix(&podman.env(), &["--json", "list"]));
    let names: Vec<&str> = listed.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["vllm"]);
    assert_eq!(listed[0]["pin"], "20261101-100000");
    assert_eq!(listed[0]["manager"], "native");

    let output = run_strix(&podman.env(), &["rm", "someone-else"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("not made by strix-toolbox"));
    let output = run_strix(&podman.env(), &["rm", "vllm"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(podman.container_names(), ["someone-else"]);
}

#[test]
fn a_llama_cpp_toolbox_on_an_rdma_node_carries_its_devices_and_memlock_and_no_nccl() {
    // llama.cpp's RPC upgrades to RDMA in a build with it (GGML_RDMA_DEV/GGML_RDMA_GID, which the
    // launch sets, pick the device): its toolbox needs the node's RDMA devices and memlock.
    let Bed { registry: _registry, podman, host, image } = Bed::new("strix-e810-healthy");
    let host_arg = host.path().to_str().unwrap();
    let args = [
        "--host-root",
        host_arg,
        "--json",
        "refresh",
        "--engine",
        "llama.cpp",
        "--image",
        &image,
        "--name",
        "llama",
        "--manager",
        "native",
        // Unlimited memlock: this machine's engine cannot start it (TESTBED.md).
        "--no-verify",
    ];
    let output = run_strix(&podman.env(), &args);
    assert!(output.status.success(), "{}", stderr(&output));
    let inspect = podman.inspect("llama");
    let devices = inspect["HostConfig"]["Devices"].to_string();
    assert!(devices.contains("/dev/infiniband/uverbs0") && devices.contains("/dev/infiniband/rdma_cm"), "{devices}");
    assert!(!devices.contains("/dev/kfd"), "its tag is no ROCm build: {devices}");
    let ulimits = inspect["HostConfig"]["Ulimits"].as_array().cloned().unwrap_or_default();
    let memlock = ulimits.iter().find(|u| u["Name"] == "RLIMIT_MEMLOCK").unwrap_or_else(|| panic!("{ulimits:?}"));
    assert_eq!((memlock["Soft"].as_i64(), memlock["Hard"].as_i64()), (Some(-1), Some(-1)), "{memlock}");
    assert_eq!(inspect["HostConfig"]["GroupAdd"], serde_json::json!(["39", "105", "993"]), "rdma's group too");
    let env = inspect["Config"]["Env"].to_string();
    assert!(!env.contains("NCCL_") && !env.contains("GLOO_"), "no RCCL in a llama.cpp toolbox: {env}");
    assert_eq!(inspect["Config"]["Labels"]["io.github.strix-toolbox.engine"], "llama.cpp");
}

#[test]
fn a_rootful_engine_that_cannot_raise_memlock_is_refused_before_anything_is_staged() {
    // This machine's engine as it is (TESTBED.md): root in a container without CAP_SYS_RESOURCE,
    // hard memlock 8 MiB; the node's own session unlimited (the host tree's proc/self/limits).
    // The engine's /proc entry is found by its socket's listener: podman's service, this test's.
    let Bed { registry, podman, host, image } = Bed::new("strix-e810-healthy");
    let proc_dir = host.path().join(format!("proc/{}", podman.pid()));
    std::fs::create_dir_all(&proc_dir).unwrap();
    std::fs::write(
        proc_dir.join("limits"),
        "Limit                     Soft Limit           Hard Limit           Units     \n\
         Max locked memory         8388608              8388608              bytes     \n",
    )
    .unwrap();
    std::fs::write(proc_dir.join("status"), "Name:\tpodman\nCapEff:\t000001fffeffffff\n").unwrap();
    std::fs::write(proc_dir.join("uid_map"), "         0          0 4294967295\n").unwrap();

    let requests_before = registry.requests().len();
    let output = refresh(&podman, host.path(), &image, &[]);
    assert_eq!(output.status.code(), Some(1), "a failure, not a usage error: {}", stderr(&output));
    let error = json(&output);
    assert_eq!(error["error"]["kind"], "host", "{error}");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("podman's service (pid {})", podman.pid())), "{message}");
    assert!(message.contains("8388608 bytes (8 MiB)") && message.contains("no CAP_SYS_RESOURCE"), "{message}");
    assert!(error["error"]["fix"].as_str().unwrap_or_default().contains("LimitMEMLOCK=infinity"), "{error}");
    assert!(podman.container_names().is_empty(), "nothing staged");
    let pulled = registry.requests()[requests_before..].iter().any(|r| r.starts_with("GET ") && r.contains("/blobs/"));
    assert!(!pulled, "nothing pulled: {:?}", registry.requests());

    // A thunderbolt-only node asks no memlock: the same engine makes its toolbox.
    let thunderbolt = materialize("strix-thunderbolt-only");
    let output = refresh(&podman, thunderbolt.path(), &image, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn a_node_without_a_gpu_takes_a_cpu_image_and_refuses_a_gpu_image() {
    // The CPU image (containerfiles/vllm-cpu.Containerfile) runs anywhere, to try the tool: its
    // device label says so, and a node without /dev/kfd and /dev/dri makes its toolbox.
    let bed = Bed::new("strix-thunderbolt-only");
    for device in ["dev/kfd", "dev/dri"] {
        let path = bed.host.path().join(device);
        if path.is_dir() {
            std::fs::remove_dir_all(&path).expect("no GPU");
        } else {
            std::fs::remove_file(&path).expect("no GPU");
        }
    }
    let refused = bed.refresh(&["--no-verify"]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("has no /dev/kfd"), "{}", stderr(&refused));
    assert!(bed.podman.container_names().is_empty(), "nothing made for a GPU image");

    let build = tempfile::tempdir().expect("tempdir");
    let containerfile = format!("FROM {}\nLABEL io.github.strix-toolbox.device=cpu\n", bed.image);
    std::fs::write(build.path().join("Containerfile"), containerfile).expect("write the Containerfile");
    let cpu_image = format!("{}/kyuz0/vllm-cpu:latest", bed.registry.host());
    let context = build.path().to_str().expect("utf-8");
    bed.podman.podman_ok(&["build", "-q", "--format", "docker", "-t", &cpu_image, context]);
    bed.podman.podman_ok(&["push", "-q", "--tls-verify=false", &cpu_image]);
    let made = refresh(&bed.podman, bed.host.path(), &cpu_image, &["--no-verify"]);
    assert!(made.status.success(), "{}", stderr(&made));
    let devices = bed.podman.inspect("vllm")["HostConfig"]["Devices"].to_string();
    assert!(!devices.contains("/dev/kfd") && !devices.contains("/dev/dri"), "{devices}");
}
