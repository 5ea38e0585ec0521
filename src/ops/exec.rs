//! A command inside a toolbox with its output captured: what the cluster's proofs run on a node
//! (perftest, an RCCL all-reduce), asked over the node's channel instead of a second ssh.

use crate::error::{Error, Result};
use crate::settings::Settings;
use crate::toolbox::running::{ExecReport, RunningToolbox};

/// Run `argv` in toolbox `name` as its user, starting the toolbox first when it is stopped.
pub async fn exec_in_toolbox(settings: &Settings, name: &str, argv: &[String]) -> Result<ExecReport> {
    if argv.is_empty() {
        return Err(Error::Usage(format!("nothing to run in {name}: the command is empty")));
    }
    RunningToolbox::open(settings, name).await?.run(argv, &Default::default()).await
}
