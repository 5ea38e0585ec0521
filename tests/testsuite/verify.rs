//! `verify` and the verification before a refresh swaps, against real containers: a healthy
//! toolbox passes; one without /dev/kfd, one without the render group, and an image whose RCCL
//! copies differ each fail with the check named. (An RDMA toolbox, memlock=-1, cannot start on this
//! machine: TESTBED.md. The memlock check runs here as "no RDMA, nothing needs it".)

use std::time::{Duration, Instant};

use crate::support::cli::{json, refresh_vllm, run_strix, stderr, stdout};
use crate::support::host_tree::materialize;
use crate::support::image::{stand_in_image, stand_in_image_with, stand_in_image_with_tools};
use crate::support::podman::PodmanService;
use crate::support::rccl_fixtures;
use crate::support::registry::Registry;

const CREATED: &str = "2026-11-01T10:00:00Z";

fn check<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report}"))
}

#[test]
fn a_refreshed_toolbox_verifies_and_says_what_it_skipped() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let image = stand_in_image(&podman, &registry, "vllm:latest", CREATED);
    let host = materialize("strix-thunderbolt-only");
    let host_arg = host.path().to_str().unwrap();
    let refreshed = run_strix(&podman.env(), &refresh_vllm(host_arg, &image, &["--json"]));
    assert!(refreshed.status.success(), "{}", stderr(&refreshed));
    let steps: Vec<String> = json(&refreshed)["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["description"].as_str().unwrap().to_string())
        .collect();
    assert!(steps.iter().any(|s| s.starts_with("start vllm-strix-new and verify it")), "{steps:?}");

    // The refresh left it stopped: verify starts it, checks, and stops it again, without waiting
    // out a stop grace period (10 s by default; `sleep infinity` ignores SIGTERM).
    let started = Instant::now();
    let output = run_strix(&podman.env(), &["--host-root", host_arg, "--json", "verify", "vllm"]);
    let took = started.elapsed();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(took < Duration::from_secs(5), "verify of a stopped toolbox took {took:?}");
    assert_eq!(podman.inspect("vllm")["State"]["Running"], false, "verify leaves it as it found it");
    let report = json(&output);
    assert_eq!(report["ok"], true, "{report}");
    for name in ["device:/dev/kfd", "device:/dev/dri/renderD128", "groups", "environment"] {
        assert_eq!(check(&report, name)["status"], "pass", "{name}: {report}");
    }
    assert!(check(&report, "environment")["message"].as_str().unwrap().contains("NCCL_SOCKET_IFNAME"));
    assert_eq!(check(&report, "memlock")["status"], "info");
    // What the stand-in image lacks is skipped with the reason, never passed.
    for name in ["rccl", "hw:rocm", "hw:torch"] {
        assert_eq!(check(&report, name)["status"], "skipped", "{name}: {report}");
    }
}

#[test]
fn a_toolbox_without_kfd_or_the_render_group_fails_the_check_that_says_so() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let image = stand_in_image(&podman, &registry, "vllm:latest", CREATED);
    let host = materialize("strix-thunderbolt-only");
    let host_arg = host.path().to_str().unwrap();
    let dri = format!("{host_arg}/dev/dri:/dev/dri");
    let kfd = format!("{host_arg}/dev/kfd:/dev/kfd");
    // Made with the engine directly, as a hand-rolled toolbox would be.
    podman.podman_ok(&[
        "create",
        "--name",
        "nokfd",
        "--device",
        &dri,
        "--group-add",
        "39",
        "--group-add",
        "105",
        &image,
        "sleep",
        "infinity",
    ]);
    podman.podman_ok(&[
        "create",
        "--name",
        "norender",
        "--device",
        &kfd,
        "--device",
        &dri,
        "--group-add",
        "39",
        &image,
        "sleep",
        "infinity",
    ]);

    let nokfd = run_strix(&podman.env(), &["--host-root", host_arg, "--json", "verify", "nokfd"]);
    assert_eq!(nokfd.status.code(), Some(1));
    let report = json(&nokfd);
    let kfd_check = check(&report, "device:/dev/kfd");
    assert_eq!(kfd_check["status"], "fail", "{report}");
    assert!(kfd_check["fix"].as_str().unwrap().contains("refresh --force"));
    assert_eq!(check(&report, "groups")["status"], "pass");

    let norender = run_strix(&podman.env(), &["--host-root", host_arg, "--json", "verify", "norender"]);
    assert_eq!(norender.status.code(), Some(1));
    let report = json(&norender);
    let groups = check(&report, "groups");
    assert_eq!(groups["status"], "fail", "{report}");
    assert!(groups["message"].as_str().unwrap().contains("105"), "{report}");
    assert_eq!(check(&report, "device:/dev/kfd")["status"], "pass");
}

