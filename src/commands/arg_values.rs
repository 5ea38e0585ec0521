//! How the commands' arguments read their values: numbers within bounds (a usage error, exit 2,
//! that says the range), token counts, and the command line's spelling of the domain's choices
//! (the serving engine, vLLM's backend, the toolbox's manager).

use clap::builder::PossibleValue;
use clap::ValueEnum;

use crate::manager::ManagerChoice;
use crate::serving::engine::{Backend, EngineRef, ENGINES};

/// The longest wait a flag takes, in seconds: a week, the longest a refresh waits for another
/// (more means a mistake).
pub(crate) const MAX_SECONDS: u64 = crate::apply::lock::MAX_WAIT.as_secs();

/// The longest an idle ssh master may wait for the next cluster command: a day.
pub(crate) const MAX_SSH_PERSIST: u64 = 24 * 3600;

/// The most older pins `--keep` keeps.
pub(crate) const MAX_KEEP: u64 = 1000;

/// The largest `--tp`: one rank per node's GPU, far past any cluster's size.
pub(crate) const MAX_TP: u64 = 1024;

/// The most log lines `logs -n` shows of each log.
pub(crate) const MAX_LINES: u64 = 1_000_000;

/// The most GiB a plan keeps back on a node.
pub(crate) const MAX_RESERVE_GIB: u64 = 1 << 20;

/// Tokens as vLLM's `--max-model-len` takes them (`32768`, `32k`, `25.6k`, `32K`, `1T`).
pub(crate) fn tokens(text: &str) -> std::result::Result<u64, String> {
    crate::serving::vllm_args::human_readable_int("--max-model-len", text).map_err(|error| error.to_string())
}

/// A number from `min` to `max`: anything else is a usage error (exit 2) that says the range.
pub(crate) fn bounded<T>(min: u64, max: u64) -> clap::builder::RangedU64ValueParser<T>
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
    <T as TryFrom<u64>>::Error: std::error::Error + Send + Sync + 'static,
{
    clap::builder::RangedU64ValueParser::new().range(min..=max)
}

/// `--engine`: the serving engine.
impl ValueEnum for EngineRef {
    fn value_variants<'a>() -> &'a [Self] {
        &ENGINES
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()).aliases(self.profile().aliases.iter().copied()).help(self.profile().about))
    }
}

/// `--backend`: how vLLM spans the nodes.
impl ValueEnum for Backend {
    fn value_variants<'a>() -> &'a [Self] {
        &[Backend::Mp, Backend::Ray]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        match self {
            Backend::Mp => Some(PossibleValue::new("mp").help("vLLM's multiprocessing executor: no Ray anywhere")),
            Backend::Ray => Some(PossibleValue::new("ray").help("Ray on every node, vLLM's Ray executor on the head")),
            Backend::Single | Backend::Rpc => None,
        }
    }
}

/// `--manager`: who should own the toolbox.
impl ValueEnum for ManagerChoice {
    fn value_variants<'a>() -> &'a [Self] {
        &[ManagerChoice::Auto, ManagerChoice::Toolbox, ManagerChoice::Distrobox, ManagerChoice::Native]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            ManagerChoice::Auto => PossibleValue::new("auto")
                .help("Toolbx with podman if installed, else distrobox (not as root), else native"),
            ManagerChoice::Toolbox => PossibleValue::new("toolbox").help("Toolbx (`toolbox enter NAME` keeps working)"),
            ManagerChoice::Distrobox => {
                PossibleValue::new("distrobox").help("Distrobox (`distrobox enter NAME` keeps working)")
            }
            ManagerChoice::Native => {
                PossibleValue::new("native").help("The engine directly, with the integration a toolbox gives")
            }
        })
    }
}
