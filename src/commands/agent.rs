//! `agent` (hidden): this node's side of a cluster command, on stdin and stdout.

use std::sync::Arc;

use crate::error::Result;
use crate::node::agent::run_agent;
use crate::reporter::Silent;
use crate::settings::Settings;

pub async fn run(settings: &Settings) -> Result<i32> {
    // Nothing but answers on stdout: the node's reports travel as values, never as text.
    let mut quiet = settings.clone();
    quiet.reporter = Arc::new(Silent);
    run_agent(quiet, tokio::io::stdin(), tokio::io::stdout()).await?;
    Ok(0)
}
