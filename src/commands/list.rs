//! `list`: the toolboxes strix-toolbox manages, with image, pin and age.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::Result;
use crate::ops::status::list_toolboxes;
use crate::output::{Output, Render, Style};
use crate::settings::Settings;
use crate::toolbox::status::ToolboxStatus;

pub async fn run(settings: &Settings, out: &Output) -> Result<i32> {
    let connection = settings.connect().await?;
    out.report(&Listing(list_toolboxes(connection.engine()).await?));
    Ok(0)
}

/// The managed toolboxes: a table, or (`--json`) the array of them.
#[derive(Serialize)]
#[serde(transparent)]
struct Listing(Vec<ToolboxStatus>);

impl Render for Listing {
    fn render(&self, out: &Output) {
        if self.0.is_empty() {
            out.status("no toolboxes yet: `strix-toolbox refresh` creates one");
            return;
        }
        let header = format!("{:<20} {:<10} {:<9} {:<16} {:<10} IMAGE", "NAME", "STATUS", "MANAGER", "PIN", "AGE");
        out.line(&out.paint(&header, Style::Bold));
        for t in &self.0 {
            out.line(&format!(
                "{:<20} {:<10} {:<9} {:<16} {:<10} {}",
                t.name,
                if t.running { "running" } else { "stopped" },
                t.manager.as_deref().unwrap_or("-"),
                t.pin.as_deref().unwrap_or("-"),
                t.created.as_deref().map_or("-".into(), age),
                t.image
            ));
        }
    }
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
