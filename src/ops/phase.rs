//! The phases after `refresh --stage-only`, which `cluster refresh` runs on every node in turn so
//! the nodes change together: `swap` (the staged replacement takes the name, the old toolbox stays
//! parked), then `finish` (remove the parked one, prune pins) — or, when any node failed, `abort`
//! (remove the staged replacement) and `undo` (put the parked toolbox back). Each is idempotent.

use serde::{Deserialize, Serialize};

use crate::apply::lock::ToolboxLock;
use crate::apply::{prune, remove_parked, swap_in};
use crate::engine::{ContainerInfo, Engine};
use crate::error::{Error, Result};
use crate::image::reference::{validate_container_name, ImageRef};
use crate::plan::labels;
use crate::plan::{old_name, pins_to_prune, temp_name};
use crate::settings::Settings;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The staged replacement takes the toolbox's name; the old one is parked.
    Swap,
    /// Remove the parked old toolbox and prune old pins.
    Finish,
    /// Remove the staged replacement (nothing was swapped).
    Abort,
    /// Put the parked old toolbox back (after a swap the cluster cannot complete).
    Undo,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseReport {
    pub name: String,
    pub phase: Phase,
    /// Something changed (false: there was nothing to do).
    pub changed: bool,
    /// The swap parked an old toolbox (undo puts it back).
    pub parked: bool,
    pub warnings: Vec<String>,
}

/// Run `phase` for toolbox `name`. `image_id` names the image the swap brought in: `undo` removes
/// a toolbox that had no predecessor only when it is that one.
pub async fn run_phase(
    settings: &Settings,
    phase: Phase,
    name: &str,
    keep: usize,
    image_id: Option<&str>,
) -> Result<PhaseReport> {
    validate_container_name(name)?;
    let _lock = ToolboxLock::acquire(name)?;
    let connection = settings.connect().await?;
    let engine = connection.engine();
    let mut report = PhaseReport { name: name.to_string(), phase, changed: false, parked: false, warnings: Vec::new() };
    match phase {
        Phase::Swap => swap(engine, name, &mut report).await?,
        Phase::Finish => finish(engine, name, keep, &mut report).await?,
        Phase::Abort => {
            if managed(engine, &temp_name(name)).await?.is_some() {
                engine.container_remove(&temp_name(name), true).await?;
                report.changed = true;
            }
        }
        Phase::Undo => undo(engine, name, image_id, &mut report).await?,
    }
    Ok(report)
}

/// A container of ours under `name`, if there is one.
async fn managed(engine: &dyn Engine, name: &str) -> Result<Option<ContainerInfo>> {
    let container = engine.container_inspect(name).await?;
    Ok(container.filter(|c| c.labels.get(labels::MANAGED).map(String::as_str) == Some("true")))
}

async fn swap(engine: &dyn Engine, name: &str, report: &mut PhaseReport) -> Result<()> {
    let staged = temp_name(name);
    if managed(engine, &staged).await?.is_none() {
        // Swapped already (a retried phase), or nothing was staged.
        report.parked = managed(engine, &old_name(name)).await?.is_some();
        return Ok(());
    }
    let old = engine.container_inspect(name).await?;
    swap_in(engine, &staged, name, old.as_ref().map(|c| c.id.as_str())).await?;
    report.changed = true;
    report.parked = old.is_some();
    Ok(())
}

async fn finish(engine: &dyn Engine, name: &str, keep: usize, report: &mut PhaseReport) -> Result<()> {
    let parked = old_name(name);
    if managed(engine, &parked).await?.is_some() {
        remove_parked(engine, name, &parked, &mut report.warnings).await;
        report.changed = true;
    }
    let Some(current) = managed(engine, name).await? else { return Ok(()) };
    let (Some(reference), Some(image_id)) =
        (current.labels.get(labels::IMAGE_REF), current.labels.get(labels::IMAGE_ID))
    else {
        return Ok(());
    };
    let repository = ImageRef::parse(reference)?.repository;
    let images = engine.image_list(&repository).await?;
    prune(engine, &pins_to_prune(&images, &repository, image_id, keep), &mut report.warnings).await;
    Ok(())
}

async fn undo(engine: &dyn Engine, name: &str, image_id: Option<&str>, report: &mut PhaseReport) -> Result<()> {
    let parked = old_name(name);
    if let Some(old) = managed(engine, &parked).await? {
        if engine.container_inspect(name).await?.is_some() {
            engine.container_remove(name, true).await?;
        }
        engine.container_rename(&old.id, name).await?;
        report.changed = true;
        return Ok(());
    }
    // No predecessor: the swap created the toolbox; remove it only if it is the one swapped in.
    let Some(current) = managed(engine, name).await? else { return Ok(()) };
    let swapped_in = image_id.is_some_and(|id| current.labels.get(labels::IMAGE_ID).map(String::as_str) == Some(id));
    if !swapped_in {
        return Err(Error::toolbox(
            name,
            format!(
                "{name} has no parked predecessor and is not the toolbox this refresh swapped in, so undo leaves it \
                 alone"
            ),
            "check it with `strix-toolbox status`",
        ));
    }
    engine.container_remove(name, true).await?;
    report.changed = true;
    Ok(())
}
