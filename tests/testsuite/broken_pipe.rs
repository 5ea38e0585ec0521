//! A reader that goes away at once (`strix-toolbox status | head -0`) is not a crash: every
//! command that prints, with its stdout a pipe already closed, exits 0 or 1 as it would have,
//! never 101, and its stderr tells of no panic.

use std::process::{Command, Output, Stdio};

use crate::support::cli::{refresh_vllm, run_strix, stderr, strix_command};
use crate::support::host_tree::materialize;
use crate::support::image::stand_in_image;
use crate::support::podman::PodmanService;
use crate::support::rccl_fixtures;
use crate::support::registry::Registry;

/// Run `command` with stdout a pipe whose reader is closed before it starts.
fn with_stdout_closed(mut command: Command) -> Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    command.stdin(Stdio::null()).stdout(writer).stderr(Stdio::piped()).output().expect("run strix-toolbox")
}

/// `args`, as text and with `--json`: with stdout closed, the same exit code (0 or 1) as with
/// stdout read, and no panic.
fn assert_quiet_exit(env: &[(String, String)], args: &[&str]) {
    for json in [false, true] {
        let mut args = args.to_vec();
        if json {
            args.insert(0, "--json");
        }
        let read = strix_command(env, &args).stdin(Stdio::null()).output().expect("run strix-toolbox");
        assert!(!read.stdout.is_empty(), "{args:?} printed nothing to close the pipe on: {}", stderr(&read));
        let closed = with_stdout_closed(strix_command(env, &args));
        let text = stderr(&closed);
        assert!(matches!(closed.status.code(), Some(0 | 1)), "{args:?} exited {:?}: {text}", closed.status);
        assert_eq!(closed.status.code(), read.status.code(), "{args:?}: {text}");
        assert!(!text.contains("panicked") && !text.contains("Broken pipe"), "{args:?}: {text}");
    }
}

#[test]
fn commands_without_an_engine() {
    let host = materialize("strix-e810-healthy");
    let host = host.path().to_str().unwrap();
    let artifacts = tempfile::tempdir().unwrap();
    let library = rccl_fixtures::gfx1151_library(artifacts.path(), "librccl.so.1", "broken-pipe");
    let library = library.to_str().unwrap();
    // Nodes nobody answers for: the cluster's reports say so, node by node.
    let unreachable =
        ["--nodes", "node-a.invalid,node-b.invalid", "--ssh-config", "/dev/null", "--connect-timeout", "1"];
    let cluster = |verb: &'static str| [&["cluster", verb][..], &unreachable[..]].concat();

    assert_quiet_exit(&[], &["--host-root", host, "detect"]);
    assert_quiet_exit(&[], &["--host-root", host, "doctor"]);
    assert_quiet_exit(&[], &["completions", "bash"]);
    assert_quiet_exit(&[], &["rccl", "inspect", library]);
    assert_quiet_exit(&[], &cluster("status"));
    assert_quiet_exit(&[], &cluster("doctor"));
    assert_quiet_exit(&[], &cluster("verify"));
    assert_quiet_exit(&[], &[&["cluster", "model", "list"][..], &unreachable[..]].concat());
    let home = tempfile::tempdir().unwrap();
    let home = [("HOME".to_string(), home.path().display().to_string())];
    assert_quiet_exit(&home, &["model", "list"]);
}

#[test]
fn commands_on_a_node_with_a_toolbox() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let image = format!("{}/vllm:latest", registry.host());
    let host = materialize("strix-thunderbolt-only");
    let host = host.path().to_str().unwrap();
    let env = podman.env();
    // Two refreshes, so a rollback has an older pin to plan with.
    for created in ["2026-11-01T10:00:00Z", "2026-11-02T10:00:00Z"] {
        stand_in_image(&podman, &registry, "vllm:latest", created);
        let refreshed = run_strix(&env, &refresh_vllm(host, &image, &["--no-verify"]));
        assert!(refreshed.status.success(), "{}", stderr(&refreshed));
    }

    assert_quiet_exit(&env, &["status"]);
    assert_quiet_exit(&env, &["list"]);
    assert_quiet_exit(&env, &["--host-root", host, "verify", "vllm"]);
    assert_quiet_exit(&env, &refresh_vllm(host, &image, &["--dry-run", "--force"]));
    assert_quiet_exit(&env, &["--host-root", host, "rollback", "vllm", "--dry-run"]);
    assert_quiet_exit(&env, &["--host-root", host, "launch", "org/model", "--dry-run"]);
    assert_quiet_exit(&env, &["stop"]);
}
