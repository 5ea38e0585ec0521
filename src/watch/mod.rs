//! Keep it serving: the watch's logic, apart from any cluster. Each look at a service (its nodes,
//! their boot ids and GPU hangs, its ranks' processes, a short completion probe, the engine's
//! progress counters) is an [`observation::Observation`]; [`machine::Watcher`] turns looks into a
//! state (serving, loading, stalled, failing, node down, node rebooted, GPU hang, paused, given up)
//! and an action (relaunch the whole service, or give up) inside a restart [`budget`]; [`gpu`]
//! follows the GPUs' hangs and resets across looks; [`memory`] says when the nodes' memory is free
//! for the relaunch. No clock is read here: the moments come with the looks.
//! Durations come from the command line ([`duration`]); the watch's own metrics are
//! [`families`]; `cluster watch --install`'s systemd unit is [`unit`].

pub mod budget;
pub mod clock;
pub mod duration;
pub mod families;
pub mod gpu;
pub mod machine;
pub mod memory;
pub mod observation;
pub mod policy;
pub mod stall;
pub mod unit;

pub use clock::Moment;
pub use duration::{format_duration, parse_duration};
pub use families::watch_families;
pub use machine::{Decision, Fault, LookOutcome, Start, State, Tally, Watcher};
pub use memory::{memory_verdict, HeldMemory, MemoryVerdict};
pub use observation::{
    NodeObservation, Observation, ProbeOutcome, Progress, ProgressNames, RankObservation, LLAMA_CPP_PROGRESS,
    VLLM_PROGRESS,
};
pub use policy::WatchPolicy;
pub use unit::{unit_name, unit_text, WatchUnit};
