//! A command inside a toolbox with its output captured: what the cluster's proofs run on a node
//! (perftest, an RCCL all-reduce), asked over the node's channel instead of a second ssh.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::serving::toolbox::RunningToolbox;
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

/// Run `argv` in toolbox `name` as its user, starting the toolbox first when it is stopped.
pub async fn exec_in_toolbox(settings: &Settings, name: &str, argv: &[String]) -> Result<ExecReport> {
    if argv.is_empty() {
        return Err(Error::Usage(format!("nothing to run in {name}: the command is empty")));
    }
    RunningToolbox::open(settings, name).await?.run(argv, &Default::default()).await
}
