//! `list`: the toolboxes strix-toolbox manages, with image, pin and age.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::cli::GlobalOptions;
use crate::engine;
use crate::error::Result;
use crate::labels;
use crate::ui::{Style, Ui};

#[derive(Debug, Serialize)]
struct ListedToolbox {
    name: String,
    image: String,
    image_id: String,
    pin: Option<String>,
    manager: Option<String>,
    running: bool,
    created: Option<String>,
}

pub async fn run(global: &GlobalOptions, ui: &Ui) -> Result<i32> {
    let connection = engine::connect(global.engine).await?;
    let mut containers = connection.engine().container_list(&format!("{}=true", labels::MANAGED)).await?;
    containers.sort_by(|a, b| a.name.cmp(&b.name));
    let listed: Vec<ListedToolbox> = containers
        .into_iter()
        .map(|c| ListedToolbox {
            image: c.labels.get(labels::IMAGE_REF).cloned().unwrap_or(c.image),
            image_id: c.image_id,
            pin: c.labels.get(labels::PIN).cloned(),
            manager: c.labels.get(labels::MANAGER).cloned(),
            running: c.running,
            created: c.created,
            name: c.name,
        })
        .collect();
    if global.json {
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
