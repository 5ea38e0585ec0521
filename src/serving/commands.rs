//! The command lines a launch runs inside the toolboxes, as argv vectors: Ray's head and workers,
//! `vllm serve`, the readiness query, and stopping. `--dry-run` prints exactly these.

use std::net::Ipv4Addr;

/// Ray's GCS port on the head.
pub const RAY_PORT: u16 = 6379;

/// Ray's head on the cluster link. No dashboard: it would listen on every address, and nothing
/// here needs it (readiness asks the GCS).
pub fn ray_head(link_ip: Ipv4Addr) -> Vec<String> {
    let mut argv = words(&["ray", "start", "--head", "--port"]);
    argv.push(RAY_PORT.to_string());
    argv.extend(words(&["--node-ip-address"]));
    argv.push(link_ip.to_string());
    argv.extend(ray_resources());
    argv.push("--include-dashboard=false".into());
    argv
}

/// A Ray worker joining `head_ip`, bound to its own link address.
pub fn ray_worker(head_ip: Ipv4Addr, link_ip: Ipv4Addr) -> Vec<String> {
    let mut argv = words(&["ray", "start", "--address"]);
    argv.push(format!("{head_ip}:{RAY_PORT}"));
    argv.extend(words(&["--node-ip-address"]));
    argv.push(link_ip.to_string());
    argv.extend(ray_resources());
    argv
}

/// One GPU per node: Strix Halo has one, and vLLM places one tensor-parallel rank per GPU.
fn ray_resources() -> Vec<String> {
    words(&["--num-gpus", "1", "--disable-usage-stats"])
}

/// `ray stop`: graceful (Ray waits up to its own grace period), or `--force`.
pub fn ray_stop(force: bool) -> Vec<String> {
    let mut argv = words(&["ray", "stop"]);
    if force {
        argv.push("--force".into());
    }
    argv
}

/// Asks the Ray cluster at `$1` (`HEAD:6379`) which nodes it has, as one JSON line:
/// `[{"ip", "alive", "gpus"}]`. `ray status` is no proof (it lists a dead worker as active for a
/// while); the GCS's own node table is. It is read with the GCS client `ray.nodes()` itself uses,
/// without starting a driver (seconds saved on every poll); where a Ray lacks that client, through
/// a driver, as `ray.nodes()`.
const RAY_NODES: &str = r#"import json, sys
try:
    from ray._raylet import GcsClient
    table = GcsClient(address=sys.argv[1]).get_all_node_info(timeout=20).values()
    nodes = [{"ip": n.node_manager_address, "alive": n.state == 0,
              "gpus": dict(n.resources_total).get("GPU", 0)} for n in table]
except (ImportError, AttributeError, TypeError):
    import ray
    ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
    nodes = [{"ip": n["NodeManagerAddress"], "alive": n["Alive"], "gpus": n["Resources"].get("GPU", 0)}
             for n in ray.nodes()]
print(json.dumps(nodes))
"#;

pub fn ray_nodes(head_ip: Ipv4Addr) -> Vec<String> {
    let mut argv = words(&["python3", "-c", RAY_NODES]);
    argv.push(format!("{head_ip}:{RAY_PORT}"));
    argv
}

/// `vllm serve MODEL` with tensor parallelism `tp`; across nodes through Ray (vLLM's Ray executor
/// joins the running cluster), on one node with vLLM's default executor.
pub fn vllm_serve(model: &str, tp: usize, port: u16, over_ray: bool, extra: &[String]) -> Vec<String> {
    let mut argv = words(&["vllm", "serve", model, "--tensor-parallel-size"]);
    argv.push(tp.to_string());
    if over_ray {
        argv.extend(words(&["--distributed-executor-backend", "ray"]));
    }
    argv.push("--port".into());
    argv.push(port.to_string());
    argv.extend(extra.iter().cloned());
    argv
}

/// Starts `$2…` in the background with its output appended to the file `$1`, and prints its pid.
/// A constant script: the log path and the command follow it as positional parameters.
const DETACHED: &str = r#"log="$1"; shift; "$@" >>"$log" 2>&1 </dev/null & echo $!"#;

/// `command`, detached, its output in `log`: the exec returns at once with the pid.
pub fn detached(log: &str, command: &[String]) -> Vec<String> {
    let mut argv = words(&["sh", "-c", DETACHED, "sh", log]);
    argv.extend(command.iter().cloned());
    argv
}

/// `kill -SIGNAL PID`.
pub fn kill(signal: &str, pid: u32) -> Vec<String> {
    vec!["kill".into(), format!("-{signal}"), pid.to_string()]
}

/// Exits 0 while process `$1` runs. A toolbox's PID 1 may not reap (`sleep infinity` in a native
/// toolbox made before `--init`, Toolbx's init), and it may not have reaped yet what a detached command leaves, so an exited process can linger as a zombie that
/// `kill -0` still finds: its state in /proc says.
const PID_ALIVE: &str =
    r#"s=$(cat "/proc/$1/stat" 2>/dev/null) || exit 1; s=${s##*) }; case $s in Z*|X*) exit 1;; esac"#;

