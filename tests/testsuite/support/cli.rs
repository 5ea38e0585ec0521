//! Running the built binary. It inherits nothing from the developer's session that would pick a
//! host root or an engine (STRIX_HOST_ROOT, CONTAINER_HOST, ...): what a test wants, it passes.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The binary cargo built for this test run.
pub const STRIX: &str = env!("CARGO_BIN_EXE_strix-toolbox");

/// The binary, no arguments yet.
pub fn strix() -> Command {
    strix_at(Path::new(STRIX))
}

/// A copy of the binary at `program` (one another user can run).
pub fn strix_at(program: &Path) -> Command {
    let mut command = Command::new(program);
    isolate(&mut command);
    command
}

/// The binary run by a wrapper (e.g. `ip netns exec NS`), with the same environment.
pub fn strix_under(wrapper: &[String]) -> Command {
    let mut command = Command::new(&wrapper[0]);
    command.args(&wrapper[1..]).arg(STRIX);
    isolate(&mut command);
    command
}

/// The binary with a testbed's environment and `args`.
pub fn strix_command(env: &[(String, String)], args: &[&str]) -> Command {
    strix_command_at(Path::new(STRIX), env, args)
}

/// `strix_command` for a copy of the binary at `program`.
pub fn strix_command_at(program: &Path, env: &[(String, String)], args: &[&str]) -> Command {
    let mut command = strix_at(program);
    command.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    command.args(args);
    command
}

/// Run the binary with a testbed's environment, no input.
pub fn run_strix(env: &[(String, String)], args: &[&str]) -> Output {
    strix_command(env, args).stdin(Stdio::null()).output().expect("run strix-toolbox")
}

/// Run with `--host-root root`, no engine.
pub fn run_on(root: &Path, args: &[&str]) -> Output {
    strix().arg("--host-root").arg(root).args(args).output().expect("run strix-toolbox")
}

fn isolate(command: &mut Command) {
    for inherited in [
        "STRIX_HOST_ROOT",
        "STRIX_LIVE_INTERFACES",
        "STRIX_CONTAINER_ENGINE",
        "STRIX_ENGINE",
        "CONTAINER_HOST",
        "DOCKER_HOST",
    ] {
        command.env_remove(inherited);
    }
    command.env("NO_COLOR", "1").env("USER", "alice");
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

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", stdout(output), stderr(output)))
}
