//! `rm NAME`: remove a toolbox strix-toolbox manages (and only those).

use crate::cli::{GlobalOptions, RmArgs};
use crate::commands::enter::find_toolbox;
use crate::engine;
use crate::error::{Error, Result};
use crate::labels;
use crate::reference::validate_container_name;
use crate::ui::Ui;

pub async fn run(global: &GlobalOptions, args: &RmArgs, ui: &Ui) -> Result<i32> {
    validate_container_name(&args.name)?;
    let connection = engine::connect(global.engine).await?;
    let engine = connection.engine();
    let container = find_toolbox(engine, &args.name).await?;
    if container.labels.get(labels::MANAGED).map(String::as_str) != Some("true") {
        return Err(Error::Failed(format!(
            "{} was not made by strix-toolbox, so it is left alone. Fix: `{} rm {}` if you mean it",
            args.name,
            engine.kind().program(),
            args.name
        )));
    }
    if container.running && !args.force {
        return Err(Error::Failed(format!(
            "{} is running. Fix: leave it and rerun with --force to stop and remove it",
            args.name
        )));
    }
    engine.container_remove(&container.id, true).await?;
    ui.status(&format!("removed {}", args.name));
    Ok(0)
}
