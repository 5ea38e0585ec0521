//! The testbed: real services (a loopback registry, podman and dockerd services, Toolbx, sshd in
//! network namespaces), fake host trees, synthetic RCCL artifacts, and running the built binary.
//! Each service is started by the test that uses them and stopped when it drops them; each test
//! gets its own registry, storage and service, so the tests of this one binary run in parallel
//! threads and leave nothing behind. Nothing here changes the test process's own state (its
//! environment, current directory): what a child needs goes into the child's command.
//!
//! ```ignore
//! let registry = Registry::start();
//! let podman = PodmanService::start(&registry);
//! let image = stand_in_image(&podman, &registry, "vllm:latest", "2026-11-01T10:00:00Z");
//! let output = run_strix(&podman.env(), &["--host-root", host, "refresh", "--image", &image]);
//! ```

pub mod bench_levels;
pub mod checkpoint;
pub mod cli;
pub mod cluster;
pub mod docker;
pub mod event_stream;
pub mod host_tree;
pub mod http;
pub mod hub;
pub mod image;
pub mod llama_cpp;
pub mod llama_image;
pub mod llama_server;
pub mod netns;
pub mod node_image;
pub mod oci_image;
pub mod openai_python;
pub mod podman;
pub mod proc_net;
pub mod prometheus;
pub mod rccl_fixtures;
pub mod registry;
pub mod registry_image;
pub mod running_watch;
pub mod serving_files;
pub mod stand_in_vllm;
pub mod terminal;
pub mod test_cache;
pub mod tiny_llama;
pub mod toolbox_image;
pub mod toolbox_lock;
pub mod uplink;
pub mod user;
pub mod vllm_cpu;

use std::net::TcpListener;
use std::process::Child;
use std::time::{Duration, Instant};

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
