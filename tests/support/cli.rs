//! Helpers to run the built binary.

use std::path::Path;
use std::process::{Command, Output};

pub fn strix() -> Command {
    with_test_env(Command::new(env!("CARGO_BIN_EXE_strix-toolbox")))
}

/// The binary run by a wrapper (e.g. `ip netns exec NS`), with the same environment.
pub fn strix_under(wrapper: &[String]) -> Command {
    let mut command = Command::new(&wrapper[0]);
    command.args(&wrapper[1..]).arg(env!("CARGO_BIN_EXE_strix-toolbox"));
    with_test_env(command)
}

fn with_test_env(mut command: Command) -> Command {
    command.env_remove("STRIX_HOST_ROOT").env_remove("STRIX_LIVE_INTERFACES").env("NO_COLOR", "1").env("USER", "alice");
    command
}

/// Run with `--host-root root`, returning output.
pub fn run_on(root: &Path, args: &[&str]) -> Output {
    strix().arg("--host-root").arg(root).args(args).output().expect("run strix-toolbox")
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
