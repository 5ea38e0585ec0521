//! A toolbox: found by name (enter, rm, rollback, status), or running, to exec in (the serving
//! and model calls, the cluster's proofs): started when stopped, and run as its user.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::status::ToolboxStatus;
use crate::container_engine::{Connection, ContainerEngine, ContainerInfo, ExecIo, ExecOutcome};
use crate::error::{Error, Result};
use crate::image::reference::validate_container_name;
use crate::manager::ManagerKind;
use crate::settings::Settings;

/// The container named `name`, or an error that says how to make it.
pub async fn find_toolbox(engine: &dyn ContainerEngine, name: &str) -> Result<ContainerInfo> {
    engine.container_inspect(name).await?.ok_or_else(|| {
        Error::toolbox(
            name,
            format!("no toolbox named {name} in {} ({})", engine.kind().program(), engine.endpoint()),
            "`strix-toolbox refresh` creates it; `strix-toolbox list` shows what exists",
        )
    })
}

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

    /// The last `count` non-empty lines it printed (stderr after stdout).
    pub fn last_lines(&self, count: usize) -> Vec<String> {
        let lines: Vec<&str> = self
            .stdout
            .lines()
            .chain(self.stderr.lines())
            .map(str::trim_end)
            .filter(|l| !l.trim().is_empty())
            .collect();
        lines[lines.len().saturating_sub(count)..].iter().map(|l| l.to_string()).collect()
    }
}

pub struct RunningToolbox {
    connection: Connection,
    pub name: String,
    pub container: ContainerInfo,
    user: Option<String>,
    /// It was stopped and this started it.
    pub started: bool,
}

impl RunningToolbox {
    /// Toolbox `name`, started if it is stopped.
    pub async fn open(settings: &Settings, name: &str) -> Result<RunningToolbox> {
        validate_container_name(name)?;
        let connection = settings.connect().await?;
        let container = find_toolbox(connection.engine(), name).await?;
        let started = !container.running;
        if started {
            connection.engine().container_start(name).await?;
        }
        let user = ManagerKind::of(&container).exec_user();
        Ok(RunningToolbox { connection, name: name.to_string(), container, user, started })
    }

    /// Toolbox `name` only if it runs now (nothing started in a stopped one is still running).
    pub async fn if_running(settings: &Settings, name: &str) -> Result<Option<RunningToolbox>> {
        validate_container_name(name)?;
        let connection = settings.connect().await?;
        let Some(container) = connection.engine().container_inspect(name).await? else { return Ok(None) };
        if !container.running {
            return Ok(None);
        }
        let user = ManagerKind::of(&container).exec_user();
        Ok(Some(RunningToolbox { connection, name: name.to_string(), container, user, started: false }))
    }

    /// The node's engine holds image `reference` (an id or a name).
    pub async fn holds_image(&self, reference: &str) -> Result<bool> {
        Ok(self.connection.engine().image_inspect(reference).await?.is_some())
    }

    /// The image it runs as a pull names it (registry digest, else image id): what a service's
    /// record and a bench key keep.
    pub fn image(&self) -> String {
        ToolboxStatus::of(self.container.clone()).image_reference().to_string()
    }

    /// The image it runs as every node names it alike (`ToolboxStatus::image_identity`).
    pub fn image_id(&self) -> String {
        ToolboxStatus::of(self.container.clone()).image_identity().to_string()
    }

    /// Run `argv` inside, its output captured as bytes.
    pub async fn exec(&self, argv: &[String]) -> Result<ExecOutcome> {
        self.connection.engine().exec(&self.name, argv, &[], self.user.as_deref(), ExecIo::Capture).await
    }

    /// Run `argv` inside, with `env` added, its output captured.
    pub async fn run(&self, argv: &[String], env: &BTreeMap<String, String>) -> Result<ExecReport> {
        let env: Vec<String> = env.iter().map(|(key, value)| format!("{key}={value}")).collect();
        let outcome =
            self.connection.engine().exec(&self.name, argv, &env, self.user.as_deref(), ExecIo::Capture).await?;
        Ok(ExecReport {
            exit_code: outcome.exit_code,
            stdout: String::from_utf8_lossy(&outcome.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&outcome.stderr).into_owned(),
        })
    }

    /// `argv` must succeed: its failure is an error naming `what`, with its last words.
    pub async fn run_ok(&self, what: &str, argv: &[String], env: &BTreeMap<String, String>) -> Result<ExecReport> {
        let report = self.run(argv, env).await?;
        if report.success() {
            return Ok(report);
        }
        Err(Error::Command {
            program: what.to_string(),
            message: format!(
                "in toolbox {} (exit {}): {}",
                self.name,
                report.exit_code,
                report.last_lines(3).join(" | ")
            ),
            fix: None,
        })
    }
}
