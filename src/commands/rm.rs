//! `rm NAME`: remove a toolbox strix-toolbox manages (and only those).

use crate::error::Result;
use crate::ops::remove::{remove, RemoveReport};
use crate::output::{Output, Render};
use crate::settings::Settings;
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct RmArgs {
    /// Toolbox name.
    pub name: String,

    /// Remove it even when it is running.
    #[arg(long, short)]
    pub force: bool,
}

pub async fn run(args: &RmArgs, settings: &Settings, out: &Output) -> Result<i32> {
    out.report(&remove(settings, &args.name, args.force).await?);
    Ok(0)
}

impl Render for RemoveReport {
    fn render(&self, out: &Output) {
        out.status(&format!("removed {}", self.name));
    }
}
