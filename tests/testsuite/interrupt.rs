//! Ctrl-C or SIGTERM during a refresh's pull, or while it waits for a registry that never answers:
//! the working toolbox stays exactly as it was, nothing temporary is left behind, and the exit code
//! says which signal came (130, 143).

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::cli::{refresh_vllm, run_strix, stderr};
use crate::support::host_tree::materialize;
use crate::support::image::{push_rootfs_image, stand_in_image};
use crate::support::podman::PodmanService;
use crate::support::registry::Registry;

/// A busybox image with an incompressible 256 MiB layer, so its pull takes a while.
fn big_image(podman: &PodmanService, registry: &Registry) -> String {
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", rootfs.join("bin/sleep")).unwrap();
    let mut blob = std::fs::File::create(rootfs.join("weights.bin")).unwrap();
    let mut random = std::fs::File::open("/dev/urandom").unwrap();
    std::io::copy(&mut (&mut random).take(256 << 20), &mut blob).unwrap();
    blob.flush().unwrap();
    let tarball = dir.path().join("rootfs.tar");
    assert!(Command::new("tar").arg("-C").arg(&rootfs).arg("-cf").arg(&tarball).arg(".").status().unwrap().success());
    push_rootfs_image(
        podman,
        registry,
        "kyuz0/vllm:latest",
        &tarball,
        &[("org.opencontainers.image.created", "2026-11-09T00:00:00Z")],
    )
}

/// What an interrupted refresh left: its output, and the toolbox before and after.
struct Interrupted {
    output: std::process::Output,
    before: serde_json::Value,
    after: serde_json::Value,
    containers: Vec<String>,
}

/// Refresh a working toolbox `vllm` to an image whose pull takes a while, and send `signal` half
/// a second into the pull. `extra` goes at the end of the refresh's arguments.
fn interrupt_the_pull(signal: libc::c_int, extra: &[&str]) -> Interrupted {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let host = materialize("strix-thunderbolt-only");
    let host_arg = host.path().to_str().unwrap().to_string();
    let image = stand_in_image(&podman, &registry, "kyuz0/vllm:latest", "2026-11-01T10:00:00Z");
    assert!(run_strix(&podman.env(), &refresh_vllm(&host_arg, &image, &[])).status.success());
    let before = podman.inspect("vllm");

    big_image(&podman, &registry);
    let child = Command::new(env!("CARGO_BIN_EXE_strix-toolbox"))
        .args(refresh_vllm(&host_arg, &image, extra))
        .envs(podman.env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let output = child.wait_with_output().unwrap();
    Interrupted { output, before, after: podman.inspect("vllm"), containers: podman.container_names() }
}

#[test]
fn ctrl_c_during_the_pull_leaves_the_toolbox_untouched_and_exits_130() {
    let run = interrupt_the_pull(libc::SIGINT, &[]);
    let message = stderr(&run.output);
    assert_eq!(run.output.status.code(), Some(130), "{message}");
    assert!(message.contains("interrupted during pulling") && message.contains("nothing was changed"), "{message}");
    assert_eq!(run.after, run.before);
    assert_eq!(run.containers, ["vllm"]);
}

#[test]
fn sigterm_during_the_pull_leaves_the_toolbox_untouched_and_exits_143() {
    let run = interrupt_the_pull(libc::SIGTERM, &["--json"]);
    let message = stderr(&run.output);
    assert_eq!(run.output.status.code(), Some(143), "{message}");
    assert!(message.contains("interrupted by SIGTERM during pulling"), "{message}");
    let object: serde_json::Value = serde_json::from_slice(&run.output.stdout).expect("an error object on stdout");
    assert_eq!(object["error"]["kind"], "interrupted", "{object}");
    assert!(object["error"]["message"].as_str().unwrap().ends_with("nothing was changed"), "{object}");
    assert_eq!(run.after, run.before);
    assert_eq!(run.containers, ["vllm"]);
}

/// A "registry" on loopback that accepts every connection and never answers (a stalled proxy, a
/// registry that hangs): it says when the first connection came, and keeps each open until the
/// test ends.
struct SilentRegistry {
    port: u16,
    reached: std::sync::mpsc::Receiver<()>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    accepting: Option<std::thread::JoinHandle<()>>,
}

impl SilentRegistry {
    fn start() -> SilentRegistry {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (reached, said) = std::sync::mpsc::channel();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let accepting = std::thread::spawn(move || {
            let mut open = Vec::new();
            while !stopped.load(std::sync::atomic::Ordering::SeqCst) {
                match listener.accept() {
                    Ok((connection, _)) => {
                        open.push(connection);
                        let _ = reached.send(());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        SilentRegistry { port, reached: said, stop, accepting: Some(accepting) }
    }
}

impl Drop for SilentRegistry {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(accepting) = self.accepting.take() {
            let _ = accepting.join();
        }
    }
}

/// How long the refresh may take to go after the signal before the test gives up on it: far more
/// than stopping takes, far less than the registry client's own limits (it would otherwise wait
/// for the registry until then, and exit 1).
const GONE_WITHIN: Duration = Duration::from_secs(60);

/// A refresh by tag from a registry that accepts the connection and never answers, sent `signal`
/// once the registry is reached (its digest is asked first, before the node's facts are read).
fn interrupt_the_registry_wait(signal: libc::c_int) -> (std::process::Output, Vec<String>) {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let silent = SilentRegistry::start();
    let host = materialize("strix-thunderbolt-only");
    let host_arg = host.path().to_str().unwrap().to_string();
    let image = format!("127.0.0.1:{}/kyuz0/vllm:latest", silent.port);
    let mut child = Command::new(env!("CARGO_BIN_EXE_strix-toolbox"))
        .args(refresh_vllm(&host_arg, &image, &[]))
        .envs(podman.env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if silent.reached.recv_timeout(GONE_WITHIN).is_err() {
        let _ = child.kill();
        panic!("the refresh never reached the registry: {}", stderr(&child.wait_with_output().unwrap()));
    }
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let deadline = std::time::Instant::now() + GONE_WITHIN;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let left = child.wait_with_output().unwrap();
            panic!("the refresh still waited for the registry {GONE_WITHIN:?} after the signal: {}", stderr(&left));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (child.wait_with_output().unwrap(), podman.container_names())
}

#[test]
fn ctrl_c_while_the_registry_never_answers_exits_130() {
    let (output, containers) = interrupt_the_registry_wait(libc::SIGINT);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(130), "{message}");
    assert!(message.contains("nothing was changed"), "{message}");
    assert!(containers.is_empty(), "{containers:?}");
}

#[test]
fn sigterm_while_the_registry_never_answers_exits_143() {
    let (output, containers) = interrupt_the_registry_wait(libc::SIGTERM);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(143), "{message}");
    assert!(message.contains("interrupted by SIGTERM") && message.contains("nothing was changed"), "{message}");
    assert!(containers.is_empty(), "{containers:?}");
}
