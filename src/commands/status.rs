//! `status`: this node's strix-toolbox version, engine and toolboxes.

use crate::error::Result;
use crate::image::short_digest;
use crate::ops::status::{status, StatusReport};
use crate::output::{Output, Render};
use crate::settings::Settings;

pub async fn run(settings: &Settings, out: &Output) -> Result<i32> {
    out.report(&status(settings).await?);
    Ok(0)
}

impl Render for StatusReport {
    fn render(&self, out: &Output) {
        out.line(&format!("strix-toolbox {} · {} at {}", self.version, self.engine.program(), self.endpoint));
        let short = |value: &Option<String>| value.as_deref().map_or("-", short_digest).to_string();
        for toolbox in &self.toolboxes {
            out.line(&format!(
                "  {:<20} {:<8} pin {:<16} image {} rccl {}",
                toolbox.name,
                if toolbox.running { "running" } else { "stopped" },
                toolbox.pin.as_deref().unwrap_or("-"),
                short(&toolbox.image_digest),
                short(&toolbox.rccl_sha256)
            ));
        }
        if self.toolboxes.is_empty() {
            out.line("  no toolboxes yet: `strix-toolbox refresh` creates one");
        }
    }
}
