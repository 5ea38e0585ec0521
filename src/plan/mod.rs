//! The refresh plan: desired state (spec + image) against what the engine reports → steps.
//! Pure data; `--dry-run` prints exactly what `apply` would run. An empty plan is a no-op.

pub mod pin;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::container_engine::{ContainerInfo, CreateRequest, EngineKind, ImageInfo};
use crate::image::reference::ImageRef;
use crate::image::short_digest;
use crate::labels;
use crate::manager::{Manager, ManagerKind};
use crate::verify::Expected;
use pin::pins_in;

/// The toolbox as it should be.
#[derive(Debug, Clone)]
pub struct DesiredToolbox {
    pub name: String,
    /// Repository the image and its pins live in.
    pub repository: String,
    pub image: ImageInfo,
    /// Complete create request (final name, labels included).
    pub request: CreateRequest,
    pub spec_hash: String,
    pub pin: Option<String>,
    /// What the replacement must prove from the inside before it is swapped in (None: `--no-verify`).
    pub verify: Option<Expected>,
}

/// What is there now.
#[derive(Debug, Clone, Default)]
pub struct CurrentState {
    /// The container under the toolbox's name.
    pub container: Option<ContainerInfo>,
    /// A managed container left under the swap name by an interrupted swap.
    pub left_as_old: Option<ContainerInfo>,
    /// A container left under the temporary name by an interrupted refresh.
    pub left_as_new: Option<ContainerInfo>,
    /// Images of the repository.
    pub images: Vec<ImageInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "step", rename_all = "kebab-case")]
