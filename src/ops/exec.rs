//! A command inside a toolbox with its output captured: what the cluster's proofs run on a node
//! (perftest, an RCCL all-reduce), asked over the node's channel instead of a second ssh.

use serde::{Deserialize, Serialize};

use crate::engine::ExecIo;
use crate::error::{Error, Result};
use crate::image::reference::validate_container_name;
use crate::manager::ManagerKind;
use crate::ops::find_toolbox;
use crate::settings::Settings;

/// What the command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecReport {
    pub exit_code: i64,
    /// Its output, as text (invalid UTF-8 replaced).
    pub stdout: String,
    pub stderr: String,
}

impl ExecReport {
    pub fn success(&self) -> bool {
        self.exit_code == 0
    }
}

/// Run `argv` in toolbox `name` as its user, starting the toolbox first when it is stopped.
pub async fn exec_in_toolbox(settings: &Settings, name: &str, argv: &[String]) -> Result<ExecReport> {
    validate_container_name(name)?;
    if argv.is_empty() {
        return Err(Error::Usage(format!("nothing to run in {name}: the command is empty")));
    }
    let connection = settings.connect().await?;
    let engine = connection.engine();
    let container = find_toolbox(engine, name).await?;
    if !container.running {
        engine.container_start(name).await?;
    }
    let user = ManagerKind::of(&container).exec_user();
    let outcome = engine.exec(name, argv, &[], user.as_deref(), ExecIo::Capture).await?;
    Ok(ExecReport {
        exit_code: outcome.exit_code,
        stdout: String::from_utf8_lossy(&outcome.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&outcome.stderr).into_owned(),
    })
}
