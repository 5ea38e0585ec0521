//! `rollback [NAME]`: recreate the toolbox from the pinned image before the one it runs.

use crate::apply::lock::DEFAULT_WAIT;
use crate::error::{Error, Result};
use crate::image::reference::{validate_container_name, ImageRef};
use crate::labels;
use crate::manager::ManagerKind;
use crate::ops::refresh::{read_node, refresh_with, AskedDigest, ImageSource, RefreshReport, RefreshRequest};
use crate::plan::pin::pins_in;
use crate::serving::engine::EngineRef;
use crate::settings::Settings;
use crate::toolbox::running::find_toolbox;

pub async fn rollback(settings: &Settings, name: &str, dry_run: bool) -> Result<RefreshReport> {
    validate_container_name(name)?;
    // refresh_with requires the GPU of a GPU image, as a refresh does.
    let node = read_node(settings)?;
    let connection = settings.connect().await?;
    let engine = connection.engine();
    let container = find_toolbox(engine, name).await?;
    let image_ref = container.labels.get(labels::IMAGE_REF).ok_or_else(|| {
        Error::toolbox(
            name,
            format!("{name} was not made by strix-toolbox, so it has no pinned history to roll back to"),
            format!("recreate it with `strix-toolbox refresh --name {name}`; from then on each refresh keeps a pin"),
        )
    })?;
    let image = ImageRef::parse(image_ref)?;
    let current_pin = container.labels.get(labels::PIN).cloned().unwrap_or_default();

    let mut pins: Vec<String> = engine
        .image_list(&image.repository)
        .await?
        .iter()
        .flat_map(|i| pins_in(i, &image.repository))
        .filter(|pin| current_pin.is_empty() || *pin < current_pin)
        .collect();
    pins.sort();
    let previous = pins.pop().ok_or_else(|| {
        Error::toolbox(
            name,
            format!(
                "no pinned image of {} older than {} is left to roll back to",
                image.repository,
                if current_pin.is_empty() { "the current one" } else { &current_pin }
            ),
            "keep more with `refresh --keep N`",
        )
    })?;

    let request = RefreshRequest {
        name: name.to_string(),
        image_ref: image.with_tag(&previous),
        source: ImageSource::Local,
        manager: ManagerKind::of(&container).into(),
        keep: usize::MAX,
        force: false,
        dry_run,
        // The same toolbox, only older: with the --env it was made with.
        env: labels::decode_user_env(&container.labels),
        stage_only: false,
        // Back to a toolbox that worked before: proven again all the same.
        verify: true,
        lock_wait_seconds: DEFAULT_WAIT.as_secs(),
        spread: None,
        serving: EngineRef::of_label(container.labels.get(labels::ENGINE).map(String::as_str)),
    };
    refresh_with(settings, &node, engine, &request, AskedDigest::not_asked()).await
}
