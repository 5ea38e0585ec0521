//! The watch's decisions, a pure function of what it saw and when: each look ([`Observation`])
//! gives the service's state and what to do (nothing, relaunch the whole service, or give up).
//!
//! In the order they are asked:
//! - given up stays given up (a human looks next); paused does nothing and, on resume, starts
//!   afresh (the operator may have restarted anything);
//! - node down: a node's agent does not answer; wait (it may be rebooting), count nothing;
//! - node rebooted: a node's boot id changed: relaunch, loading or not;
//! - GPU hang: a node's kernel says its GPU hung ([`super::gpu`]): said, with the kernel's line,
//!   and counted; while its reset runs, wait (at most `--memory-wait`, then give up; a failed
//!   reset gives up: the node needs a reboot), counting nothing; the fault found after it (its
//!   ranks gone, a stall, failing probes) is the hang's, until the next start;
//! - a rank's process gone: relaunch, loading or not;
//! - loading: since the last start no probe passed and `--grace` has not run out; the probe's
//!   failures and the engine's silence do not count yet;
//! - stalled: work pending and no progress for `--stall`; failing: `--failures` probes in a row;
//!   either relaunches;
//! - else serving.
//!
//! Each relaunch spends one restart of the budget when it is decided (a relaunch that fails counts
//! too); with none left, the watch gives up and says why.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::budget::RestartBudget;
use super::clock::Moment;
use super::duration::format_duration;
use super::gpu::GpuWatch;
use super::observation::{Observation, ProbeOutcome};
use super::policy::WatchPolicy;
use super::stall::StallClock;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Serving,
    Loading,
    Stalled,
    Failing,
    NodeDown,
    NodeRebooted,
    /// A GPU of its nodes hung: its reset runs (the watch waits), or the fault after it relaunches.
    GpuHang,
    Paused,
    GivenUp,
}

impl State {
    pub const ALL: [State; 9] = [
        State::Serving,
        State::Loading,
        State::Stalled,
        State::Failing,
        State::NodeDown,
        State::NodeRebooted,
        State::GpuHang,
        State::Paused,
        State::GivenUp,
    ];

    /// As `cluster status` and the metrics' `state` label say it.
    pub fn name(self) -> &'static str {
        match self {
            State::Serving => "serving",
            State::Loading => "loading",
            State::Stalled => "stalled",
            State::Failing => "failing",
            State::NodeDown => "node-down",
            State::NodeRebooted => "node-rebooted",
            State::GpuHang => "gpu-hang",
            State::Paused => "paused",
            State::GivenUp => "given-up",
        }
    }
}

/// What is wrong, with what the watch saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// Work pending and the progress counter still for `quiet_seconds`.
    Stalled { quiet_seconds: u64, running: Option<f64> },
    /// The probe failed this many times in a row; the last reason.
    Failing { failures: u32, last: String },
    /// The node's boot id changed: it rebooted, and whatever ran there is gone.
    NodeRebooted { node: String },
    /// A rank's process is gone.
    RankDown { node: String, process: String },
    /// The relaunch itself failed.
    LaunchFailed { why: String },
    /// A GPU of its nodes hung (the kernel's line), and then the service failed as `then` says.
    GpuHang { node: String, line: String, then: String },
}

impl Fault {
    /// The state the fault puts the service in.
    pub fn state(&self) -> State {
        match self {
            Fault::Stalled { .. } => State::Stalled,
            Fault::NodeRebooted { .. } => State::NodeRebooted,
            Fault::GpuHang { .. } => State::GpuHang,
            Fault::Failing { .. } | Fault::RankDown { .. } | Fault::LaunchFailed { .. } => State::Failing,
        }
    }

