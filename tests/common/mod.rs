//! The end-to-end testbed: real services, started by the test that uses them and stopped when
//! it drops them. Each test gets its own registry, podman storage and service, so tests run in
//! parallel and leave nothing behind. A test binary with `mod common;` also declares `mod support;`
//! (the cluster's nodes get fake host trees).
//!
//! ```ignore
//! let registry = Registry::start();
//! let podman = PodmanService::start(&registry);
//! let image = stand_in_image(&podman, &registry, "vllm:latest", "2026-11-01T10:00:00Z");
//! let output = run_strix(&podman.env(), &["--host-root", host, "refresh", "--image", &image]);
//! ```
#![allow(dead_code)]

pub mod cluster;
pub mod docker;
pub mod image;
pub mod podman;
pub mod registry;
pub mod user;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

#[allow(unused_imports)]
pub use image::stand_in_image;
pub use podman::PodmanService;
pub use registry::Registry;

/// The strix-toolbox binary with a testbed's environment.
pub fn strix_command(env: &[(String, String)], args: &[&str]) -> std::process::Command {
    strix_command_at(Path::new(env!("CARGO_BIN_EXE_strix-toolbox")), env, args)
}

/// `strix_command` for a copy of the binary at `program`.
pub fn strix_command_at(program: &Path, env: &[(String, String)], args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    command.env_remove("STRIX_HOST_ROOT").env_remove("CONTAINER_HOST").env_remove("DOCKER_HOST");
    command.env("NO_COLOR", "1").env("USER", "alice");
    command.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    command.args(args);
    command
}

/// Run the strix-toolbox binary with a testbed's environment, no input.
pub fn run_strix(env: &[(String, String)], args: &[&str]) -> Output {
    strix_command(env, args).stdin(std::process::Stdio::null()).output().expect("run strix-toolbox")
}

/// `refresh` of toolbox `vllm` from `image` with the native manager on the fake host tree
/// `host`; `extra` (more flags, global ones too) goes at the end.
///
/// A node with RDMA gets `memlock=-1`, which this machine cannot start (TESTBED.md: no
/// CAP_SYS_RESOURCE, hard limit 8 MiB), so verifying its toolbox from the inside is impossible
/// here: those refreshes pass `--no-verify`. Every other node's refresh verifies.
pub fn refresh_vllm<'a>(host: &'a str, image: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--host-root", host, "refresh", "--image", image, "--name", "vllm", "--manager", "native"];
    if cannot_start_here(host) {
        args.push("--no-verify");
    }
    args.extend_from_slice(extra);
    args
}

/// The host tree has RDMA devices, so its toolbox asks for an unlimited memlock.
pub fn cannot_start_here(host: &str) -> bool {
    Path::new(host).join("dev/infiniband").exists()
}

/// A port on 127.0.0.1 nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port()
}

/// Poll `ready` until it holds or `limit` passes.
pub fn wait_until(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ready() {
        assert!(Instant::now() < deadline, "{what} not ready after {limit:?}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Stop a service: SIGTERM, a moment to exit, then SIGKILL; always reaped.
pub fn stop_child(child: &mut Child) {
    let pid = child.id() as i32;
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let _ = child.kill();
    let _ = child.wait();
}
