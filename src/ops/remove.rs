//! `rm NAME`: remove a toolbox strix-toolbox manages (and only those).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::image::reference::validate_container_name;
use crate::labels;
use crate::settings::Settings;
use crate::toolbox::running::find_toolbox;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveReport {
    pub name: String,
    pub id: String,
    /// It was running and was stopped.
    pub was_running: bool,
}

pub async fn remove(settings: &Settings, name: &str, force: bool) -> Result<RemoveReport> {
    validate_container_name(name)?;
    let connection = settings.connect().await?;
    let engine = connection.engine();
    let container = find_toolbox(engine, name).await?;
    let program = engine.kind().program();
    if container.labels.get(labels::MANAGED).map(String::as_str) != Some("true") {
        return Err(Error::toolbox(
            name,
            format!("{name} was not made by strix-toolbox, so it is left alone"),
            format!("`{program} rm {name}` if you mean it"),
        ));
    }
    if container.running && !force {
        return Err(Error::toolbox(
            name,
            format!("{name} is running"),
            "leave it and rerun with --force to stop and remove it",
        ));
    }
    engine.container_remove(&container.id, true).await?;
    Ok(RemoveReport { name: name.to_string(), id: container.id, was_running: container.running })
}
