//! A busy toolbox: a `refresh` of a toolbox another process is refreshing waits for it, saying so
//! once, and goes on when the other one ends; `--no-wait` fails at once, and the wait is bounded.
//! The other "refresh" is this test's process holding the toolbox's lock, as a refresh does (the
//! lock file under `$XDG_RUNTIME_DIR/strix-toolbox`, with its pid in it).

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::cli::{json, refresh_vllm, run_strix, stderr, strix_command};
use crate::support::host_tree::materialize;
use crate::support::image::stand_in_image;
use crate::support::podman::PodmanService;
use crate::support::registry::Registry;
use crate::support::toolbox_lock::hold_toolbox_lock;

#[test]
fn a_second_refresh_waits_for_the_first_or_fails_at_once_with_no_wait() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let image = stand_in_image(&podman, &registry, "vllm:latest", "2026-11-01T10:00:00Z");
    let host = materialize("strix-thunderbolt-only");
    let host_arg = host.path().to_str().unwrap();
    let env = podman.env();
    let held = hold_toolbox_lock(&env, "vllm");
    let holder = format!("pid {}", std::process::id());

    // --no-wait: the Toolbox error, at once.
    let refused = run_strix(&env, &refresh_vllm(host_arg, &image, &["--json", "--no-wait"]));
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let error = &json(&refused)["error"];
    assert_eq!(error["kind"], "toolbox", "{error}");
    assert!(error["message"].as_str().unwrap().contains(&format!("already refreshing vllm ({holder}")), "{error}");

    // A bounded wait that runs out names the holder and how to stop it.
    let started = Instant::now();
    let timed_out = run_strix(&env, &refresh_vllm(host_arg, &image, &["--json", "--wait", "1"]));
    assert_eq!(timed_out.status.code(), Some(1), "{}", stderr(&timed_out));
    assert!(started.elapsed() >= Duration::from_secs(1));
    let message = json(&timed_out)["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("still refreshing vllm after 1 s"), "{message}");
    assert!(podman.container_names().is_empty(), "nothing was made while it waited");

    // By default it waits, says so once, and goes on when the other one ends.
    let mut waiting = strix_command(&env, &refresh_vllm(host_arg, &image, &["--json"]))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the second refresh");
    let (lines, received) = mpsc::channel();
    let reader = BufReader::new(waiting.stderr.take().unwrap());
    let stderr_lines = std::thread::spawn(move || {
        for line in reader.lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let said = received.recv_timeout(Duration::from_secs(30)).expect("the waiting refresh says why it waits");
    assert_eq!(
        said,
        format!("warning: waiting for another refresh of vllm ({holder}) to finish, up to 10 minutes; --no-wait fails at once")
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(waiting.try_wait().unwrap().is_none(), "it waits while the lock is held");
    assert!(podman.container_names().is_empty());

    drop(held);
    let output = waiting.wait_with_output().expect("the second refresh ends");
    stderr_lines.join().unwrap();
    let rest: Vec<String> = received.try_iter().collect();
    assert!(output.status.success(), "{rest:?}");
    assert!(!rest.iter().any(|l| l.contains("waiting")), "said once: {rest:?}");
    assert_eq!(json(&output)["action"], "created");
    assert_eq!(podman.container_names(), ["vllm"]);
}