#[test]
fn a_new_image_with_a_mixed_rccl_is_refused_and_the_old_toolbox_stays() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let artifacts = tempfile::tempdir().unwrap();
    let good = std::fs::read(rccl_fixtures::gfx1151_library(artifacts.path(), "good.so", "verify-good")).unwrap();
    let stale = std::fs::read(rccl_fixtures::gfx1100_library(artifacts.path(), "stale.so")).unwrap();
    let image =
        stand_in_image_with(&podman, &registry, "vllm:latest", CREATED, &[("/opt/rocm/lib/librccl.so.1", &good)]);
    let host = materialize("strix-thunderbolt-only");
    let host_arg = host.path().to_str().unwrap();

    let first = run_strix(&podman.env(), &refresh_vllm(host_arg, &image, &["--json"]));
    assert!(first.status.success(), "{}", stderr(&first));
    let old_id = podman.inspect("vllm")["Id"].as_str().unwrap().to_string();
    let report = json(&run_strix(&podman.env(), &["--host-root", host_arg, "--json", "verify"]));
    assert_eq!(check(&report, "rccl:gfx1151")["status"], "pass", "{report}");

    // Upstream replaced only /opt/rocm's copy; torch's copy in the venv still lacks gfx1151.
    let torch_copy = "/opt/venv/lib/python3.12/site-packages/torch/lib/librccl.so.1";
    stand_in_image_with(
        &podman,
        &registry,
        "vllm:latest",
        "2026-11-08T10:00:00Z",
        &[("/opt/rocm/lib/librccl.so.1", &good), (torch_copy, &stale)],
    );
    let refused = run_strix(&podman.env(), &refresh_vllm(host_arg, &image, &[]));
    assert_eq!(refused.status.code(), Some(1));
    let message = stderr(&refused);
    assert!(message.contains("failed verification") && message.contains("rccl:same"), "{message}");
    assert!(message.contains("rccl:gfx1151") && message.contains(torch_copy), "{message}");
    assert_eq!(podman.inspect("vllm")["Id"].as_str().unwrap(), old_id, "the old toolbox must stay");
    assert_eq!(podman.container_names(), ["vllm"], "the staged toolbox must be gone");
}

/// The vLLM image's stack (torch for ROCm) without RCCL cannot serve across nodes: its verification
/// fails, so the gate before a swap refuses it; with a gfx1151 RCCL, RCCL and the devices pass.
#[test]
fn an_image_with_torch_for_rocm_must_carry_a_gfx1151_rccl() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let artifacts = tempfile::tempdir().unwrap();
    let good = std::fs::read(rccl_fixtures::gfx1151_library(artifacts.path(), "good.so", "verify-torch")).unwrap();
    let torch_hip: (&str, &[u8]) = ("/opt/venv/lib/python3.12/site-packages/torch/lib/libtorch_hip.so", b"\x7fELF");
    let host = materialize("strix-thunderbolt-only");
    let host_arg = host.path().to_str().unwrap();

    let image = stand_in_image_with(&podman, &registry, "vllm:latest", CREATED, &[torch_hip]);
    let refused = run_strix(&podman.env(), &refresh_vllm(host_arg, &image, &[]));
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(message.contains("failed verification") && message.contains("no librccl.so"), "{message}");
    assert!(message.contains("libtorch_hip.so"), "{message}");
    assert!(podman.container_names().is_empty(), "nothing is left of the refused toolbox");

    let rccl: (&str, &[u8]) = ("/opt/rocm/lib/librccl.so.1", &good);
    stand_in_image_with(&podman, &registry, "vllm:latest", "2026-11-08T10:00:00Z", &[torch_hip, rccl]);
    let created = run_strix(&podman.env(), &refresh_vllm(host_arg, &image, &[]));
    assert!(created.status.success(), "{}", stderr(&created));
    let report = json(&run_strix(&podman.env(), &["--host-root", host_arg, "--json", "verify", "vllm"]));
    assert_eq!(report["ok"], true, "{report}");
    for name in ["rccl:same", "rccl:gfx1151", "device:/dev/kfd", "device:/dev/dri/renderD128"] {
        assert_eq!(check(&report, name)["status"], "pass", "{name}: {report}");
    }
}

