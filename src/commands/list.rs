//! `list`: the toolboxes strix-toolbox manages, with image, pin and age.

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::ops::status::list_toolboxes;
use crate::output::Style;
use crate::settings::Settings;

pub async fn run(settings: &Settings) -> Result<i32> {
    let connection = settings.connect().await?;
    let listed = list_toolboxes(connection.engine()).await?;
    let ui = &settings.ui;
    if ui.json {
        ui.print_json(&listed);
        return Ok(0);
    }
    if listed.is_empty() {
        ui.status("no toolboxes yet: `strix-toolbox refresh` creates one");
        return Ok(0);
    }
    println!(
        "{}",
        ui.paint(
            &format!("{:<20} {:<10} {:<9} {:<16} {:<10} IMAGE", "NAME", "STATUS", "MANAGER", "PIN", "AGE"),
            Style::Bold
        )
    );
    for t in &listed {
        println!(
            "{:<20} {:<10} {:<9} {:<16} {:<10} {}",
            t.name,
            if t.running { "running" } else { "stopped" },
            t.manager.as_deref().unwrap_or("-"),
            t.pin.as_deref().unwrap_or("-"),
            t.created.as_deref().map_or("-".into(), age),
            t.image
        );
    }
    Ok(0)
}

/// "3d", "5h", "12m" since an RFC 3339 time.
fn age(created: &str) -> String {
    let Ok(time) = DateTime::parse_from_rfc3339(created) else { return "-".into() };
    let minutes = (Utc::now() - time.with_timezone(&Utc)).num_minutes().max(0);
    match minutes {
        m if m >= 24 * 60 => format!("{}d", m / (24 * 60)),
        m if m >= 60 => format!("{}h", m / 60),
        m => format!("{m}m"),
    }
}
