//! A network namespace the test owns (`ip netns add`), loopback up; on drop, the processes in it
//! end and it is deleted (with the veths in it, and so their peers). Traffic stays inside: nothing
//! here touches the machine's own interfaces.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub struct NetNs {
    name: String,
}

impl NetNs {
    /// A namespace named for this test process (`strix-test-PID-N`).
    pub fn new() -> NetNs {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NetNs::named(format!("strix-test-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)))
    }

    /// A namespace with a name the caller chose (the test cluster's, scoped by its slot).
    pub fn named(name: String) -> NetNs {
        ip(&["netns", "add", &name]);
        let netns = NetNs { name };
        netns.ip(&["link", "set", "lo", "up"]);
        netns
    }

    /// Take over a namespace a killed test left behind, so that dropping it cleans it up.
    pub fn leftover(name: String) -> NetNs {
        NetNs { name }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip -n NAME ARGS...`, which must succeed.
    pub fn ip(&self, args: &[&str]) {
        let mut argv = vec!["-n", &self.name];
        argv.extend_from_slice(args);
        ip(&argv);
    }

    /// A veth pair `name` ↔ `peer` inside, both up, waiting (at most 5 s) until `name` is up.
    pub fn veth(&self, name: &str, peer: &str) {
        self.ip(&["link", "add", name, "type", "veth", "peer", "name", peer]);
        self.ip(&["link", "set", peer, "up"]);
        self.ip(&["link", "set", name, "up"]);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let output = Command::new("ip").args(["-n", &self.name, "-o", "link", "show", name]).output().expect("ip");
            if String::from_utf8_lossy(&output.stdout).contains("state UP") {
                return;
            }
            assert!(Instant::now() < deadline, "{name} in {} did not come up", self.name);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The argv prefix that runs a program inside with `ip netns exec NAME`, which also mounts a
    /// /sys of the namespace (its /sys/class/net). Container runtimes need `enter` instead.
    pub fn exec(&self) -> Vec<String> {
        ["ip", "netns", "exec", &self.name].map(str::to_string).to_vec()
    }

    /// `program` inside (see [`enter`]).
    pub fn enter(&self, program: &str) -> Command {
        enter(&self.name, program)
    }

    /// Processes in the namespace.
    pub fn pids(&self) -> Vec<i32> {
        let output = Command::new("ip").args(["netns", "pids", &self.name]).output().expect("ip netns pids");
        String::from_utf8_lossy(&output.stdout).split_whitespace().filter_map(|pid| pid.parse().ok()).collect()
    }

    /// SIGTERM every process in it, SIGKILL what is left after 5 s.
    pub fn end_processes(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut signal = libc::SIGTERM;
        loop {
            let pids = self.pids();
            if pids.is_empty() {
                return;
            }
            if Instant::now() >= deadline {
                if signal == libc::SIGKILL {
                    return;
                }
                signal = libc::SIGKILL;
            }
            for pid in pids {
                // SAFETY: plain kill(2) on a process in a namespace this test created.
                unsafe { libc::kill(pid, signal) };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        self.end_processes();
        let _ = Command::new("ip").args(["netns", "del", &self.name]).stderr(Stdio::null()).status();
    }
}

/// `program` inside the namespace `netns`, joining only its network (`nsenter --net`): mounts stay
/// the machine's, so runc still finds the cgroup tree that `ip netns exec`'s /sys hides
/// (TESTBED.md). nsenter execs the program: the child's pid is the program's.
pub fn enter(netns: &str, program: &str) -> Command {
    let mut command = Command::new("nsenter");
    command.arg(format!("--net=/run/netns/{netns}")).arg(program);
    command
}

/// `ip ARGS`, failing the test with ip's message.
pub fn ip(args: &[&str]) {
    let output = Command::new("ip").args(args).stdin(Stdio::null()).output().expect("run ip (iproute2)");
    assert!(
        output.status.success(),
        "ip {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    );
}
