//! A service onto a node whose memory another service holds: allowed only when the plan says
//! both fit, never guessed. Each record keeps what its launch planned for the node's GPU memory
//! (`memory_bytes`, the model-aware plan's figure); without a figure for the new service or for
//! one already there, the launch is refused before anything starts, naming both services and
//! the node. [`fits_beside`] is where the plan's figure is held against the others'.

use super::request::LaunchRequest;
use crate::error::{Error, MultiError, Result};
use crate::node::Node;
use crate::reporter::Bytes;
use crate::serving::room::{fits_beside, Room};
use crate::serving::state::ServeCheckReport;

/// Refuse the launch on a node of the service (`on`, indices into `cluster`) where another
/// service runs, unless the plan's figures (`memory`, per service node; None without one) say it
/// fits beside them.
pub(super) fn refuse_beside(
    cluster: &[&dyn Node],
    on: &[usize],
    request: &LaunchRequest,
    checks: &[ServeCheckReport],
    memory: &[Option<Room>],
) -> Result<()> {
    let name = request.service.as_str();
    let mut problems = MultiError::new("nothing was started");
    for (rank, index) in on.iter().enumerate() {
        let node = cluster[*index].name();
        let others: Vec<_> = checks[*index].active().filter(|state| state.record.service != name).collect();
        if others.is_empty() {
            continue;
        }
        let them: Vec<String> = others.iter().map(|state| state.record.service.clone()).collect();
        let held: Option<Vec<u64>> = others.iter().map(|state| state.record.memory_bytes).collect();
        let figures = memory.get(rank).copied().flatten().zip(held);
        let message = match figures {
            Some((memory, held)) if fits_beside(memory, &held) => continue,
            Some((memory, held)) => format!(
                "{node} serves {} already: {name} needs {} of its GPU memory beside their {}, and it has {} for \
                 serving",
                them.join(", "),
                Bytes(memory.planned),
                Bytes(held.iter().sum()),
                Bytes(memory.usable)
            ),
            None => {
                let planned = memory.get(rank).copied().flatten();
                let unknown: Vec<&str> = planned
                    .is_none()
                    .then_some(name)
                    .into_iter()
                    .chain(others.iter().filter(|s| s.record.memory_bytes.is_none()).map(|s| s.record.service.as_str()))
                    .collect();
                format!(
                    "{node} serves {} already, and no plan gives the GPU memory {} takes there: {name} is not \
                     launched beside {} without knowing that both fit",
                    them.join(", "),
                    unknown.join(" or "),
                    them.join(", ")
                )
            }
        };
        let fix = format!(
            "`--on` nodes where nothing serves, or stop {} first (`strix-toolbox cluster stop {}`)",
            them.join(", "),
            them[0]
        );
        problems.push(node, Error::Toolbox { name: name.to_string(), message, fix: Some(fix) });
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.into())
    }
}
