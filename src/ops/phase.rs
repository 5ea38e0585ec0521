//! The phases after `refresh --stage-only`, which `cluster refresh` runs on every node in turn so
//! the nodes change together: `swap` (the staged replacement takes the name, the old toolbox stays
//! parked), then `finish` (remove the parked one, prune pins) — or, when any node failed, `abort`
//! (remove the staged replacement) and `undo` (put the parked toolbox back). Each is idempotent.

use serde::{Deserialize, Serialize};

use crate::apply::lock::ToolboxLock;
use crate::apply::{prune, remove_parked, swap_in};
use crate::container_engine::{ContainerEngine, ContainerInfo};
use crate::error::{Error, Result};
use crate::image::reference::{validate_container_name, ImageRef};
use crate::labels;
use crate::plan::{old_name, pins_to_prune, temp_name};
use crate::settings::Settings;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The staged replacement takes the toolbox's name; the old one is parked.
    Swap,
    /// Remove the parked old toolbox and prune old pins.
    Finish,
    /// Remove the staged replacement (nothing was swapped).
    Abort,
    /// Put the parked old toolbox back (after a swap the cluster cannot complete).
    Undo,
}

/// One phase for one toolbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseRequest {
    pub phase: Phase,
    /// The toolbox.
    pub name: String,
    /// Older pins to keep (finish).
    pub keep: usize,
    /// The image the swap brought in: `undo` removes a toolbox that had no predecessor only when
    /// it is that one.
    pub image_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseReport {
    pub name: String,
    pub phase: Phase,
    /// Something changed (false: there was nothing to do).
    pub changed: bool,
    /// The swap parked an old toolbox (undo puts it back).
    pub parked: bool,
    pub warnings: Vec<String>,
}

pub async fn run_phase(settings: &Settings, request: &PhaseRequest) -> Result<PhaseReport> {
    let (phase, name, keep, image_id) =
        (request.phase, request.name.as_str(), request.keep, request.image_id.as_deref());
    validate_container_name(name)?;
    let _lock = ToolboxLock::acquire(&settings.paths, name)?;
    let connection = settings.connect().await?;
    run_phase_on(connection.engine(), phase, name, keep, image_id).await
}

/// [`run_phase`] on an engine already connected, the toolbox already locked.
async fn run_phase_on(
    engine: &dyn ContainerEngine,
    phase: Phase,
    name: &str,
    keep: usize,
    image_id: Option<&str>,
) -> Result<PhaseReport> {
    let mut report = PhaseReport { name: name.to_string(), phase, changed: false, parked: false, warnings: Vec::new() };
    match phase {
        Phase::Swap => swap(engine, name, &mut report).await?,
        Phase::Finish => finish(engine, name, keep, &mut report).await?,
        Phase::Abort => {
            if managed(engine, &temp_name(name)).await?.is_some() {
                engine.container_remove(&temp_name(name), true).await?;
                report.changed = true;
            }
        }
        Phase::Undo => undo(engine, name, image_id, &mut report).await?,
    }
    Ok(report)
}

/// A container of ours under `name`, if there is one.
async fn managed(engine: &dyn ContainerEngine, name: &str) -> Result<Option<ContainerInfo>> {
    let container = engine.container_inspect(name).await?;
    Ok(container.filter(|c| c.labels.get(labels::MANAGED).map(String::as_str) == Some("true")))
}

async fn swap(engine: &dyn ContainerEngine, name: &str, report: &mut PhaseReport) -> Result<()> {
    let staged = temp_name(name);
    if managed(engine, &staged).await?.is_none() {
        // Swapped already (a retried phase), or nothing was staged.
        report.parked = managed(engine, &old_name(name)).await?.is_some();
        return Ok(());
    }
    let old = engine.container_inspect(name).await?;
    swap_in(engine, &staged, name, old.as_ref().map(|c| c.id.as_str())).await?;
    report.changed = true;
    report.parked = old.is_some();
    Ok(())
}

