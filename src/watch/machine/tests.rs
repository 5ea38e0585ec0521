//! Every transition on a virtual clock: looks every `--interval` (30 s by default), the moments
//! passed in, nothing read from a clock.

use std::time::Duration;

use super::*;
use crate::host::gpu_hangs::{hangs, GpuHang};
use crate::watch::observation::{NodeObservation, Progress, RankObservation};

/// The watch's virtual clock and what the service shows it.
struct Bench {
    watcher: Watcher,
    now: Moment,
    boot_ids: [&'static str; 2],
    reachable: [bool; 2],
    rpc_alive: bool,
    paused: bool,
    generated: f64,
    running: f64,
    /// None: the metrics cannot be read.
    metrics: bool,
    /// What each node's kernel tells of its GPU's hangs.
    gpu_hangs: [Vec<GpuHang>; 2],
}

impl Bench {
    fn new(policy: WatchPolicy, start: Start) -> Bench {
        Bench {
            watcher: Watcher::new(policy, start),
            now: Moment(0),
            boot_ids: ["boot-a", "boot-b"],
            reachable: [true, true],
            rpc_alive: true,
            paused: false,
            generated: 0.0,
            running: 0.0,
            metrics: true,
            gpu_hangs: [Vec::new(), Vec::new()],
        }
    }

    fn serving() -> Bench {
        Bench::new(WatchPolicy::default(), Start::Serving)
    }

    /// One interval later, one look with this probe outcome, answered at once.
    fn look(&mut self, probe: ProbeOutcome) -> LookOutcome {
        self.now = self.now.after(self.watcher.policy().interval);
        self.look_until(self.now, probe)
    }

    /// A look begun at `began`, ended now.
    fn look_until(&mut self, began: Moment, probe: ProbeOutcome) -> LookOutcome {
        let nodes = ["strix1", "strix2"]
            .iter()
            .zip(self.boot_ids)
            .zip(self.reachable)
            .zip(self.gpu_hangs.clone())
            .map(|(((node, boot), reachable), gpu_hangs)| NodeObservation {
                node: node.to_string(),
                reachable,
                boot_id: Some(boot.to_string()),
                gpu_hangs,
            })
            .collect();
        let ranks = vec![
            RankObservation { node: "strix1".into(), process: "llama-server".into(), alive: true },
            RankObservation { node: "strix2".into(), process: "rpc-server".into(), alive: self.rpc_alive },
        ];
        let progress = self.metrics.then_some(Progress { generated: self.generated, running: self.running });
        let seen = Observation { began, at: self.now, paused: self.paused, nodes, ranks, probe, progress };
        self.watcher.observe(&seen)
    }

    /// A look whose probe the engine took and never answered: it begins an interval after the
    /// last one began and ends when the probe's deadline runs out.
    fn unanswered(&mut self) -> LookOutcome {
        let began = self.now.after(self.watcher.policy().interval);
        self.now = began.after(self.watcher.policy().probe_deadline());
        self.look_until(began, ProbeOutcome::TimedOut)
    }