pub enum Step {
    /// Put back a toolbox an interrupted swap left under the swap name.
    Restore { from: String, to: String },
    /// Remove a container an interrupted refresh left behind.
    RemoveLeftover { name: String },
    /// Tag the image with its date so later refreshes keep it.
    Pin { image_id: String, reference: String },
    /// Create the replacement under a temporary name.
    Create { request: Box<CreateRequest> },
    /// Start the replacement and check it from the inside; a failure stops before the swap.
    Verify { name: String, expected: Box<Expected> },
    /// Replace the old toolbox (if any) with the new one, then remove the old one.
    Swap { temp: String, name: String, old_id: Option<String> },
    /// Remove pins beyond --keep.
    Prune { references: Vec<String> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Created,
    Recreated,
    Unchanged,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Created => "created",
            Action::Recreated => "recreated",
            Action::Unchanged => "unchanged",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RefreshPlan {
    pub action: Action,
    /// Why: "no toolbox named vllm", "the image changed", ...
    pub reason: String,
    pub steps: Vec<Step>,
    /// The toolbox being replaced is running: its processes stop at the swap.
    pub replaces_running: bool,
}

impl RefreshPlan {
    /// Only the steps up to the replacement's creation: a cluster node stages its replacement,
    /// and every node swaps together once all have one (see `ops::phase`).
    pub fn staging_only(mut self) -> RefreshPlan {
        if let Some(swap) = self.steps.iter().position(|step| matches!(step, Step::Swap { .. })) {
            self.steps.truncate(swap);
        }
        self
    }

    /// The name the replacement is created under, when the plan creates one.
    pub fn staged_name(&self) -> Option<&str> {
        self.steps.iter().find_map(|step| match step {
            Step::Create { request } => Some(request.name.as_str()),
            _ => None,
        })
    }
}

/// The temporary name a replacement is created under.
pub fn temp_name(name: &str) -> String {
    format!("{name}-strix-new")
}

/// The name the old toolbox briefly has during a swap.
pub fn old_name(name: &str) -> String {
    format!("{name}-strix-old")
}

/// sha256 of everything that shapes the container except its name, image and our own labels,
/// so an unchanged spec is recognisable on the next refresh.
pub fn spec_hash(manager: ManagerKind, request: &CreateRequest) -> String {
    let mut shape = request.clone();
    shape.name.clear();
    shape.image.clear();
    shape.labels.retain(|key, _| !key.starts_with(labels::PREFIX));
    let mut hasher = Sha256::new();
    hasher.update(manager.as_str());
    hasher.update(serde_json::to_vec(&shape).unwrap_or_default());
    format!("{:x}", hasher.finalize())
}

/// The labels that record what a container was made from.
pub fn provenance_labels(
    name: &str,
    image_ref: &str,
    image: &ImageInfo,
    repository: &str,
    pin: Option<&str>,
    manager: ManagerKind,
    spec_hash: &str,
) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    map.insert(labels::MANAGED.into(), "true".into());
    map.insert(labels::TOOLBOX.into(), name.into());
    map.insert(labels::SPEC_HASH.into(), spec_hash.into());
    map.insert(labels::IMAGE_REF.into(), image_ref.into());
    map.insert(labels::IMAGE_ID.into(), image.id.clone());
    map.insert(labels::MANAGER.into(), manager.as_str().into());
    if let Some(digest) = pulled_digest(image, repository, image_ref) {
        map.insert(labels::IMAGE_DIGEST.into(), digest);
    }
    if let Some(pin) = pin {
        map.insert(labels::PIN.into(), pin.into());
    }
    map
}

/// The registry digest to record for `image`, made from `image_ref`: the digest `image_ref` names
/// when the image carries it (podman lists an index's digest and its platform manifest's, sorted;
/// docker only the index's: asked by digest, every node records that one), else
/// [`registry_digest`].
pub fn pulled_digest(image: &ImageInfo, repository: &str, image_ref: &str) -> Option<String> {
    let asked = ImageRef::parse(image_ref).ok().and_then(|reference| reference.digest);
    let carried = asked.filter(|digest| image.repo_digests.iter().any(|name| name.ends_with(&format!("@{digest}"))));
    carried.or_else(|| registry_digest(image, repository))
}

/// `sha256:…` of the image as pulled from `repository`.
pub fn registry_digest(image: &ImageInfo, repository: &str) -> Option<String> {
    let matching = image.repo_digests.iter().find(|d| d.starts_with(&format!("{repository}@")));
    matching.or(image.repo_digests.first()).and_then(|d| ImageRef::parse(d).ok()).and_then(|r| r.digest)
}

pub fn plan_refresh(desired: &DesiredToolbox, current: &CurrentState, keep: usize, force: bool) -> RefreshPlan {
    let mut steps = Vec::new();
    let name = &desired.name;

    // An interrupted swap may have left the working toolbox under the swap name: put it back.
    let mut existing = current.container.clone();
    if existing.is_none() {
        if let Some(old) = &current.left_as_old {
            steps.push(Step::Restore { from: old.name.clone(), to: name.clone() });
            existing = Some(ContainerInfo { name: name.clone(), ..old.clone() });
        }
    } else if let Some(old) = &current.left_as_old {
        steps.push(Step::RemoveLeftover { name: old.name.clone() });
    }
    if let Some(new) = &current.left_as_new {
        steps.push(Step::RemoveLeftover { name: new.name.clone() });
    }

    if let Some(pin) = &desired.pin {
        let reference = format!("{}:{pin}", desired.repository);
        if !desired.image.repo_tags.contains(&reference) {
            steps.push(Step::Pin { image_id: desired.image.id.clone(), reference });
        }
    }

    let label = |c: &ContainerInfo, key: &str| c.labels.get(key).cloned().unwrap_or_default();
    let (action, reason) = match &existing {
        None => (Action::Created, format!("no toolbox named {name}")),
        Some(c) if force => (Action::Recreated, "--force".into()),
        Some(c) if label(c, labels::MANAGED) != "true" => {
            (Action::Recreated, format!("{name} was not made by strix-toolbox"))
        }
        Some(c) if label(c, labels::IMAGE_ID) != desired.image.id => (
            Action::Recreated,
            format!("the image changed ({} → {})", short(&label(c, labels::IMAGE_ID)), short(&desired.image.id)),
        ),
        Some(c) if label(c, labels::SPEC_HASH) != desired.spec_hash => {
            (Action::Recreated, "the container spec changed (devices, groups, limits or environment)".into())
        }
        Some(_) => (Action::Unchanged, "image and spec unchanged".into()),
    };
    if action != Action::Unchanged {
        let temp = temp_name(name);
        steps.push(Step::Create { request: Box::new(CreateRequest { name: temp.clone(), ..desired.request.clone() }) });
        if let Some(expected) = &desired.verify {
            steps.push(Step::Verify { name: temp.clone(), expected: Box::new(expected.clone()) });
        }
        steps.push(Step::Swap { temp, name: name.clone(), old_id: existing.as_ref().map(|c| c.id.clone()) });
    }

    let prune = pins_to_prune(&current.images, &desired.repository, &desired.image.id, keep);
    if !prune.is_empty() {
        steps.push(Step::Prune { references: prune });
    }
    let replaces_running = action != Action::Unchanged && existing.as_ref().is_some_and(|c| c.running);
    RefreshPlan { action, reason, steps, replaces_running }
}

/// Pin references of images older than the newest `keep` other pinned images.
pub fn pins_to_prune(images: &[ImageInfo], repository: &str, current_image_id: &str, keep: usize) -> Vec<String> {
    let mut pinned: Vec<(String, &ImageInfo)> = images
        .iter()
        .filter(|image| image.id != current_image_id)
        .filter_map(|image| pins_in(image, repository).into_iter().next().map(|newest| (newest, image)))
        .collect();
    pinned.sort_by(|a, b| b.0.cmp(&a.0));
    pinned
        .into_iter()
        .skip(keep)
        .flat_map(|(_, image)| {
            let pins = pins_in(image, repository).into_iter().map(|pin| format!("{repository}:{pin}"));
            pins.chain(spread_names(image, repository))
        })
        .collect()
}

/// The digest-only names an image has for the same repository path in another registry: what a
/// spread leaves on docker (`HEAD:PORT/PATH@sha256:…`, see `spread::pull`), which would keep
/// a pruned image alive once its pins are gone.
fn spread_names(image: &ImageInfo, repository: &str) -> Vec<String> {
    let Ok(canonical) = ImageRef::parse(repository) else { return Vec::new() };
    let path = canonical.path();
    let tagged_in = |other: &str| image.repo_tags.iter().any(|tag| tag.starts_with(&format!("{other}:")));
    image
        .repo_digests
        .iter()
        .filter(|name| {
            ImageRef::parse(name).is_ok_and(|named| {
                named.registry() != canonical.registry() && named.path() == path && !tagged_in(&named.repository)
            })
        })
        .cloned()
        .collect()
}

/// The first 12 characters of an image id (from a label: it may hold anything).
fn short(id: &str) -> &str {
    match short_digest(id) {
        "" => "none",
        short => short,
    }
}

impl Step {
    /// One line saying what the step does.
    pub fn describe(&self) -> String {
        match self {
            Step::Restore { from, to } => format!("restore {from} as {to} (left by an interrupted refresh)"),
            Step::RemoveLeftover { name } => format!("remove {name} (left by an interrupted refresh)"),
            Step::Pin { reference, .. } => format!("pin the image as {reference}"),
            Step::Create { request } => format!("create {} from {}", request.name, request.image),
            Step::Verify { name, .. } => {
                format!("start {name} and verify it from the inside (devices, memlock, groups, environment, RCCL)")
            }
            Step::Swap { temp, name, old_id: Some(_) } => format!("swap {temp} in as {name} and remove the old {name}"),
            Step::Swap { temp, name, old_id: None } => format!("rename {temp} to {name}"),
            Step::Prune { references } => format!("remove {} old pinned image tag(s)", references.len()),
        }
    }