async fn finish(engine: &dyn ContainerEngine, name: &str, keep: usize, report: &mut PhaseReport) -> Result<()> {
    let parked = old_name(name);
    if managed(engine, &parked).await?.is_some() {
        remove_parked(engine, name, &parked, &mut report.warnings).await;
        report.changed = true;
    }
    let Some(current) = managed(engine, name).await? else { return Ok(()) };
    let (Some(reference), Some(image_id)) =
        (current.labels.get(labels::IMAGE_REF), current.labels.get(labels::IMAGE_ID))
    else {
        return Ok(());
    };
    let repository = ImageRef::parse(reference)?.repository;
    let images = engine.image_list(&repository).await?;
    prune(engine, &pins_to_prune(&images, &repository, image_id, keep), &mut report.warnings).await;
    Ok(())
}

async fn undo(
    engine: &dyn ContainerEngine,
    name: &str,
    image_id: Option<&str>,
    report: &mut PhaseReport,
) -> Result<()> {
    let parked = old_name(name);
    if let Some(old) = managed(engine, &parked).await? {
        if engine.container_inspect(name).await?.is_some() {
            engine.container_remove(name, true).await?;
        }
        engine.container_rename(&old.id, name).await?;
        report.changed = true;
        return Ok(());
    }
    // The replacement still waits under its temporary name: the swap did not happen (it failed
    // before the rename, or put the old toolbox back itself), so there is nothing to undo.
    if managed(engine, &temp_name(name)).await?.is_some() {
        return Ok(());
    }
    // No predecessor: the swap created the toolbox; remove it only if it is the one swapped in.
    let Some(current) = managed(engine, name).await? else { return Ok(()) };
    let swapped_in = image_id.is_some_and(|id| current.labels.get(labels::IMAGE_ID).map(String::as_str) == Some(id));
    if !swapped_in {
        return Err(Error::toolbox(
            name,
            format!(
                "{name} has no parked predecessor and is not the toolbox this refresh swapped in, so undo leaves it \
                 alone"
            ),
            "check it with `strix-toolbox status`",
        ));
    }
    engine.container_remove(name, true).await?;
    report.changed = true;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container_engine::fake::{FakeEngine, RecordedCall};
    use crate::container_engine::ImageInfo;

    const REPO: &str = "registry.test/vllm";

    fn toolbox(id: &str, name: &str, image_id: &str) -> ContainerInfo {
        let labels = [
            (labels::MANAGED, "true".to_string()),
            (labels::IMAGE_ID, image_id.to_string()),
            (labels::IMAGE_REF, format!("{REPO}:latest")),
        ];
        ContainerInfo {
            id: id.into(),
            name: name.into(),
            image_id: image_id.into(),
            labels: labels.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            ..Default::default()
        }
    }

    /// `box` runs the old image; its replacement is staged under the temporary name.
    fn staged() -> FakeEngine {
        let engine = FakeEngine::new();
        let tags = |tags: &[&str]| tags.iter().map(|t| format!("{REPO}:{t}")).collect();
        engine.add_image(ImageInfo {
            id: "sha256:old".into(),
            repo_tags: tags(&["20260101-000000"]),
            ..Default::default()
        });
        engine.add_image(ImageInfo {
            id: "sha256:new".into(),
            repo_tags: tags(&["latest", "20261101-000000"]),
            ..Default::default()
        });
        engine.add_container(toolbox("old-id", "box", "sha256:old"));
        engine.add_container(toolbox("new-id", &temp_name("box"), "sha256:new"));
        engine
    }

    async fn phase(engine: &FakeEngine, phase: Phase, keep: usize) -> PhaseReport {
        run_phase_on(engine, phase, "box", keep, Some("sha256:new")).await.unwrap()
    }

    fn id_of(engine: &FakeEngine, name: &str) -> Option<String> {
        engine.container(name).map(|c| c.id)
    }

    #[tokio::test]
    async fn swap_then_finish_each_done_twice_change_once() {
        let engine = staged();
        let swapped = phase(&engine, Phase::Swap, 0).await;
        assert!(swapped.changed && swapped.parked);
        assert_eq!(id_of(&engine, "box").as_deref(), Some("new-id"));
        assert_eq!(id_of(&engine, &old_name("box")).as_deref(), Some("old-id"));
        let again = phase(&engine, Phase::Swap, 0).await;
        assert!(!again.changed && again.parked, "a retried swap finds it done: {again:?}");
        assert_eq!(id_of(&engine, "box").as_deref(), Some("new-id"));

        let finished = phase(&engine, Phase::Finish, 0).await;
        assert!(finished.changed && finished.warnings.is_empty(), "{finished:?}");
        assert_eq!(engine.container(&old_name("box")), None);
        assert_eq!(engine.image("sha256:old"), None, "keep 0: the old pin is pruned");
        let again = phase(&engine, Phase::Finish, 0).await;
        assert!(!again.changed, "{again:?}");
        assert_eq!(id_of(&engine, "box").as_deref(), Some("new-id"));
    }

    #[tokio::test]
    async fn abort_removes_the_staged_replacement_once() {
        let engine = staged();
        assert!(phase(&engine, Phase::Abort, 2).await.changed);
        assert_eq!(engine.container(&temp_name("box")), None);
        assert!(!phase(&engine, Phase::Abort, 2).await.changed);
        assert_eq!(id_of(&engine, "box").as_deref(), Some("old-id"), "the toolbox is untouched");
    }

    #[tokio::test]
    async fn undo_puts_the_parked_toolbox_back_and_a_retry_leaves_it_alone() {
        let engine = staged();
        phase(&engine, Phase::Swap, 2).await;
        let undone = phase(&engine, Phase::Undo, 2).await;
        assert!(undone.changed);
        assert_eq!(id_of(&engine, "box").as_deref(), Some("old-id"));
        assert_eq!(engine.container("new-id"), None);
        assert_eq!(engine.container(&old_name("box")), None);

        // Retried, undo finds a toolbox it did not swap in: it is left as it is (and said so).
        let calls = engine.calls().len();
        let retried = run_phase_on(&engine, Phase::Undo, "box", 2, Some("sha256:new")).await;
        assert!(retried.unwrap_err().to_string().contains("undo leaves it alone"));
        assert_eq!(engine.calls().len(), calls, "nothing changed");
        assert_eq!(id_of(&engine, "box").as_deref(), Some("old-id"));
    }

    #[tokio::test]
    async fn undo_after_a_swap_that_did_not_happen_changes_nothing() {
        let engine = staged();
        engine.fail(RecordedCall::rename(&temp_name("box"), "box"));
        run_phase_on(&engine, Phase::Swap, "box", 2, Some("sha256:new")).await.unwrap_err();
        assert_eq!(id_of(&engine, "box").as_deref(), Some("old-id"), "the swap put the old toolbox back");
        let undone = phase(&engine, Phase::Undo, 2).await;
        assert!(!undone.changed, "{undone:?}");
        assert_eq!(id_of(&engine, "box").as_deref(), Some("old-id"));
        assert!(phase(&engine, Phase::Abort, 2).await.changed, "the staged replacement goes with the abort");
    }

    #[tokio::test]
    async fn undo_without_a_predecessor_removes_only_the_toolbox_it_swapped_in() {
        let engine = FakeEngine::new();
        engine.add_image(ImageInfo { id: "sha256:new".into(), ..Default::default() });
        engine.add_container(toolbox("new-id", &temp_name("box"), "sha256:new"));
        let swapped = phase(&engine, Phase::Swap, 2).await;
        assert!(swapped.changed && !swapped.parked, "{swapped:?}");

        let refused = run_phase_on(&engine, Phase::Undo, "box", 2, Some("sha256:other")).await;
        assert!(refused.unwrap_err().to_string().contains("not the toolbox this refresh swapped in"));
        assert_eq!(id_of(&engine, "box").as_deref(), Some("new-id"), "someone else's is kept");

        assert!(phase(&engine, Phase::Undo, 2).await.changed);
        assert_eq!(engine.container("box"), None);
        assert!(!phase(&engine, Phase::Undo, 2).await.changed, "done already");
    }
}
