//! `status`: this node's strix-toolbox version, engine and toolboxes.

use crate::error::Result;
use crate::image::short_digest;
use crate::ops::status::status;
use crate::settings::Settings;

pub async fn run(settings: &Settings) -> Result<i32> {
    let report = status(settings).await?;
    if settings.ui.json {
        settings.ui.print_json(&report);
        return Ok(0);
    }
    println!("strix-toolbox {} · {} at {}", report.version, report.engine.program(), report.endpoint);
    for toolbox in &report.toolboxes {
        fn short(value: &Option<String>) -> &str {
            value.as_deref().map_or("-", short_digest)
        }
        println!(
            "  {:<20} {:<8} pin {:<16} image {} rccl {}",
            toolbox.name,
            if toolbox.running { "running" } else { "stopped" },
            toolbox.pin.as_deref().unwrap_or("-"),
            short(&toolbox.image_digest),
            short(&toolbox.rccl_sha256)
        );
    }
    if report.toolboxes.is_empty() {
        println!("  no toolboxes yet: `strix-toolbox refresh` creates one");
    }
    Ok(0)
}
