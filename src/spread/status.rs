//! The head's registry as `cluster status` shows it: its size on disk, what it serves, whether its
//! containers run.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::registry::{CONTAINER, WRITER};
use crate::error::Result;
use crate::link::home::{RegistryHome, ServedImage};
use crate::settings::Settings;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadStatus {}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryStatus {
    /// Its storage, on the head.
    pub storage: PathBuf,
    /// What that storage takes on disk.
    pub disk_bytes: u64,
    pub images: Vec<ServedImage>,
    /// Its containers run, the nodes' and the head's writer (None: the engine did not answer).
    pub running: Option<bool>,
}

/// None when this node never served an image.
pub async fn spread_status(settings: &Settings) -> Result<Option<RegistryStatus>> {
    let home = RegistryHome::locate(&settings.paths)?;
    if !home.exists() {
        return Ok(None);
    }
    let running = match settings.connect().await {
        Ok(connection) => {
            let mut running = Some(true);
            for container in [CONTAINER, WRITER] {
                let runs =
                    connection.engine().container_inspect(container).await.ok().map(|c| c.is_some_and(|c| c.running));
                running = running.zip(runs).map(|(all, this)| all && this);
            }
            running
        }
        Err(_) => None,
    };
    Ok(Some(RegistryStatus { storage: home.storage(), disk_bytes: home.disk_use(), images: home.served()?, running }))
}