/// An RDMA toolbox with memlock unlimited cannot start here (TESTBED.md), so the test makes the
/// spec's container without its `--ulimit memlock=-1:-1`, with the engine directly: it starts, its
/// RDMA devices open, and verify fails it on memlock alone, with the limit it found.
#[test]
fn an_rdma_toolbox_without_unlimited_memlock_fails_the_memlock_check() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let image = stand_in_image(&podman, &registry, "vllm:latest", CREATED);
    let host = materialize("strix-e810-healthy");
    let host_arg = host.path().to_str().unwrap();
    create_rdma_toolbox_without_memlock(&podman, host_arg, &image);

    let output = run_strix(&podman.env(), &["--host-root", host_arg, "verify"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("NOT verified"), "{text}");
    let report = json(&run_strix(&podman.env(), &["--host-root", host_arg, "--json", "verify"]));
    let failed: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["memlock"], "{report}");
    let memlock = check(&report, "memlock");
    assert!(memlock["message"].as_str().unwrap().contains("hard 8388608 bytes"), "{report}");
    assert!(memlock["fix"].as_str().unwrap().contains("memlock=-1"), "{report}");
    for name in ["device:/dev/infiniband/uverbs0", "device:/dev/infiniband/uverbs1", "groups", "environment"] {
        assert_eq!(check(&report, name)["status"], "pass", "{name}: {report}");
    }
    assert!(check(&report, "groups")["message"].as_str().unwrap().contains("993"), "{report}");
    assert!(check(&report, "environment")["message"].as_str().unwrap().contains("NCCL_IB_GID_INDEX"), "{report}");
    assert_eq!(check(&report, "hw:rdma:rocep194s0f0/1")["status"], "skipped", "{report}");
}

/// The toolbox `vllm` of `image` as the spec for the RDMA node `host_arg` makes it, but without
/// its `--ulimit memlock=-1:-1`, which cannot start here (TESTBED.md): made with the engine
/// directly, it starts and its RDMA devices open.
fn create_rdma_toolbox_without_memlock(podman: &PodmanService, host_arg: &str, image: &str) {
    let detected = run_strix(&podman.env(), &["--host-root", host_arg, "--json", "detect"]);
    assert!(detected.status.success(), "{}", stderr(&detected));
    let spec_args: Vec<String> = json(&detected)["container_args"]
        .as_array()
        .expect("container_args")
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let memlock = spec_args.iter().position(|a| a == "memlock=-1:-1").expect("the spec asks for memlock=-1");
    let mut create: Vec<&str> = vec!["create", "--name", "vllm"];
    create.extend(
        spec_args.iter().enumerate().filter(|(i, _)| *i + 1 != memlock && *i != memlock).map(|(_, a)| a.as_str()),
    );
    create.extend([image, "sleep", "infinity"]);
    podman.podman_ok(&create);
}

/// On an RDMA node the image's rdma-core, read from its libibverbs' name, must be 62 or newer
/// (older gives RCCL "Unknown completion" errors over the E810's irdma provider): Ubuntu's 50
/// fails with the fix, 62 passes, and an image without libibverbs is a warning.
#[test]
fn an_rdma_node_wants_rdma_core_62_or_newer_in_the_image() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let host = materialize("strix-e810-healthy");
    let host_arg = host.path().to_str().unwrap();
    let verify = |files: &[(&str, &[u8])], created: &str| {
        let image = stand_in_image_with(&podman, &registry, "vllm:latest", created, files);
        create_rdma_toolbox_without_memlock(&podman, host_arg, &image);
        let report = json(&run_strix(&podman.env(), &["--host-root", host_arg, "--json", "verify", "vllm"]));
        podman.podman_ok(&["rm", "--force", "vllm"]);
        check(&report, "rdma-core").clone()
    };

    let ubuntu = verify(&[("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0", b"\x7fELF")], CREATED);
    assert_eq!(ubuntu["status"], "fail", "{ubuntu}");
    let message = ubuntu["message"].as_str().unwrap();
    assert!(message.starts_with("rdma-core 50.0 (/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0)"), "{message}");
    assert!(message.contains("Unknown completion"), "{message}");
    assert!(ubuntu["fix"].as_str().unwrap().contains("rdma-core 62 or newer"), "{ubuntu}");

    let fedora = verify(&[("/usr/lib64/libibverbs.so.1.15.62.0", b"\x7fELF")], "2026-11-02T10:00:00Z");
    assert_eq!(fedora["status"], "pass", "{fedora}");
    assert_eq!(fedora["message"], "rdma-core 62.0 (/usr/lib64/libibverbs.so.1.15.62.0)");

    let without = verify(&[], "2026-11-03T10:00:00Z");
    assert_eq!(without["status"], "warn", "{without}");
    assert!(without["message"].as_str().unwrap().contains("no libibverbs"), "{without}");
}