pub fn pid_alive(pid: u32) -> Vec<String> {
    let mut argv = words(&["sh", "-c", PID_ALIVE, "sh"]);
    argv.push(pid.to_string());
    argv
}

/// Prints what of a launch runs in the toolbox, one exec for both: `vllm` when process `$1` runs
/// (`-`: none recorded), `ray` when a raylet does (zombies do not count, as above).
const LAUNCH_ALIVE: &str = r#"alive() { s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; s=${s##*) }; case $s in Z*|X*) return 1;; esac; }
if [ "$1" != - ] && alive "$1"; then echo vllm; fi
for f in /proc/[0-9]*/stat; do s=$(cat "$f" 2>/dev/null) || continue; case $s in *"(raylet) "[!ZX]*) echo ray; exit 0;; esac; done"#;

pub fn launch_alive(vllm_pid: Option<u32>) -> Vec<String> {
    let mut argv = words(&["sh", "-c", LAUNCH_ALIVE, "sh"]);
    argv.push(vllm_pid.map_or("-".to_string(), |pid| pid.to_string()));
    argv
}

/// Exits 0 while a process whose name is `$1` runs (zombies do not count, as above).
const PROCESS_ALIVE: &str = r#"for f in /proc/[0-9]*/stat; do s=$(cat "$f" 2>/dev/null) || continue; case $s in *"($1) "[!ZX]*) exit 0;; esac; done; exit 1"#;

pub fn process_alive(name: &str) -> Vec<String> {
    words(&["sh", "-c", PROCESS_ALIVE, "sh", name])
}

/// Ray's own logs on a node, newest session (what says why a worker did not join).
pub const RAY_LOGS: &str = "/tmp/ray/session_latest/logs";

fn words(words: &[&str]) -> Vec<String> {
    words.iter().map(|word| word.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exits_zero(argv: &[String]) -> bool {
        std::process::Command::new(&argv[0]).args(&argv[1..]).status().unwrap().success()
    }

    #[test]
    fn one_look_says_what_of_a_launch_runs() {
        let said = |argv: Vec<String>| {
            let output = std::process::Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
            assert!(output.status.success());
            String::from_utf8(output.stdout).unwrap()
        };
        assert_eq!(said(launch_alive(Some(std::process::id()))), "vllm\n", "this test's own process runs");
        assert_eq!(said(launch_alive(None)), "", "no raylet on a test machine");
        assert_eq!(said(launch_alive(Some(u32::MAX - 1))), "");
    }

    #[test]
    fn liveness_sees_running_processes_and_not_zombies() {
        assert!(exits_zero(&pid_alive(std::process::id())));
        assert!(!exits_zero(&pid_alive(u32::MAX - 1)));
        // A child that exited and was not reaped yet: a zombie.
        let mut zombie = std::process::Command::new("true").spawn().unwrap();
        let pid = zombie.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap().contains(") Z") {
            assert!(std::time::Instant::now() < deadline, "the child never exited");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!exits_zero(&pid_alive(pid)), "a zombie is not alive");
        zombie.wait().unwrap();
        let mut sleeper = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        assert!(exits_zero(&process_alive("sleep")));
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        assert!(!exits_zero(&process_alive("strix-no-such-process")));
    }

    #[test]
    fn ray_binds_the_link_address_with_one_gpu() {
        let head = ray_head(Ipv4Addr::new(192, 168, 2, 1)).join(" ");
        assert_eq!(
            head,
            "ray start --head --port 6379 --node-ip-address 192.168.2.1 --num-gpus 1 --disable-usage-stats \
             --include-dashboard=false"
        );
        let worker = ray_worker(Ipv4Addr::new(192, 168, 2, 1), Ipv4Addr::new(192, 168, 2, 3)).join(" ");
        assert_eq!(
            worker,
            "ray start --address 192.168.2.1:6379 --node-ip-address 192.168.2.3 --num-gpus 1 --disable-usage-stats"
        );
    }

    #[test]
    fn vllm_uses_ray_only_across_nodes() {
        let extra = vec!["--max-model-len".to_string(), "8192".to_string()];
        assert_eq!(
            vllm_serve("org/m", 2, 8000, true, &extra).join(" "),
            "vllm serve org/m --tensor-parallel-size 2 --distributed-executor-backend ray --port 8000 --max-model-len 8192"
        );
        assert_eq!(
            vllm_serve("org/m", 1, 8000, false, &[]).join(" "),
            "vllm serve org/m --tensor-parallel-size 1 --port 8000"
        );
    }

    #[test]
    fn detached_runs_the_command_in_the_background_and_prints_its_pid() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("out.log");
        let argv = detached(
            log.to_str().unwrap(),
            &words(&["sh", "-c", "echo \"$1 went\"; exit 3", "sh", "a 'quoted' $word"]),
        );
        let output = std::process::Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        assert!(output.status.success());
        let pid: u32 = String::from_utf8_lossy(&output.stdout).trim().parse().unwrap();
        assert!(pid > 1);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::fs::read_to_string(&log).unwrap_or_default().is_empty() {
            assert!(std::time::Instant::now() < deadline, "the detached command never wrote");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "a 'quoted' $word went\n");
    }
}
