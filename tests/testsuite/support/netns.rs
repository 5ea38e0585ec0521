//! A network namespace the test owns (`ip netns add`), with veth pairs in it; deleted on drop
//! with everything in it. Traffic stays inside: nothing here touches the machine's own interfaces.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub struct NetNs {
    name: String,
}

impl NetNs {
    pub fn new() -> NetNs {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!("strix-test-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        run(&["ip", "netns", "add", &name]);
        let netns = NetNs { name };
        netns.ip(&["link", "set", "lo", "up"]);
        netns
    }

    /// `ip -n NAME ARGS...`, which must succeed.
    pub fn ip(&self, args: &[&str]) {
        let mut argv = vec!["ip", "-n", &self.name];
        argv.extend_from_slice(args);
        run(&argv);
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

    /// The argv prefix that runs a program inside: `ip netns exec NAME`.
    pub fn exec(&self) -> Vec<String> {
        ["ip", "netns", "exec", &self.name].map(str::to_string).to_vec()
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

fn run(argv: &[&str]) {
    let status = Command::new(argv[0]).args(&argv[1..]).status().unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    assert!(status.success(), "{argv:?} failed");
}
