//! `cluster watch`, end to end, with the real llama.cpp on two namespace nodes (the head's
//! `llama-server` over the worker's `rpc-server`, as llama_launch.rs launches them), the watch run
//! as the binary in the foreground, its `--json` event lines read as they come. One cluster, the
//! faults in sequence, each wait bounded, states asserted (never how long anything took):
//!
//! (a) the head's `llama-server` stopped with SIGSTOP (its port still accepts, nothing answers) is
//! found stalled, its nodes' log tails saved, relaunched, and serves again; (b) the worker's
//! `rpc-server` killed is relaunched; (c) with `--max-restarts 2` the third fault gives up:
//! `cluster status --json` says so with the reason, and `--on-give-up` ran with the service and
//! the reason in its environment; the operator's `launch --replace` is no failure, the watch
//! reads the new launch; (d) the worker rebooted (a new boot id, its sessions and its toolbox's
//! processes gone) gets the whole service back; (e) the worker's GPU hangs (its kernel's log,
//! recorded amdgpu output, says so; its rpc-server dies of it): the watch says so with the
//! kernel's line, counts it, relaunches nothing while the reset runs and relaunches once it ended;
//! a `cluster stop` is no failure either; Ctrl-C ends the watch with 130, and `cluster status`
//! then says nothing of the stopped service. A second watch on the cluster is refused while the
//! first runs, and its metrics answer 503 before its first look ends.
//!
//! `--install` writes its systemd user unit under XDG_CONFIG_HOME and asks `systemctl --user`
//! (a stand-in on PATH here: this machine has no user systemd) to load and start it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;

use crate::support::cli::{json, stderr, stdout, strix_command};
use crate::support::cluster::{Link, TestCluster};
use crate::support::llama_image::llama_image;
use crate::support::llama_server::greedy_completion_of;
use crate::support::registry::Registry;
use crate::support::running_watch::RunningWatch;
use crate::support::serving_files::record;
use crate::support::tiny_llama::TinyLlama;

const SERVICE: &str = "tiny";
const SERVER_ARGS: [&str; 4] = ["--threads", "1", "--ctx-size", "2048"];

/// Two Thunderbolt nodes running the llama image in their toolbox `llama`, the tiny model on the
/// head, and this machine's own state directory for the watch.
struct WatchBed {
    cluster: TestCluster,
    model: String,
    port: String,
    state: TempDir,
    _registry: Registry,
}

impl WatchBed {
    fn start() -> WatchBed {
        let registry = Registry::start();
        let cluster = TestCluster::start_with(&registry, 2, Link::Thunderbolt);
        let image = llama_image(cluster.node(1).podman(), &registry, "llama-node:latest", "2026-11-01T10:00:00Z");
        let state = tempfile::tempdir().expect("a state directory");
        let mut bed = WatchBed {
            cluster,
            model: String::new(),
            port: crate::support::free_port().to_string(),
            state,
            _registry: registry,
        };
        let refresh = ["refresh", "--engine", "llama.cpp", "--image", &image, "--manager", "native", "--spread", "off"];
        let refreshed = bed.strix(&refresh);
        assert!(refreshed.status.success(), "{}", stderr(&refreshed));
        let path = bed.cluster.node(1).home.join("models/tiny-llama.gguf");
        std::fs::create_dir_all(path.parent().expect("a directory")).expect("mkdir models");
        std::fs::copy(TinyLlama::default().gguf(), &path).expect("the model on the head");
        bed.model = path.display().to_string();
        for index in 1..=2 {
            bed.cluster.node(index).free_gpu_memory();
        }
        bed
    }

    /// This machine's state directory (the watch's files) for every command.
    fn env(&self) -> Vec<(String, String)> {
        vec![("XDG_STATE_HOME".into(), self.state.path().display().to_string())]
    }

    /// `strix-toolbox --json cluster --nodes … ARGS`.
    fn command(&self, args: &[&str]) -> Command {
        let config = self.cluster.ssh_config();
        let nodes = self.cluster.nodes_arg();
        let mut argv = vec!["--json", "cluster"];
        argv.extend(["--ssh-config", config.to_str().expect("utf-8"), "--nodes", &nodes, "--connect-timeout", "3"]);
        argv.extend_from_slice(args);
        strix_command(&self.env(), &argv)
    }