/// The probes need only the image's shell: an image with nothing but `sh`, `sleep` and `cat` (no
/// dd, find or grep) opens its devices and has its RCCL copies found and checked.
#[test]
fn an_image_with_only_a_shell_is_verified_in_full() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let artifacts = tempfile::tempdir().unwrap();
    let good = std::fs::read(rccl_fixtures::gfx1151_library(artifacts.path(), "good.so", "verify-sh")).unwrap();
    let torch_copy = "/opt/venv/lib/python3.12/site-packages/torch/lib/librccl.so.1";
    let files: [(&str, &[u8]); 2] = [("/opt/rocm/lib/librccl.so.1", &good), (torch_copy, &good)];
    let image = stand_in_image_with_tools(&podman, &registry, "vllm:latest", CREATED, &files, &["sh", "sleep", "cat"]);
    let host = materialize("strix-thunderbolt-only");
    let host_arg = host.path().to_str().unwrap();
    let refreshed = run_strix(&podman.env(), &refresh_vllm(host_arg, &image, &["--json"]));
    assert!(refreshed.status.success(), "{}", stderr(&refreshed));
    assert_eq!(json(&refreshed)["warnings"], serde_json::json!([]));

    let output = run_strix(&podman.env(), &["--host-root", host_arg, "--json", "verify", "vllm"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json(&output);
    for name in ["device:/dev/kfd", "device:/dev/dri/renderD128", "rccl:same", "rccl:gfx1151"] {
        assert_eq!(check(&report, name)["status"], "pass", "{name}: {report}");
    }
    assert_eq!(check(&report, "rccl:same")["message"], "2 copies, one library", "{report}");
    assert_eq!(report["devices_not_opened"], serde_json::json!([]));
    let text = stdout(&run_strix(&podman.env(), &["--host-root", host_arg, "verify", "vllm"]));
    assert!(text.trim_end().ends_with("vllm verified"), "{text}");
}

/// An image without a shell cannot open its devices: their checks are skipped with the reason,
/// and neither verify's summary nor the refresh that verified it passes them in silence.
#[test]
fn devices_that_were_not_opened_are_said_in_every_summary() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let image = stand_in_image_with_tools(&podman, &registry, "vllm:latest", CREATED, &[], &["sleep", "cat"]);
    let host = materialize("strix-thunderbolt-only");
    let host_arg = host.path().to_str().unwrap();
    let devices = "/dev/kfd, /dev/dri/renderD128";

    let refreshed = run_strix(&podman.env(), &refresh_vllm(host_arg, &image, &["--json"]));
    assert!(refreshed.status.success(), "{}", stderr(&refreshed));
    let warnings = json(&refreshed)["warnings"].to_string();
    assert!(
        warnings.contains(&format!("vllm-strix-new passed verification, but {devices} were not opened")),
        "{warnings}"
    );

    let output = run_strix(&podman.env(), &["--host-root", host_arg, "--json", "verify", "vllm"]);
    assert!(output.status.success(), "no check failed: {}", stderr(&output));
    let report = json(&output);
    let kfd = check(&report, "device:/dev/kfd");
    assert_eq!(kfd["status"], "skipped", "{report}");
    assert!(kfd["message"].as_str().unwrap().contains("sh not in the image"), "{report}");
    assert_eq!(report["devices_not_opened"], serde_json::json!(["/dev/kfd", "/dev/dri/renderD128"]));
    let text = stdout(&run_strix(&podman.env(), &["--host-root", host_arg, "verify", "vllm"]));
    let summary = text.trim_end().lines().last().unwrap().to_string();
    assert_eq!(
        summary,
        format!("vllm verified, but {devices} were not opened inside (the skipped device checks say why)")
    );
}
