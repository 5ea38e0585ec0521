//! A running toolbox to exec in: found, started when stopped, and run as its user.

use std::collections::BTreeMap;

use crate::engine::{Connection, ContainerInfo, ExecIo};
use crate::error::{Error, Result};
use crate::image::reference::validate_container_name;
use crate::manager::ManagerKind;
use crate::ops::exec::ExecReport;
use crate::ops::find_toolbox;
use crate::ops::status::ToolboxStatus;
use crate::settings::Settings;

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

    /// The image it runs, as every node names it (registry digest, else image id).
    pub fn image(&self) -> String {
        ToolboxStatus::of(self.container.clone()).image_identity().to_string()
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
