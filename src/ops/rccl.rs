//! `rccl inspect FILE [--against IMAGE]`: the artifact's report, and whether it would load there;
//! `rccl log [FILE]`: what RCCL's log says of its network.

use std::io::BufReader;
use std::path::Path;

use crate::container_engine::ContainerEngine;
use crate::error::{Error, Result};
use crate::ops::abi::abi_against;
use crate::rccl::log::{judge_input, RcclLogReport};
use crate::rccl::{inspect_artifact, RcclReport};
use crate::reporter::Reporter;
use crate::settings::Settings;

pub async fn inspect(settings: &Settings, file: &Path, against: Option<&str>) -> Result<RcclReport> {
    let mut report = inspect_artifact(file)?;
    if let Some(image) = against {
        let connection = settings.connect().await?;
        check_against(connection.engine(), &mut report, image, settings.reporter.as_ref()).await?;
    }
    Ok(report)
}

/// Judge the RCCL log in `file`, or on standard input (None), as it streams.
pub fn judge_log(file: Option<&Path>) -> Result<RcclLogReport> {
    match file {
        Some(path) => {
            let log = std::fs::File::open(path).map_err(|error| Error::read(path, error))?;
            judge_input(BufReader::new(log)).map_err(|error| Error::read(path, error))
        }
        None => judge_input(std::io::stdin().lock()).map_err(|error| Error::read("standard input", error)),
    }
}

/// Add the ABI check against `image` to `report` (pulling the image when it is not here).
pub async fn check_against(
    engine: &dyn ContainerEngine,
    report: &mut RcclReport,
    image: &str,
    reporter: &dyn Reporter,
) -> Result<()> {
    let Some(dynamic) = report.dynamic.clone() else {
        // Already refused: the loader could not load it anywhere.
        return Ok(());
    };
    if engine.image_inspect(image).await?.is_none() {
        engine.pull(image, reporter).await.map_err(|e| e.context(format!("cannot get {image} to check against")))?;
        reporter.finish();
    }
    report.add_abi(abi_against(engine, image, &dynamic).await?);
    Ok(())
}