    /// A healthy look: the probe answers, and its tokens move the counter.
    fn healthy(&mut self) -> LookOutcome {
        self.generated += 8.0;
        self.look(ProbeOutcome::Passed)
    }
}

fn nothing(state: State) -> LookOutcome {
    LookOutcome { state, action: Decision::Nothing, news: Vec::new() }
}

fn failed() -> ProbeOutcome {
    ProbeOutcome::Failed("HTTP 500".into())
}

#[test]
fn a_healthy_service_stays_serving_and_idle_is_not_a_stall() {
    let mut bench = Bench::serving();
    for _ in 0..10 {
        assert_eq!(bench.healthy(), nothing(State::Serving));
    }
    // Idle for an hour: no request running, the counter still.
    for _ in 0..120 {
        assert_eq!(bench.look(ProbeOutcome::Skipped), nothing(State::Serving));
    }
    assert_eq!(bench.watcher.tally(), Tally { probes: 10, probe_failures: 0, restarts: 0, gpu_hangs: 0 });
}

#[test]
fn requests_running_and_no_token_for_the_stall_is_stalled() {
    // vLLM's deadlock: /health and the metrics answer, requests run, the counter stands, the
    // probe is taken and never answered.
    let mut bench = Bench::serving();
    bench.healthy();
    bench.running = 3.0;
    assert_eq!(bench.look(ProbeOutcome::Skipped), nothing(State::Serving), "30 s quiet: not yet");
    let step = bench.unanswered();
    assert_eq!(step.state, State::Stalled);
    assert_eq!(step.action, Decision::Relaunch(Fault::Stalled { quiet_seconds: 90, running: Some(3.0) }));
    let Decision::Relaunch(fault) = step.action else { unreachable!() };
    assert_eq!(fault.reason(), "stalled: 3 request(s) running and no token for 90s");
    assert_eq!(bench.watcher.tally().restarts, 1);
}

#[test]
fn a_stopped_server_is_found_stalled_at_the_end_of_the_next_look_within_two_intervals() {
    // SIGSTOP just after a look: the metrics time out (unreadable), the probe is taken, unanswered.
    let mut bench = Bench::serving();
    bench.healthy();
    let fault_at = bench.now.after(Duration::from_secs(1));
    bench.metrics = false;
    let step = bench.unanswered();
    assert_eq!(step.action, Decision::Relaunch(Fault::Stalled { quiet_seconds: 60, running: None }));
    assert!(
        bench.now.since(fault_at) <= 2 * bench.watcher.policy().interval,
        "found {:?} after",
        bench.now.since(fault_at)
    );
}

#[test]
fn failures_in_a_row_make_failing_and_a_pass_between_resets_them() {
    let mut bench = Bench::serving();
    assert_eq!(bench.look(failed()), nothing(State::Serving));
    assert_eq!(bench.look(failed()), nothing(State::Serving));
    assert_eq!(bench.healthy(), nothing(State::Serving), "a pass resets the count");
    bench.look(failed());
    bench.look(failed());
    let step = bench.look(failed());
    assert_eq!(step.state, State::Failing);
    assert_eq!(step.action, Decision::Relaunch(Fault::Failing { failures: 3, last: "HTTP 500".into() }));
    assert_eq!(bench.watcher.tally(), Tally { probes: 6, probe_failures: 5, restarts: 1, gpu_hangs: 0 });
}

#[test]
fn loading_gets_its_grace_and_ends_early_on_a_pass() {
    let policy = WatchPolicy { grace: Duration::from_secs(300), ..WatchPolicy::default() };
    let mut bench = Bench::new(policy.clone(), Start::Loading(Moment(0)));
    bench.metrics = false;
    // Nine looks in 270 s: refused or silent, within the grace: loading, nothing counted.
    for probe in [failed(), ProbeOutcome::TimedOut].into_iter().cycle().take(9) {
        assert_eq!(bench.look(probe), nothing(State::Loading));
    }
    // 300 s: the grace is over; the failures count from here, the silence from here.
    assert_eq!(bench.look(ProbeOutcome::TimedOut), nothing(State::Serving));
    assert_eq!(bench.look(failed()), nothing(State::Serving));
    let step = bench.look(failed());
    assert_eq!(step.action, Decision::Relaunch(Fault::Failing { failures: 3, last: "HTTP 500".into() }));

    // A model that answers before its grace is serving at once, and counted from then.
    let mut bench = Bench::new(policy, Start::Loading(Moment(0)));
    assert_eq!(bench.look(failed()), nothing(State::Loading));
    assert_eq!(bench.healthy(), nothing(State::Serving));
    bench.look(failed());
    bench.look(failed());
    assert_eq!(bench.look(failed()).state, State::Failing, "well inside the old grace");
}

#[test]
fn a_node_down_waits_and_a_node_back_from_a_reboot_relaunches() {
    let mut bench = Bench::serving();
    bench.healthy();
    bench.reachable[1] = false;
    for _ in 0..20 {
        assert_eq!(bench.look(failed()), nothing(State::NodeDown), "a node down counts no failure");
    }
    // Back, same boot: a network blip; serving.
    bench.reachable[1] = true;
    assert_eq!(bench.healthy(), nothing(State::Serving));
    // Down again, back with another boot id: it rebooted.
    bench.reachable[1] = false;
    bench.look(ProbeOutcome::TimedOut);
    bench.reachable[1] = true;
    bench.boot_ids[1] = "boot-b2";
    let step = bench.look(ProbeOutcome::TimedOut);
    assert_eq!(
        (step.state, step.action),
        (State::NodeRebooted, Decision::Relaunch(Fault::NodeRebooted { node: "strix2".into() }))
    );
    // The relaunch came back: the new boot id is the one known now.
    bench.watcher.started(bench.now);
    assert_eq!(bench.look(ProbeOutcome::Passed), nothing(State::Serving));
    assert_eq!(bench.healthy(), nothing(State::Serving));
}

#[test]
fn a_rank_gone_relaunches_even_while_loading() {
    let mut bench = Bench::new(WatchPolicy::default(), Start::Loading(Moment(0)));
    bench.rpc_alive = false;
    let step = bench.look(ProbeOutcome::TimedOut);
    assert_eq!(
        step.action,
        Decision::Relaunch(Fault::RankDown { node: "strix2".into(), process: "rpc-server".into() })
    );
    assert_eq!(step.state, State::Failing);
}

#[test]
fn paused_does_nothing_and_resuming_starts_a_grace() {
    let mut bench = Bench::serving();
    bench.paused = true;
    bench.rpc_alive = false;
    for _ in 0..10 {
        assert_eq!(bench.look(failed()), nothing(State::Paused));
    }
    bench.paused = false;
    bench.rpc_alive = true;
    assert_eq!(bench.look(failed()), nothing(State::Loading), "maintenance may have restarted anything");
    assert_eq!(bench.healthy(), nothing(State::Serving));
    assert_eq!(bench.watcher.tally().restarts, 0);
}

#[test]
fn past_the_budget_it_gives_up_with_the_reason_and_stays_given_up() {
    let policy = WatchPolicy { max_restarts: 2, window: Duration::from_secs(3600), ..WatchPolicy::default() };
    let mut bench = Bench::new(policy, Start::Serving);
    let crash = |bench: &mut Bench| {
        bench.rpc_alive = false;
        let step = bench.look(ProbeOutcome::Passed);
        bench.rpc_alive = true;
        step
    };
    for _ in 0..2 {
        assert!(matches!(crash(&mut bench).action, Decision::Relaunch(Fault::RankDown { .. })));
        bench.watcher.started(bench.now);
        bench.healthy();
    }
    let step = crash(&mut bench);
    let Decision::GiveUp(reason) = &step.action else { panic!("{step:?}") };
    assert_eq!(step.state, State::GivenUp);
    assert!(
        reason.starts_with("rpc-server on strix2 is not running; 2 restart(s) in the last 1h already, the most --max-restarts 2 --window 1h allow"),
        "{reason}"
    );
    assert_eq!(bench.watcher.given_up(), Some(reason.as_str()));
    // Serving again by hand or not, it stays given up until a human launches again.
    assert_eq!(bench.healthy().state, State::GivenUp);
    assert_eq!(bench.watcher.tally().restarts, 2);
}

#[test]
fn the_budget_refills_as_the_window_moves() {
    let policy = WatchPolicy { max_restarts: 1, window: Duration::from_secs(600), ..WatchPolicy::default() };
    let mut bench = Bench::new(policy, Start::Serving);
    bench.rpc_alive = false;
    assert!(matches!(bench.look(ProbeOutcome::Passed).action, Decision::Relaunch(_)));
    bench.rpc_alive = true;
    bench.watcher.started(bench.now);
    for _ in 0..20 {
        bench.healthy();
    }
    bench.rpc_alive = false;
    assert!(
        matches!(bench.look(ProbeOutcome::Passed).action, Decision::Relaunch(_)),
        "the first restart left the window"
    );
}

#[test]
fn a_failed_relaunch_spends_the_budget_too() {
    let policy = WatchPolicy { max_restarts: 2, ..WatchPolicy::default() };
    let mut bench = Bench::new(policy, Start::Serving);
    bench.rpc_alive = false;
    assert!(matches!(bench.look(ProbeOutcome::Passed).action, Decision::Relaunch(_)));
    let step = bench.watcher.relaunch_failed(bench.now, "ssh: connection refused");
    assert_eq!(step.action, Decision::Relaunch(Fault::LaunchFailed { why: "ssh: connection refused".into() }));
    let step = bench.watcher.relaunch_failed(bench.now, "ssh: connection refused");
    let Decision::GiveUp(reason) = step.action else { panic!() };
    assert!(reason.starts_with("the relaunch failed: ssh: connection refused; 2 restart(s)"), "{reason}");
}

#[test]
fn memory_that_never_frees_gives_up() {
    let mut bench = Bench::serving();
    let step = bench.watcher.give_up("strix2 still holds 60.0 GiB".into());
    let given_up = Decision::GiveUp("strix2 still holds 60.0 GiB".into());
    assert_eq!(step, LookOutcome { state: State::GivenUp, action: given_up, news: Vec::new() });
    assert_eq!(bench.healthy().state, State::GivenUp);
}

/// strix2's kernel log (ROCm legacy-rocm-build issue 5724, recorded as `/dev/kmsg` records, in
/// tests/fixtures/strix-gpu-hang): a page fault long before, then MES stops answering and the GPU
/// is reset; `succeeded` ends the reset.
fn strix2_kernel(reset: Option<&str>) -> Vec<GpuHang> {
    let log = include_str!("../../../tests/fixtures/strix-gpu-hang/dev/kmsg");
    let cut = log.find("GPU reset(1)").map(|at| log[..at].rfind('\n').map_or(0, |newline| newline + 1)).unwrap();
    match reset {
        None => hangs(&log[..cut]),
        Some(_) => hangs(log),
    }
}

#[test]
fn a_gpu_hang_is_said_and_counted_its_reset_waited_for_and_the_fault_after_it_is_its() {
    let mut bench = Bench::serving();
    // What the log held before the watch's first look is old.
    bench.gpu_hangs[1] = hangs(
        "3,10,1000000,-;amdgpu 0000:c5:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32771)\n",
    );
    assert_eq!(bench.healthy(), nothing(State::Serving));
    // MES stops answering and the reset begins: said with the kernel's line, counted, waited for.
    bench.gpu_hangs[1] = strix2_kernel(None);
    bench.rpc_alive = false;
    let step = bench.look(failed());
    assert_eq!((step.state, &step.action), (State::GpuHang, &Decision::Nothing), "no relaunch into a reset");
    assert_eq!(
        step.news,
        ["GPU hang on strix2: amdgpu 0000:c5:00.0: amdgpu: MES failed to respond to msg=REMOVE_QUEUE"]
    );
    assert_eq!(bench.watcher.tally().gpu_hangs, 1);
    for _ in 0..4 {
        assert_eq!(bench.look(failed()), nothing(State::GpuHang), "its silence is the reset's");
    }
    // The reset ended; its rank died of it: the relaunch is the hang's.
    bench.gpu_hangs[1] = strix2_kernel(Some("succeeded"));
    let step = bench.look(failed());
    let Decision::Relaunch(fault) = &step.action else { panic!("{step:?}") };
    assert_eq!(step.state, State::GpuHang);
    assert_eq!(
        fault.reason(),
        "GPU hang on strix2 (amdgpu 0000:c5:00.0: amdgpu: MES failed to respond to msg=REMOVE_QUEUE); then rpc-server \
         on strix2 is not running"
    );
    assert!(step.news.is_empty() && bench.watcher.tally().gpu_hangs == 1, "said once, counted once");
    // After the relaunch, a fault is its own again.
    bench.watcher.started(bench.now);
    bench.rpc_alive = true;
    bench.healthy();
    bench.rpc_alive = false;
    let Decision::Relaunch(fault) = bench.look(ProbeOutcome::Passed).action else { panic!() };
    assert_eq!(fault, Fault::RankDown { node: "strix2".into(), process: "rpc-server".into() });
}

#[test]
fn a_gpu_hang_alone_relaunches_nothing_a_reset_past_the_wait_or_failed_gives_up() {
    // Another process's page fault: said and counted; the service serves on.
    let mut bench = Bench::serving();
    bench.healthy();
    bench.gpu_hangs[0] =
        hangs("3,4,5000000,-;amdgpu 0000:c5:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32771)\n");
    let step = bench.healthy();
    assert_eq!((step.state, step.action, step.news.len()), (State::Serving, Decision::Nothing, 1));

    // A reset that never ends: given up past --memory-wait (5 min).
    let mut bench = Bench::serving();
    bench.healthy();
    bench.gpu_hangs[1] = strix2_kernel(None);
    assert_eq!(bench.look(failed()).state, State::GpuHang);
    for _ in 0..9 {
        assert_eq!(bench.look(failed()).state, State::GpuHang, "{:?}", bench.now);
    }
    let Decision::GiveUp(reason) = bench.look(failed()).action else { panic!("5 min of reset") };
    assert!(reason.starts_with("the GPU reset on strix2 (after amdgpu ") && reason.contains("5m"), "{reason}");

    // A reset that fails: given up at once, the node needs a reboot.
    let mut bench = Bench::serving();
    bench.healthy();
    bench.gpu_hangs[1] = strix2_kernel(None);
    bench.look(failed());
    let log = include_str!("../../../tests/fixtures/strix-gpu-hang/dev/kmsg").replace("succeeded!", "failed");
    bench.gpu_hangs[1] = hangs(&log);
    let Decision::GiveUp(reason) = bench.look(failed()).action else { panic!("a failed reset") };
    assert!(reason.contains("GPU reset(1) failed") && reason.contains("rebooted"), "{reason}");
}