    /// One line for the log, the saved log tails' name, `--on-give-up`'s environment.
    pub fn reason(&self) -> String {
        match self {
            Fault::Stalled { quiet_seconds, running } => {
                let pending = running
                    .map_or("its probe unanswered".to_string(), |running| format!("{running} request(s) running"));
                format!(
                    "stalled: {pending} and no token for {}",
                    format_duration(std::time::Duration::from_secs(*quiet_seconds))
                )
            }
            Fault::Failing { failures, last } => {
                format!("failing: the probe failed {failures} time(s) in a row ({last})")
            }
            Fault::NodeRebooted { node } => format!("node {node} rebooted"),
            Fault::RankDown { node, process } => format!("{process} on {node} is not running"),
            Fault::LaunchFailed { why } => format!("the relaunch failed: {why}"),
            Fault::GpuHang { node, line, then } => format!("GPU hang on {node} ({line}); then {then}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    Nothing,
    /// Stop every rank, wait for the nodes' memory, launch the service again from its record.
    Relaunch(Fault),
    /// No restart left (or memory that never came free): stop restarting, say why.
    GiveUp(String),
}

/// One look's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LookOutcome {
    pub state: State,
    pub action: Decision,
    /// What the look found to say besides: each GPU hang new since the look before
    /// (`GPU hang on node2: LINE`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub news: Vec<String>,
}

/// How the watch finds the service when it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Serving already (its launch proved it).
    Serving,
    /// Just started at this moment: loading.
    Loading(Moment),
}

/// What the watch's own metrics count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    pub probes: u64,
    pub probe_failures: u64,
    pub restarts: u64,
    /// GPU hangs on its nodes.
    #[serde(default)]
    pub gpu_hangs: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Watcher {
    policy: WatchPolicy,
    /// The last start, when it has not yet answered a probe: the grace counts from it.
    loading_since: Option<Moment>,
    failures_in_a_row: u32,
    stall: StallClock,
    /// Each node's boot id as first seen since the last start.
    boot_ids: BTreeMap<String, String>,
    budget: RestartBudget,
    was_paused: bool,
    given_up: Option<String>,
    state: State,
    tally: Tally,
    /// Its nodes' GPU hangs and resets, across looks.
    #[serde(default)]
    gpu: GpuWatch,
    /// The GPU hang seen since the last start, (node, the kernel's line): the next fault is its.
    #[serde(default)]
    gpu_hang: Option<(String, String)>,
    /// What the look under way has to say besides its state.
    #[serde(skip)]
    news: Vec<String>,
}

impl Watcher {
    pub fn new(policy: WatchPolicy, start: Start) -> Watcher {
        let budget = RestartBudget::new(policy.max_restarts, policy.window);
        let (loading_since, state) = match start {
            Start::Serving => (None, State::Serving),
            Start::Loading(at) => (Some(at), State::Loading),
        };
        Watcher {
            policy,
            loading_since,
            failures_in_a_row: 0,
            stall: StallClock::default(),
            boot_ids: BTreeMap::new(),
            budget,
            was_paused: false,
            given_up: None,
            state,
            tally: Tally::default(),
            gpu: GpuWatch::default(),
            gpu_hang: None,
            news: Vec::new(),
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn tally(&self) -> Tally {
        self.tally
    }

    /// Why it gave up, when it did.
    pub fn given_up(&self) -> Option<&str> {
        self.given_up.as_deref()
    }

    pub fn policy(&self) -> &WatchPolicy {
        &self.policy
    }

    /// Take one look.
    pub fn observe(&mut self, seen: &Observation) -> LookOutcome {
        let at = seen.at;
        if !matches!(seen.probe, ProbeOutcome::Skipped) {
            self.tally.probes += 1;
        }
        if matches!(seen.probe, ProbeOutcome::Failed(_) | ProbeOutcome::TimedOut) {
            self.tally.probe_failures += 1;
        }
        if let Some(reason) = &self.given_up {
            return self.step(State::GivenUp, Decision::GiveUp(reason.clone()));
        }
        if seen.paused {
            self.was_paused = true;
            return self.step(State::Paused, Decision::Nothing);
        }
        if self.was_paused {
            self.was_paused = false;
            self.started(at);
        }
        if seen.nodes.iter().any(|node| !node.reachable) {
            self.failures_in_a_row = 0;
            self.stall.reset();
            return self.step(State::NodeDown, Decision::Nothing);
        }
        for node in &seen.nodes {
            let Some(boot_id) = &node.boot_id else { continue };
            let known = self.boot_ids.entry(node.node.clone()).or_insert_with(|| boot_id.clone());
            if known != boot_id {
                return self.fault(at, Fault::NodeRebooted { node: node.node.clone() });
            }
        }
        let gpu = self.gpu.look(at, &seen.nodes);
        for (node, hang) in &gpu.new {
            self.tally.gpu_hangs += 1;
            self.news.push(format!("GPU hang on {node}: {}", hang.line));
            self.gpu_hang.get_or_insert_with(|| (node.clone(), hang.line.clone()));
        }
        if let Some((node, line)) = gpu.failed {
            return self.give_up(format!(
                "the GPU reset on {node} failed ({line}): its GPU runs nothing until the node is rebooted; then \
                 `cluster launch --replace` serves it again"
            ));
        }
        if let Some((node, since, line)) = gpu.resetting {
            if at.since(since) >= self.policy.memory_wait {
                return self.give_up(format!(
                    "the GPU reset on {node} (after {line}) has not ended in {} (--memory-wait): reboot the node, then \
                     `cluster launch --replace`",
                    format_duration(self.policy.memory_wait)
                ));
            }
            // Nothing answers while the GPU resets: the silence is the reset's, not the service's.
            self.failures_in_a_row = 0;
            self.stall.reset();
            return self.step(State::GpuHang, Decision::Nothing);
        }
        if let Some(rank) = seen.ranks.iter().find(|rank| !rank.alive) {
            return self.fault(at, Fault::RankDown { node: rank.node.clone(), process: rank.process.clone() });
        }

        if seen.probe == ProbeOutcome::Passed {
            self.loading_since = None;
            self.failures_in_a_row = 0;
        }
        if self.loading_since.is_some_and(|since| at.since(since) < self.policy.grace) {
            // A model that loads makes no tokens: its silence counts from the end of the grace.
            self.stall.reset();
            return self.step(State::Loading, Decision::Nothing);
        }
        let quiet = self.stall.observe(seen.began, at, seen.progress, &seen.probe);
        let last_failure = match &seen.probe {
            ProbeOutcome::Failed(why) => Some(why.clone()),
            ProbeOutcome::TimedOut => Some("no answer within its deadline".to_string()),
            ProbeOutcome::Passed | ProbeOutcome::Skipped => None,
        };
        if let Some(why) = &last_failure {
            self.failures_in_a_row = self.failures_in_a_row.saturating_add(1);
            if self.failures_in_a_row >= self.policy.failures {
                let fault = Fault::Failing { failures: self.failures_in_a_row, last: why.clone() };
                if quiet.is_none_or(|quiet| quiet < self.policy.stall) {
                    return self.fault(at, fault);
                }
            }
        }
        if let Some(quiet) = quiet.filter(|&quiet| quiet >= self.policy.stall) {
            let running = seen.progress.map(|progress| progress.running).filter(|&running| running > 0.0);
            return self.fault(at, Fault::Stalled { quiet_seconds: quiet.as_secs(), running });
        }
        self.step(State::Serving, Decision::Nothing)
    }

    /// The relaunch (or the operator's own launch, `--replace`) came back at `at`: the service is
    /// loading again, and everything seen of the old one is forgotten.
    pub fn started(&mut self, at: Moment) {
        self.loading_since = Some(at);
        self.failures_in_a_row = 0;
        self.stall.reset();
        self.boot_ids.clear();
        self.gpu_hang = None;
        self.state = State::Loading;
    }

    /// The relaunch failed: another, if the budget has one.
    pub fn relaunch_failed(&mut self, at: Moment, why: &str) -> LookOutcome {
        self.fault(at, Fault::LaunchFailed { why: why.to_string() })
    }

    /// Give up for a reason found outside the looks (the nodes' memory never came free).
    pub fn give_up(&mut self, reason: String) -> LookOutcome {
        self.given_up = Some(reason.clone());
        self.step(State::GivenUp, Decision::GiveUp(reason))
    }

    fn fault(&mut self, at: Moment, fault: Fault) -> LookOutcome {
        // A fault after a GPU hang (its ranks died of it, or stalled) is the hang's; a reboot is not.
        let fault = match (self.gpu_hang.take(), fault) {
            (Some((node, line)), fault) if !matches!(fault, Fault::NodeRebooted { .. }) => {
                Fault::GpuHang { node, line, then: fault.reason() }
            }
            (_, fault) => fault,
        };
        match self.budget.spend(at) {
            Ok(()) => {
                self.tally.restarts += 1;
                self.failures_in_a_row = 0;
                self.stall.reset();
                self.boot_ids.clear();
                self.step(fault.state(), Decision::Relaunch(fault))
            }
            Err(spent) => self.give_up(format!("{}; {spent}", fault.reason())),
        }
    }

    fn step(&mut self, state: State, action: Decision) -> LookOutcome {
        self.state = state;
        LookOutcome { state, action, news: std::mem::take(&mut self.news) }
    }
}

#[cfg(test)]
mod tests;
