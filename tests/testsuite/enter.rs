//! `enter NAME -- CMD` passes output and exit codes through, whatever the command does; bare
//! `enter NAME` is an interactive shell on the user's terminal.

use std::time::Duration;

use tempfile::TempDir;

use crate::support::cli::{refresh_vllm, run_strix, stderr, strix_command};
use crate::support::host_tree::materialize;
use crate::support::image::stand_in_image;
use crate::support::podman::PodmanService;
use crate::support::registry::Registry;
use crate::support::terminal::assert_interactive_shell;

/// A podman testbed with the native toolbox `vllm` made from the stand-in image (not started).
fn toolbox_vllm() -> (Registry, PodmanService, TempDir) {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let host = materialize("strix-thunderbolt-only");
    let image = stand_in_image(&podman, &registry, "kyuz0/vllm:latest", "2026-11-01T10:00:00Z");
    let output = run_strix(&podman.env(), &refresh_vllm(host.path().to_str().unwrap(), &image, &[]));
    assert!(output.status.success(), "{}", stderr(&output));
    (registry, podman, host)
}

#[test]
fn passes_output_and_exit_codes_and_shares_the_host_ipc_and_network() {
    let (_registry, podman, _host) = toolbox_vllm();

    // Not running yet: enter starts it.
    let output = run_strix(&podman.env(), &["enter", "vllm", "--", "sh", "-c", "echo out; echo err >&2; exit 3"]);
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "out\n");
    assert_eq!(stderr(&output), "err\n");

    let output = run_strix(&podman.env(), &["enter", "vllm", "--", "true"]);
    assert_eq!(output.status.code(), Some(0));

    // Ray and RCCL need the host's IPC and network namespaces.
    for namespace in ["ipc", "net"] {
        let output =
            run_strix(&podman.env(), &["enter", "vllm", "--", "ls", "-l", &format!("/proc/self/ns/{namespace}")]);
        let inside = String::from_utf8_lossy(&output.stdout);
        let ours = std::fs::read_link(format!("/proc/self/ns/{namespace}")).unwrap();
        assert!(inside.contains(ours.to_str().unwrap()), "{namespace}: {inside} vs {ours:?}");
    }
}

#[test]
fn what_a_command_leaves_behind_is_reaped_not_a_zombie() {
    let (_registry, podman, _host) = toolbox_vllm();
    // `sleep 1` outlives its shell, so PID 1 inherits it (as it inherits Ray's and vLLM's processes).
    let output = run_strix(&podman.env(), &["enter", "vllm", "--", "sh", "-c", "sleep 1 & exit 0"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        // Every process's /proc/PID/stat: `PID (NAME) STATE ...`.
        let output = run_strix(&podman.env(), &["enter", "vllm", "--", "sh", "-c", "cat /proc/[0-9]*/stat"]);
        let stats = String::from_utf8_lossy(&output.stdout).into_owned();
        let state = |line: &str| line.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
        let sleeps = stats.lines().filter(|line| line.contains("(sleep)")).count();
        let zombies = stats.lines().filter(|line| state(line) == Some(Some('Z'))).count();
        // Left: the toolbox's own `sleep infinity`, no zombie.
        if sleeps == 1 && zombies == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the orphan stays, or a zombie:\n{stats}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(podman.inspect("vllm")["HostConfig"]["Init"], true);
}

#[test]
fn a_missing_toolbox_says_how_to_make_it() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let output = run_strix(&podman.env(), &["enter", "nope", "--", "true"]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(message.contains("no toolbox named nope") && message.contains("strix-toolbox refresh"), "{message}");
}

#[test]
fn bare_enter_is_an_interactive_shell_on_the_terminal() {
    let (_registry, podman, _host) = toolbox_vllm();

    // The stand-in image has no bash: enter falls back to the image's /bin/sh. Its prompt ends "# ".
    assert_interactive_shell(strix_command(&podman.env(), &["enter", "vllm"]), 5, Duration::from_secs(60));
}