    fn strix(&self, args: &[&str]) -> Output {
        self.command(args).stdin(Stdio::null()).output().expect("run strix-toolbox")
    }

    /// `cluster watch tiny FLAGS…`, running.
    fn watch(&self, flags: &[&str]) -> RunningWatch {
        let mut args = vec!["watch", SERVICE];
        args.extend_from_slice(flags);
        RunningWatch::start(self.command(&args))
    }

    fn launch(&self, options: &[&str]) -> Output {
        let mut args = vec!["launch", &self.model, "--name", SERVICE, "--port", &self.port, "--timeout", "120"];
        args.extend_from_slice(options);
        args.push("--");
        args.extend(SERVER_ARGS);
        self.strix(&args)
    }

    /// The pid of `process` in node `index`'s record of the service.
    fn pid(&self, index: usize, process: &str) -> String {
        let record = record(&self.cluster.node(index).serving_dir(), SERVICE).expect("the service's record");
        let processes = record["processes"].as_array().expect("processes");
        let found = processes.iter().find(|p| p["name"] == process).unwrap_or_else(|| panic!("no {process}: {record}"));
        found["pid"].to_string()
    }

    /// `kill -SIGNAL PID` inside node `index`'s toolbox.
    fn signal(&self, index: usize, signal: &str, pid: &str) {
        let kill = format!("kill -{signal} \"$1\"");
        let done = self.cluster.node(index).podman().remote(&["exec", "llama", "sh", "-c", &kill, "sh", pid]);
        assert!(done.status.success(), "kill -{signal} {pid}: {}", String::from_utf8_lossy(&done.stderr));
    }

    /// A greedy completion through the cluster's endpoint, asked from the worker.
    /// Asked up to three times (the first completion over RPC after a relaunch, on a busy
    /// machine, may outlast one request's limit); the last failure, when none answered.
    fn answers(&self) -> Result<(), String> {
        let url = format!("http://{}:{}", self.cluster.node(1).link_address, self.port);
        let netns = Some(self.cluster.node(2).netns().name());
        let mut last = String::new();
        for _ in 0..3 {
            match greedy_completion_of(netns, &url, Some(SERVICE), "Once upon a time", 8) {
                Ok(completion) if !completion.text.is_empty() => return Ok(()),
                Ok(completion) => last = format!("an empty completion: {completion:?}"),
                Err(error) => last = error,
            }
            std::thread::sleep(Duration::from_secs(2));
        }
        Err(last)
    }

    /// Node `index`'s kernel log (its host tree's `dev/kmsg`, what the node reads as /dev/kmsg)
    /// becomes `records`, at once (a reading never sees it half written).
    fn kernel_log(&self, index: usize, records: &str) {
        let dev = self.cluster.node(index).host_tree.path().join("dev");
        std::fs::create_dir_all(&dev).expect("the tree's dev/");
        let partial = dev.join("kmsg.partial");
        std::fs::write(&partial, records).expect("write the kernel log");
        std::fs::rename(&partial, dev.join("kmsg")).expect("the kernel log in place");
    }

    /// For scripts/bench/watch-recovery.sh: when STRIX_WATCH_RECOVERY_DIR names a directory, the
    /// moment each fault was made (`FAULT TIME` lines), read beside the watch's event log.
    fn fault_made(&self, fault: &str) {
        let Some(dir) = std::env::var_os("STRIX_WATCH_RECOVERY_DIR") else { return };
        let time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(Path::new(&dir).join("faults.txt"))
            .expect("the faults file");
        std::io::Write::write_all(&mut file, format!("{fault} {time}\n").as_bytes()).expect("write the fault");
    }

    /// `watch/tiny/` under the cluster's state directory on this machine.
    fn service_dir(&self) -> PathBuf {
        let clusters = self.state.path().join("strix-toolbox/clusters");
        let head =
            std::fs::read_dir(&clusters).expect("the clusters' state").next().expect("one cluster").expect("entry");
        head.path().join("watch").join(SERVICE)
    }
}

