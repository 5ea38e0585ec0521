//! Every transition on a virtual clock: looks every `--interval` (30 s by default), the moments
//! passed in, nothing read from a clock.

use std::time::Duration;

use super::*;
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
        }
    }

    fn serving() -> Bench {
        Bench::new(WatchPolicy::default(), Start::Serving)
    }

    /// One interval later, one look with this probe outcome, answered at once.
    fn look(&mut self, probe: ProbeOutcome) -> Step {
        self.now = self.now.after(self.watcher.policy().interval);
        self.look_until(self.now, probe)
    }

    /// A look begun at `began`, ended now.
    fn look_until(&mut self, began: Moment, probe: ProbeOutcome) -> Step {
        let nodes = ["strix1", "strix2"]
            .iter()
            .zip(self.boot_ids)
            .zip(self.reachable)
            .map(|((node, boot), reachable)| NodeObservation {
                node: node.to_string(),
                reachable,
                boot_id: Some(boot.to_string()),
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
    fn unanswered(&mut self) -> Step {
        let began = self.now.after(self.watcher.policy().interval);
        self.now = began.after(self.watcher.policy().probe_deadline());
        self.look_until(began, ProbeOutcome::TimedOut)
    }

    /// A healthy look: the probe answers, and its tokens move the counter.
    fn healthy(&mut self) -> Step {
        self.generated += 8.0;
        self.look(ProbeOutcome::Passed)
    }
}

fn nothing(state: State) -> Step {
    Step { state, action: Action::Nothing }
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
    assert_eq!(bench.watcher.tally(), Tally { probes: 10, probe_failures: 0, restarts: 0 });
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
    assert_eq!(step.action, Action::Relaunch(Fault::Stalled { quiet_seconds: 90, running: Some(3.0) }));
    let Action::Relaunch(fault) = step.action else { unreachable!() };
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
    assert_eq!(step.action, Action::Relaunch(Fault::Stalled { quiet_seconds: 60, running: None }));
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
    assert_eq!(step.action, Action::Relaunch(Fault::Failing { failures: 3, last: "HTTP 500".into() }));
    assert_eq!(bench.watcher.tally(), Tally { probes: 6, probe_failures: 5, restarts: 1 });
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
    assert_eq!(step.action, Action::Relaunch(Fault::Failing { failures: 3, last: "HTTP 500".into() }));

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
        (State::NodeRebooted, Action::Relaunch(Fault::NodeRebooted { node: "strix2".into() }))
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
    assert_eq!(step.action, Action::Relaunch(Fault::RankDown { node: "strix2".into(), process: "rpc-server".into() }));
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
        assert!(matches!(crash(&mut bench).action, Action::Relaunch(Fault::RankDown { .. })));
        bench.watcher.started(bench.now);
        bench.healthy();
    }
    let step = crash(&mut bench);
    let Action::GiveUp(reason) = &step.action else { panic!("{step:?}") };
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
    assert!(matches!(bench.look(ProbeOutcome::Passed).action, Action::Relaunch(_)));
    bench.rpc_alive = true;
    bench.watcher.started(bench.now);
    for _ in 0..20 {
        bench.healthy();
    }
    bench.rpc_alive = false;
    assert!(
        matches!(bench.look(ProbeOutcome::Passed).action, Action::Relaunch(_)),
        "the first restart left the window"
    );
}

#[test]
fn a_failed_relaunch_spends_the_budget_too() {
    let policy = WatchPolicy { max_restarts: 2, ..WatchPolicy::default() };
    let mut bench = Bench::new(policy, Start::Serving);
    bench.rpc_alive = false;
    assert!(matches!(bench.look(ProbeOutcome::Passed).action, Action::Relaunch(_)));
    let step = bench.watcher.relaunch_failed(bench.now, "ssh: connection refused");
    assert_eq!(step.action, Action::Relaunch(Fault::LaunchFailed { why: "ssh: connection refused".into() }));
    let step = bench.watcher.relaunch_failed(bench.now, "ssh: connection refused");
    let Action::GiveUp(reason) = step.action else { panic!() };
    assert!(reason.starts_with("the relaunch failed: ssh: connection refused; 2 restart(s)"), "{reason}");
}

#[test]
fn memory_that_never_frees_gives_up() {
    let mut bench = Bench::serving();
    let step = bench.watcher.give_up("strix2 still holds 60.0 GiB".into());
    assert_eq!(step, Step { state: State::GivenUp, action: Action::GiveUp("strix2 still holds 60.0 GiB".into()) });
    assert_eq!(bench.healthy().state, State::GivenUp);
}