    /// The equivalent command lines.
    pub fn commands(&self, engine: EngineKind, manager: &dyn Manager) -> Vec<Vec<String>> {
        let program = engine.program().to_string();
        let cmd = |args: &[&str]| -> Vec<String> {
            std::iter::once(program.clone()).chain(args.iter().map(|a| a.to_string())).collect()
        };
        match self {
            Step::Restore { from, to } => vec![cmd(&["rename", from, to])],
            Step::RemoveLeftover { name } => vec![cmd(&["rm", "--force", name])],
            Step::Pin { image_id, reference } => vec![cmd(&["tag", image_id, reference])],
            Step::Create { request } => manager.describe_create(engine, request),
            Step::Verify { name, .. } => vec![vec!["strix-toolbox".into(), "verify".into(), name.clone()]],
            Step::Swap { temp, name, old_id } => {
                let mut lines = Vec::new();
                if old_id.is_some() {
                    lines.push(cmd(&["rename", name, &old_name(name)]));
                }
                lines.push(cmd(&["rename", temp, name]));
                if old_id.is_some() {
                    lines.push(cmd(&["rm", "--force", &old_name(name)]));
                }
                lines
            }
            Step::Prune { references } => {
                let mut line = cmd(&["rmi"]);
                line.extend(references.iter().cloned());
                vec![line]
            }
        }
    }
}

#[cfg(test)]
mod tests;