#[test]
fn the_watch_relaunches_a_stalled_a_crashed_and_a_rebooted_service_and_gives_up_past_its_budget() {
    let mut bed = WatchBed::start();
    let launched = bed.launch(&[]);
    assert!(launched.status.success(), "{}{}", stdout(&launched), stderr(&launched));
    let report = json(&launched);
    assert!(
        report["nodes"][0]["commands"][0]["argv"].as_array().expect("argv").iter().any(|a| a == "--metrics"),
        "llama-server is launched with its metrics on: {report}"
    );
    let gave_up_file = bed.state.path().join("gave-up");
    let on_give_up =
        format!("printf '%s\\n%s\\n' \"$STRIX_WATCH_SERVICE\" \"$STRIX_WATCH_REASON\" > '{}'", gave_up_file.display());
    let metrics = format!("127.0.0.1:{}", crate::support::free_port());
    let flags = [
        "--metrics",
        &metrics,
        "--interval",
        "3s",
        "--stall",
        "6s",
        "--failures",
        "5",
        "--grace",
        "120s",
        "--max-restarts",
        "2",
        "--memory-wait",
        "60s",
        "--on-give-up",
        &on_give_up,
    ];
    let mut watch = bed.watch(&flags);
    // Before its first look ends it has nothing to show: a scrape is refused (a failed scrape for
    // Prometheus, `up` 0), never an empty 200 (a target up with nothing to say).
    let url = format!("http://{metrics}/metrics");
    let scrape = || crate::support::http::request(None, "GET", &url, None, Duration::from_secs(30)).expect("a scrape");
    crate::support::wait_until("the watch's metrics endpoint", Duration::from_secs(30), || {
        std::net::TcpStream::connect(&metrics).is_ok()
    });
    let early = scrape();
    match early.status {
        503 => assert_eq!(early.body, "the watch has not finished its first look yet\n"),
        200 => assert!(early.body.contains("strix_watch_state{"), "a 200 has the watch's samples: {}", early.body),
        other => panic!("{other}: {}", early.body),
    }
    let found = watch.action("watching", None);
    assert_eq!(found["service"], SERVICE, "{found}");
    watch.serving();

    // Its metrics, as its last look read them (left once the look's judgement is said): the
    // engines' and the nodes', and its own, its state among them.
    let says_serving = |body: &str| {
        body.lines().any(|line| {
            line.starts_with("strix_watch_state{") && line.contains(r#"state="serving""#) && line.ends_with(" 1")
        })
    };
    crate::support::wait_until("the watch's state in its metrics", Duration::from_secs(60), || {
        says_serving(&scrape().body)
    });
    let scraped = scrape();
    assert_eq!(scraped.status, 200, "{}", scraped.body);
    let lines: Vec<&str> = scraped.body.lines().collect();
    assert!(lines.iter().any(|line| line.starts_with("strix_watch_probes_total{")), "{}", scraped.body);
    let engine = lines.iter().any(|line| line.starts_with("llamacpp:") && line.contains(r#"node="node1""#));
    assert!(engine, "the head's engine, relabelled: {}", scraped.body);
    assert!(lines.iter().any(|line| line.starts_with("strix_node_up{")), "{}", scraped.body);

    // One watch per cluster.
    let second = bed.strix(&["watch", "--interval", "3s"]);
    assert_eq!(second.status.code(), Some(1), "a conflict is a failure, not usage: {}", stderr(&second));
    assert!(stderr(&second).contains("a watch already runs on this cluster"), "{}", stderr(&second));

    // (a) The head's llama-server stopped: its port accepts, nothing answers.
    let server = bed.pid(1, "llama-server");
    bed.signal(1, "STOP", &server);
    bed.fault_made("stall");
    let relaunch = watch.action("relaunch", Some("stalled"));
    let reason = relaunch["reason"].as_str().expect("a reason");
    assert!(reason.starts_with("stalled: ") && reason.contains("log tails are in"), "{relaunch}");
    watch.action("relaunched", None);
    watch.serving();
    bed.answers().expect("the relaunched service answers through the endpoint");
    assert_ne!(bed.pid(1, "llama-server"), server, "a new llama-server");
    let saved: Vec<PathBuf> = logs_saved(&bed.service_dir(), "stalled");
    assert_eq!(saved.len(), 1, "one log file for the stall: {saved:?}");
    let text = std::fs::read_to_string(&saved[0]).expect("the saved log tails");
    assert!(text.contains("# stalled: stalled: ") && text.contains("llama-server (its last"), "{text}");

    // (b) The worker's rpc-server killed.
    let rpc = bed.pid(2, "rpc-server");
    bed.signal(2, "KILL", &rpc);
    bed.fault_made("crash");
    let relaunch = watch.action("relaunch", Some("failing"));
    assert!(relaunch["reason"].as_str().expect("a reason").starts_with("rpc-server on "), "{relaunch}");
    watch.action("relaunched", None);
    watch.serving();
    bed.answers().expect("served again after the worker's crash");
    assert_ne!(bed.pid(2, "rpc-server"), rpc, "a new rpc-server");

    // (c) A third fault within the window: --max-restarts 2 gives up, and says why.
    bed.signal(1, "KILL", &bed.pid(1, "llama-server"));
    let given_up = watch.action("give-up", Some("given-up"));
    let reason = given_up["reason"].as_str().expect("a reason");
    assert!(reason.contains("2 restart(s) in the last 6h already, the most --max-restarts 2"), "{given_up}");
    assert!(reason.ends_with("--on-give-up ran"), "{given_up}");
    let said = std::fs::read_to_string(&gave_up_file).expect("--on-give-up wrote its file");
    let said: Vec<&str> = said.lines().collect();
    assert_eq!(said[0], SERVICE, "STRIX_WATCH_SERVICE");
    assert!(
        said[1].starts_with("llama-server on ") && said[1].contains("--max-restarts 2"),
        "STRIX_WATCH_REASON: {said:?}"
    );
    let status = bed.strix(&["status"]);
    let report = json(&status);
    let watched = &report["watch"][0];
    assert_eq!((watched["service"].as_str(), watched["state"].as_str()), (Some(SERVICE), Some("given-up")), "{report}");
    assert_eq!(watched["given_up"], true, "{report}");
    assert!(watched["reason"].as_str().is_some_and(|r| r.contains("--max-restarts 2")), "{report}");
    assert!(
        report["disagreements"]
            .as_array()
            .expect("disagreements")
            .iter()
            .any(|d| d.as_str().is_some_and(|d| d.starts_with("the watch gave up on tiny"))),
        "{report}"
    );

    // The operator launches it again: no failure; the watch reads the new launch (a look between
    // the replace's stop and its start finds no record: dropped, then found again).
    let again = bed.launch(&["--replace"]);
    assert!(again.status.success(), "{}{}", stdout(&again), stderr(&again));
    let before = watch.seen.len();
    watch.until("the new launch read", |e| e["action"] == "reread" || e["action"] == "watching");
    watch.serving();
    let between: Vec<&Value> = watch.seen[before..].iter().filter(|e| e["action"] == "relaunch").collect();
    assert!(between.is_empty(), "the operator's launch is no failure: {between:?}");

    // (d) The worker rebooted: its ssh sessions end, it comes back with another boot id, and
    // what ran in its toolbox is gone.
    bed.cluster.node_mut(2).reboot();
    let restarted = bed.cluster.node(2).podman().remote(&["restart", "--time", "1", "llama"]);
    assert!(restarted.status.success(), "podman restart llama: {}", String::from_utf8_lossy(&restarted.stderr));
    bed.fault_made("reboot");
    let relaunch = watch.action("relaunch", Some("node-rebooted"));
    assert!(relaunch["reason"].as_str().expect("a reason").starts_with("node "), "{relaunch}");
    watch.action("relaunched", None);
    watch.serving();
    bed.answers().expect("the whole service is back after the reboot");

    // (e) The worker's GPU hangs: its kernel's log (recorded amdgpu output, tests/fixtures/
    // strix-gpu-hang) says MES stopped answering and the reset began, and its rpc-server died of
    // it. Said with the kernel's line and counted; no relaunch while the reset runs, however
    // many looks; once the kernel says it ended, the relaunch is the hang's.
    let kmsg = include_str!("../fixtures/strix-gpu-hang/dev/kmsg");
    let reset_ends = kmsg.find("\n6,2021,").expect("the reset's end") + 1;
    bed.kernel_log(2, &kmsg[..reset_ends]);
    bed.signal(2, "KILL", &bed.pid(2, "rpc-server"));
    bed.fault_made("gpu-hang");
    let hang = watch.action("gpu-hang", Some("gpu-hang"));
    let line = "amdgpu 0000:c5:00.0: amdgpu: MES failed to respond to msg=REMOVE_QUEUE";
    assert_eq!(hang["reason"], format!("GPU hang on node2: {line}"), "{hang}");
    let counter = |name: &str| {
        let body = scrape().body;
        let sample =
            body.lines().find(|line| line.starts_with(&format!("{name}{{")) && line.contains(r#"service="tiny""#));
        sample.and_then(|line| line.rsplit(' ').next()?.parse::<f64>().ok()).unwrap_or(-1.0)
    };
    let looks = counter("strix_watch_probes_total");
    crate::support::wait_until("two more looks while the GPU resets", Duration::from_secs(120), || {
        counter("strix_watch_probes_total") >= looks + 2.0
    });
    let during = watch.drain();
    assert!(!during.iter().any(|e| e["action"] == "relaunch"), "no relaunch into a reset: {during:?}");
    assert_eq!(counter("strix_watch_gpu_hangs_total"), 1.0, "counted once");
    bed.kernel_log(2, kmsg);
    let relaunch = watch.action("relaunch", Some("gpu-hang"));
    let reason = relaunch["reason"].as_str().expect("a reason");
    // Its rpc-server gone, the head's llama-server went with it: whichever the look found first.
    assert!(reason.starts_with(&format!("GPU hang on node2 ({line}); then ")), "{relaunch}");
    assert!(reason.contains(" is not running; its nodes' log tails are in "), "{relaunch}");
    watch.action("relaunched", None);
    watch.serving();
    bed.answers().expect("the whole service is back after the GPU's reset");

    // Its operator stops it: no failure, no longer watched, nothing relaunched.
    let stopped = bed.strix(&["stop", SERVICE]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    watch.action("dropped", None);
    assert_eq!(watch.interrupt(), Some(130), "Ctrl-C ends the watch with 130");
    assert!(record(&bed.cluster.node(1).serving_dir(), SERVICE).is_none(), "nothing was started after the stop");
    // Its last word is about a launch that is gone and a watch that ended: status says nothing of it.
    let status = json(&bed.strix(&["status"]));
    assert!(status.get("watch").is_none(), "{status}");
    let disagreements = status["disagreements"].as_array().expect("disagreements");
    assert!(!disagreements.iter().any(|d| d.as_str().is_some_and(|d| d.contains("watch"))), "{status}");
    if let Some(dir) = std::env::var_os("STRIX_WATCH_RECOVERY_DIR") {
        let log = bed.service_dir().parent().expect("watch/").join("events.jsonl");
        std::fs::copy(&log, Path::new(&dir).join("events.jsonl")).expect("the event log for the benchmark");
    }
    let actions = watch_actions(&bed);
    assert_eq!(actions.iter().filter(|a| **a == "relaunch").count(), 4, "the event log: {actions:?}");
    assert_eq!(actions.iter().filter(|a| **a == "gpu-hang").count(), 1, "the event log: {actions:?}");
}

/// The log files the watch saved for faults of `state`.
fn logs_saved(service_dir: &Path, state: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(service_dir)
        .expect("the service's watch directory")
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| path.to_string_lossy().ends_with(&format!("-{state}.log")))
        .collect();
    found.sort();
    found
}

/// Every action in the watch's event log, in order.
fn watch_actions(bed: &WatchBed) -> Vec<String> {
    let log = bed.service_dir().parent().expect("watch/").join("events.jsonl");
    let text = std::fs::read_to_string(&log).expect("the event log");
    text.lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
        .map(|event| event["action"].as_str().expect("an action").to_string())
        .collect()
}

#[test]
fn install_writes_the_unit_systemd_loads_and_uninstall_removes_it() {
    let home = tempfile::tempdir().expect("a home");
    let bin = home.path().join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    // systemctl's stand-in: this machine has no user systemd; it says what it was asked.
    let asked = home.path().join("systemctl.log");
    let stand_in = format!("#!/bin/sh\necho \"$*\" >> '{}'\n", asked.display());
    let systemctl = bin.join("systemctl");
    std::fs::write(&systemctl, stand_in).expect("write systemctl");
    std::fs::set_permissions(&systemctl, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let env = vec![
        ("HOME".to_string(), home.path().display().to_string()),
        ("XDG_CONFIG_HOME".to_string(), home.path().join("config").display().to_string()),
        ("XDG_STATE_HOME".to_string(), home.path().join("state").display().to_string()),
        ("PATH".to_string(), path),
    ];
    let run = |args: &[&str]| strix_command(&env, args).stdin(Stdio::null()).output().expect("run strix-toolbox");
    let on_give_up = "logger -t strix \"$STRIX_WATCH_SERVICE: $STRIX_WATCH_REASON\"";
    let installed = run(&[
        "--json",
        "cluster",
        "--nodes",
        "root@node1,node2",
        "watch",
        "tiny",
        "--interval",
        "90",
        "--window",
        "6h",
        "--on-give-up",
        on_give_up,
        "--install",
    ]);
    assert!(installed.status.success(), "{}", stderr(&installed));
    let report = json(&installed);
    assert_eq!(report["unit"], "strix-toolbox-watch-root_node1.service", "{report}");
    let unit = home.path().join("config/systemd/user/strix-toolbox-watch-root_node1.service");
    assert_eq!(report["file"], unit.display().to_string(), "{report}");
    assert_eq!(
        std::fs::read_to_string(&asked).expect("systemctl was asked"),
        "--user daemon-reload\n--user enable --now strix-toolbox-watch-root_node1.service\n"
    );
    let text = std::fs::read_to_string(&unit).expect("the unit file");
    let exec = text.lines().find(|l| l.starts_with("ExecStart=")).expect("ExecStart");
    assert!(
        exec.contains("\"cluster\" \"--nodes\" \"root@node1,node2\"")
            && exec.contains("\"watch\" \"tiny\" \"--interval\" \"90s\"")
            && exec.contains("\"--window\" \"6h\"")
            && exec.contains("\"logger -t strix \\\"$$STRIX_WATCH_SERVICE: $$STRIX_WATCH_REASON\\\"\""),
        "{exec}"
    );
    assert!(!exec.contains("--install"), "{exec}");
    // As the user manager would load it: not one warning (scripts/test-deps.sh installs systemd).
    let runtime = home.path().join("runtime");
    std::fs::create_dir(&runtime).expect("mkdir runtime");
    std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).expect("chmod");
    let verified = Command::new("systemd-analyze")
        .args(["--user", "verify"])
        .arg(&unit)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("HOME", home.path())
        .output()
        .expect("systemd-analyze (Debian's systemd package)");
    let said = format!("{}{}", String::from_utf8_lossy(&verified.stdout), String::from_utf8_lossy(&verified.stderr));
    assert!(verified.status.success() && said.trim().is_empty(), "systemd-analyze verify: {said}");
    let removed = run(&["--json", "cluster", "--nodes", "root@node1,node2", "watch", "--uninstall"]);
    assert!(removed.status.success(), "{}", stderr(&removed));
    assert_eq!(json(&removed)["installed"], false);
    assert!(!unit.exists(), "the unit file is gone");
    let log = std::fs::read_to_string(&asked).expect("systemctl was asked");
    assert!(
        log.ends_with("--user disable --now strix-toolbox-watch-root_node1.service\n--user daemon-reload\n"),
        "{log}"
    );
}

#[test]
fn a_duration_the_watch_cannot_take_is_a_usage_error_naming_its_flag() {
    let state = tempfile::tempdir().expect("a state directory");
    let env = vec![("XDG_STATE_HOME".to_string(), state.path().display().to_string())];
    for (flags, said) in [
        (["--interval", "1.5m"], "--interval \"1.5m\": a duration is whole seconds or a whole number with its unit"),
        (["--stall", "5d"], "--stall \"5d\": a duration is"),
        (["--interval", "0"], "--interval 0s: it must be more than zero"),
    ] {
        let mut args = vec!["cluster", "--nodes", "node1", "watch"];
        args.extend(flags);
        let output = strix_command(&env, &args).stdin(Stdio::null()).output().expect("run strix-toolbox");
        assert_eq!(output.status.code(), Some(2), "{flags:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(said), "{flags:?}: {}", stderr(&output));
    }
}
