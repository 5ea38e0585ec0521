//! `strix-toolbox build` refuses bad input before it talks to any engine: the engine endpoints
//! point at a socket this test listens on, and nothing may connect to it.

use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, Output};

use tempfile::TempDir;

use crate::support::rccl_fixtures::*;

/// A socket standing in for the engine API; `connections()` counts who dialled it.
struct WatchedSocket {
    listener: UnixListener,
    url: String,
}

impl WatchedSocket {
    fn new(dir: &Path) -> Self {
        let path = dir.join("engine.sock");
        let listener = UnixListener::bind(&path).expect("bind socket");
        listener.set_nonblocking(true).expect("nonblocking");
        WatchedSocket { listener, url: format!("unix://{}", path.display()) }
    }

    fn connections(&self) -> usize {
        self.listener.incoming().take_while(Result::is_ok).count()
    }
}

fn build(socket: &WatchedSocket, engine: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strix-toolbox"))
        .env("NO_COLOR", "1")
        .env("CONTAINER_HOST", &socket.url)
        .env("DOCKER_HOST", &socket.url)
        .args(["--container-engine", engine, "build"])
        .args(args)
        .output()
        .expect("run strix-toolbox")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_library_without_gfx1151_is_refused_before_the_engine() {
    let dir = TempDir::new().expect("tempdir");
    let socket = WatchedSocket::new(dir.path());
    let library = gfx1100_library(dir.path(), "librccl.so.1");
    for engine in ["podman", "docker"] {
        let output = build(&socket, engine, &["--rccl", library.to_str().expect("utf-8"), "--push"]);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        let message = stderr(&output);
        assert!(message.contains("no gfx1151 code objects (GPU targets found: gfx1100)"), "{message}");
        assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    }
    assert_eq!(socket.connections(), 0, "build contacted the engine with a rejected artifact");
}

#[test]
fn unreadable_artifacts_are_refused_before_the_engine() {
    let dir = TempDir::new().expect("tempdir");
    let socket = WatchedSocket::new(dir.path());
    let not_elf = dir.path().join("librccl.so.1");
    std::fs::write(&not_elf, b"Not Found").expect("write");
    let output = build(&socket, "podman", &["--rccl", not_elf.to_str().expect("utf-8")]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("not an ELF file"), "{}", stderr(&output));

    let zip = zip_file(dir.path(), "artifact.zip", &[("README", b"x")]);
    let output = build(&socket, "podman", &["--rccl", zip.to_str().expect("utf-8")]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("no librccl.so.1"), "{}", stderr(&output));
    assert_eq!(socket.connections(), 0);
}

#[test]
fn bad_references_are_usage_errors_before_reading_anything() {
    let dir = TempDir::new().expect("tempdir");
    let socket = WatchedSocket::new(dir.path());
    let missing = "/nonexistent/librccl.so.1";
    let output = build(&socket, "podman", &["--rccl", missing, "--tag", "Not A Tag"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("invalid image reference \"Not A Tag\""), "{}", stderr(&output));
    let output = build(&socket, "podman", &["--rccl", missing, "--base", "docker.io/Library/base:1"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(socket.connections(), 0);
}
