//! What the head's registry keeps, after a refresh that used it: for each toolbox, the image it
//! serves now and the `--keep` newest before it (by pin, as each node keeps its pins); every
//! toolbox's images count, so one toolbox never prunes another's. The rest is deleted by digest
//! through the registry API (an index with the manifests it lists, unless a kept image lists them
//! too), then `registry garbage-collect` frees their blobs. Never `--delete-untagged`:
//! distribution 2.8 takes the manifests an index lists for untagged ones and breaks the index.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::registry::{writer_client, CONFIG_IN_CONTAINER, WRITER};
use crate::container_engine::ExecIo;
use crate::error::{Error, Result};
use crate::image::reference::ImageRef;
use crate::link::home::{now_as_pin, RegistryHome, ServedImage};
use crate::registry::manifest::Contents;
use crate::registry::RegistryClient;
use crate::settings::Settings;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadPrune {
    /// The head's registry, `IP:PORT`.
    pub registry: String,
    /// The toolbox the refresh was for.
    pub toolbox: String,
    /// `repo@sha256:…`: what it serves now.
    pub image: String,
    /// Its pin, as the nodes reported it.
    pub pin: Option<String>,
    /// Older images to keep (the refresh's `--keep`).
    pub keep: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadPruned {
    /// The manifests deleted, `path@sha256:…`.
    pub deleted: Vec<String>,
    /// The registry's storage on disk afterwards.
    pub disk_bytes: u64,
    pub warnings: Vec<String>,
}

pub async fn spread_prune(settings: &Settings, request: &SpreadPrune) -> Result<SpreadPruned> {
    let image = ImageRef::parse(&request.image)?;
    let digest = image.digest.clone().ok_or_else(|| Error::Internal(format!("{} has no digest", request.image)))?;
    let home = RegistryHome::locate(&settings.paths)?;
    let _lock = home.lock().await?;
    let mut served = home.served()?;
    match served.iter_mut().find(|s| s.toolbox == request.toolbox && s.digest == digest) {
        Some(current) => current.pin = request.pin.clone(),
        None => served.push(ServedImage {
            path: image.path(),
            digest: digest.clone(),
            toolbox: request.toolbox.clone(),
            pin: request.pin.clone(),
            copied: now_as_pin(),
        }),
    }
    let (kept, dropped) = select(served, &request.toolbox, &digest, request.keep);
    let head = writer_client(&home, &request.registry)?;
    let mut still_listed = BTreeSet::new();
    for image in &kept {
        still_listed.insert((image.path.clone(), image.digest.clone()));
        for listed in listed_by(&head, image).await? {
            still_listed.insert((image.path.clone(), listed));
        }
    }
    let mut pruned = SpreadPruned::default();
    for image in &dropped {
        let mut manifests = listed_by(&head, image).await?;
        manifests.push(image.digest.clone());
        for manifest in manifests {
            if !still_listed.contains(&(image.path.clone(), manifest.clone()))
                && head.delete_manifest(&image.path, &manifest).await?
            {
                pruned.deleted.push(format!("{}@{manifest}", image.path));
            }
        }
    }
    home.set_served(&kept)?;
    if !pruned.deleted.is_empty() {
        pruned.warnings.extend(garbage_collect(settings).await);
    }
    pruned.disk_bytes = home.disk_use();
    Ok(pruned)
}

/// What is served, as (kept, dropped): every other toolbox's images stay; of `toolbox`'s, the one
/// it serves now (`current`) and the `keep` newest others.
fn select(served: Vec<ServedImage>, toolbox: &str, current: &str, keep: usize) -> (Vec<ServedImage>, Vec<ServedImage>) {
    let (mine, mut kept): (Vec<_>, Vec<_>) = served.into_iter().partition(|s| s.toolbox == toolbox);
    let (now, mut older): (Vec<_>, Vec<_>) = mine.into_iter().partition(|s| s.digest == current);
    older.sort_by(|a, b| b.age().cmp(a.age()));
    let dropped = older.split_off(keep.min(older.len()));
    kept.extend(now);
    kept.extend(older);
    (kept, dropped)
}

/// The manifests an index lists (none for an image manifest, or one no longer there).
async fn listed_by(head: &RegistryClient, image: &ServedImage) -> Result<Vec<String>> {
    if !head.has_manifest(&image.path, &image.digest).await? {
        return Ok(Vec::new());
    }
    let manifest = head.manifest(&image.path, &image.digest).await?;
    Ok(match manifest.contents() {
        Ok(Contents::Index(listed)) => listed.into_iter().map(|d| d.digest).collect(),
        _ => Vec::new(),
    })
}

/// `registry garbage-collect` in the writer's container (the nodes' has the storage read-only): the blobs no manifest refers to go.
/// A warning when it fails (the refresh is done; the space is freed next time).
async fn garbage_collect(settings: &Settings) -> Option<String> {
    let connection = match settings.connect().await {
        Ok(connection) => connection,
        Err(error) => return Some(format!("the head's registry was not garbage-collected: {error}")),
    };
    let argv: Vec<String> = ["/bin/registry", "garbage-collect", CONFIG_IN_CONTAINER].map(String::from).to_vec();
    match connection.engine().exec(WRITER, &argv, &[], None, ExecIo::Capture).await {
        Ok(outcome) if outcome.exit_code == 0 => None,
        Ok(outcome) => {
            let said =
                format!("{}{}", String::from_utf8_lossy(&outcome.stdout), String::from_utf8_lossy(&outcome.stderr));
            // An empty registry has no repositories directory: nothing to collect.
            if said.contains("Path not found") {
                return None;
            }
            let last = said.lines().map(str::trim).rfind(|line| !line.is_empty()).unwrap_or("no message").to_string();
            Some(format!("`registry garbage-collect` on the head exited {}: {last}", outcome.exit_code))
        }
        Err(error) => Some(format!("the head's registry was not garbage-collected: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(toolbox: &str, digest: &str, pin: &str) -> ServedImage {
        ServedImage {
            path: "kyuz0/vllm".into(),
            digest: digest.into(),
            toolbox: toolbox.into(),
            pin: Some(pin.into()),
            copied: "20261201-000000".into(),
        }
    }

    #[test]
    fn keeps_the_current_image_and_the_newest_others_per_toolbox() {
        let all = vec![
            served("vllm", "sha256:1", "20261101-100000"),
            served("vllm", "sha256:3", "20261115-100000"),
            served("vllm-dev", "sha256:0", "20261001-100000"),
            served("vllm", "sha256:2", "20261108-100000"),
            served("vllm", "sha256:4", "20261122-100000"),
        ];
        let (kept, dropped) = select(all.clone(), "vllm", "sha256:4", 2);
        let digests = |images: &[ServedImage]| images.iter().map(|i| i.digest.clone()).collect::<Vec<_>>();
        assert_eq!(digests(&kept), ["sha256:0", "sha256:4", "sha256:3", "sha256:2"]);
        assert_eq!(digests(&dropped), ["sha256:1"]);
        // Rolled back to an older image: it stays, and the newest others with it.
        let (kept, dropped) = select(all, "vllm", "sha256:1", 1);
        assert_eq!(digests(&kept), ["sha256:0", "sha256:1", "sha256:4"]);
        assert_eq!(digests(&dropped), ["sha256:3", "sha256:2"]);
    }
}
