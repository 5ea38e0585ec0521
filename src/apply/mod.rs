//! Apply a refresh plan through the ContainerEngine and Manager seams.
//!
//! Never destroys the working toolbox before its replacement exists: the replacement is made
//! under a temporary name, and only a successful create leads to the swap. Any failure, Ctrl-C
//! or SIGTERM before the swap removes the temporary container and leaves the old one untouched.

mod interruptible;
pub mod lock;

pub use interruptible::{interruptible, listen_for_signals};

use crate::container_engine::ContainerEngine;
use crate::error::{Error, Result};
use crate::image::reference::ImageRef;
use crate::manager::Manager;
use crate::plan::{old_name, RefreshPlan, Step};
use crate::reporter::Reporter;
use crate::verify::verify_started;

/// What happened beyond success: things left for the user to look at.
#[derive(Debug, Default)]
pub struct Applied {
    pub warnings: Vec<String>,
}

/// Run `plan`'s steps for toolbox `name`, each reported as it starts.
pub async fn apply(
    name: &str,
    plan: &RefreshPlan,
    engine: &dyn ContainerEngine,
    manager: &dyn Manager,
    reporter: &dyn Reporter,
) -> Result<Applied> {
    let mut applied = Applied::default();
    // The temporary container to remove if we stop before the swap.
    let mut created: Option<String> = None;

    for step in &plan.steps {
        let description = step.describe();
        reporter.step_started(name, &description);
        let result = run_step(step, engine, manager, &mut created, &mut applied).await;
        if let Err(error) = result {
            reporter.step_finished(name, &format!("{description}: failed"));
            if let Some(temp) = created.take() {
                if let Err(cleanup) = engine.container_remove(&temp, true).await {
                    applied.warnings.push(format!("could not remove the temporary container {temp}: {cleanup}"));
                }
            }
            return Err(error);
        }
    }
    if let Some(last) = plan.steps.last() {
        reporter.step_finished(name, &format!("{}: done", last.describe()));
    }
    Ok(applied)
}

async fn run_step(
    step: &Step,
    engine: &dyn ContainerEngine,
    manager: &dyn Manager,
    created: &mut Option<String>,
    applied: &mut Applied,
) -> Result<()> {
    match step {
        Step::Restore { from, to } => engine.container_rename(from, to).await,
        Step::RemoveLeftover { name } => engine.container_remove(name, true).await,
        Step::Pin { image_id, reference } => {
            let pin = ImageRef::parse(reference)?;
            engine.image_tag(image_id, &pin.repository, pin.tag_or_digest()).await
        }
        Step::Create { request } => {
            *created = Some(request.name.clone());
            interruptible(&format!("creating {}", request.name), manager.create(engine, request)).await.map(drop)
        }
        Step::Verify { name, expected } => {
            let container = engine.container_inspect(name).await?.ok_or_else(|| {
                Error::toolbox(
                    name.as_str(),
                    format!("{name} disappeared before it could be verified"),
                    "run the refresh again; `strix-toolbox status` shows what is there",
                )
            })?;
            let report =
                interruptible(&format!("verifying {name}"), verify_started(engine, &container, expected)).await?;
            if report.ok {
                if let Some(unproven) = report.unproven() {
                    applied.warnings.push(format!("{name} passed verification, {unproven}"));
                }
                Ok(())
            } else {
                Err(Error::Verification {
                    message: format!(
                        "the new toolbox failed verification, so it was not swapped in and the old one is untouched: \
                         {}",
                        report.failures()
                    ),
                    fix: Some(
                        "fix what each failed check names and refresh again (`refresh --no-verify` swaps it in anyway)"
                            .into(),
                    ),
                })
            }
        }
        Step::Swap { temp, name, old_id } => {
            // Not interruptible: a swap half done is worse than a swap finished.
            swap(engine, temp, name, old_id.as_deref(), applied).await?;
            *created = None;
            Ok(())
        }
        Step::Prune { references } => {
            prune(engine, references, &mut applied.warnings).await;
            Ok(())
        }
    }
}

/// Remove old pin tags; one still in use is kept, with a warning.
pub async fn prune(engine: &dyn ContainerEngine, references: &[String], warnings: &mut Vec<String>) {
    for reference in references {
        if let Err(error) = engine.image_remove(reference).await {
            warnings.push(format!("kept {reference}: {error}"));
        }
    }
}

/// Old out of the way, new in, old removed; a failed rename puts the old one back.
async fn swap(
    engine: &dyn ContainerEngine,
    temp: &str,
    name: &str,
    old_id: Option<&str>,
    applied: &mut Applied,
) -> Result<()> {
    swap_in(engine, temp, name, old_id).await?;
    if let Some(old_id) = old_id {
        remove_parked(engine, name, old_id, &mut applied.warnings).await;
    }
    Ok(())
}

/// The replacement `temp` takes `name`; the old toolbox (if any) waits parked under the swap
/// name, so it can still come back. A failed rename puts the old one back.
pub async fn swap_in(engine: &dyn ContainerEngine, temp: &str, name: &str, old_id: Option<&str>) -> Result<()> {
    let Some(old_id) = old_id else {
        return engine.container_rename(temp, name).await;
    };
    let parked = old_name(name);
    engine.container_rename(old_id, &parked).await?;
    if let Err(error) = engine.container_rename(temp, name).await {
        if let Err(restore) = engine.container_rename(old_id, name).await {
            return Err(Error::toolbox(
                name,
                format!("{error}; and putting the old toolbox back failed too ({restore})"),
                format!("`{} rename {parked} {name}` (it is intact)", engine.kind().program()),
            ));
        }
        return Err(error);
    }
    Ok(())
}

/// Remove the old toolbox parked by [`swap_in`]; the new one is already in place, so a failure
/// is only a warning.
pub async fn remove_parked(engine: &dyn ContainerEngine, name: &str, parked: &str, warnings: &mut Vec<String>) {
    if let Err(error) = engine.container_remove(parked, true).await {
        warnings.push(format!(
            "the new {name} is in place, but the old one is still there as {}: {error}. \
             Fix: remove it with `strix-toolbox rm {} --force`",
            old_name(name),
            old_name(name)
        ));
    }
}

#[cfg(test)]
mod tests;
