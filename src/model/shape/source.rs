//! Where a model's headers come from, and how little of it is read: a path as its engine's
//! toolbox sees it ([`super::in_toolbox`]: config.json, the safetensors index and each shard's
//! header, or a GGUF's first bytes, more only when its header is longer), or a Hub repository by
//! HTTP range reads (`model::hub`), as huggingface_hub's `get_safetensors_metadata` reads
//! safetensors: the first bytes of a file (the header's length, and most often the header), then
//! the rest of the header. A Hub revision is resolved to its commit by the repository's model
//! info first, and every file after it is read at that commit.
//!
//! Every read is bounded in bytes (each file's own bound, and [`ReadLimits::total_bytes`] for
//! the whole) and in time; the report says how many bytes and requests (execs, on a path) it took.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::in_toolbox::{self, Ask, RunsInToolbox};
use super::safetensors::{self, is_plain_path};
use super::weights::{Naming, WeightSource, Weights};
use super::{config, gguf, HeaderError, Sizing};
use crate::error::{Error, Result};
use crate::model::gguf_pick::{gguf_parts, pick_gguf};
use crate::model::hub::{Hub, HubAccess};
use crate::model::repo_id::RepoId;
use crate::model::source::{ModelFormat, ModelSource};

/// The first bytes of a safetensors file read at once from the Hub: its 8-byte length and, for a
/// dense model's shards (about 8 KiB of header each), the whole header: one request a shard; a
/// longer header (a MoE model's) is read on from there.
const SAFETENSORS_FIRST_READ: u64 = 16 << 10;
/// The first bytes of a GGUF read at once; most headers (their vocabulary included) fit.
const GGUF_FIRST_READ: u64 = 1 << 20;
const CONFIG: &str = "config.json";
const INDEX: &str = "model.safetensors.index.json";
const SINGLE: &str = "model.safetensors";

/// The bounds of one read of a model's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// All the bytes read, every file together.
    pub total_bytes: u64,
    pub connect: Duration,
    /// One request, its whole answer included.
    pub request: Duration,
}

impl Default for ReadLimits {
    fn default() -> ReadLimits {
        ReadLimits { total_bytes: 512 << 20, connect: Duration::from_secs(10), request: Duration::from_secs(60) }
    }
}

/// The model's shape and what reading it took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapeRead {
    pub sizing: Sizing,
    /// Bytes read (answers' bodies on the Hub, bytes a toolbox gave from its files).
    pub bytes_read: u64,
    /// Requests to the Hub, or execs in the toolbox.
    pub requests: u32,
    /// The commit a Hub revision resolved to.
    pub commit: Option<String>,
    /// The files read, in order.
    pub files: Vec<String>,
    /// Where a path was read: the toolbox (None: the Hub's repository).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolbox: Option<String>,
    /// What the reader had to assume, said (weights estimated, an index total that disagrees).
    pub notes: Vec<String>,
}

/// Where the files of a model are: a path's in the toolbox its engine reads it in, a Hub
/// repository's on the Hub.
pub struct ModelAccess<'a> {
    pub hub: &'a HubAccess,
    /// None: no path can be read (a read of one is refused).
    pub toolbox: Option<&'a dyn RunsInToolbox>,
}

/// Read the shape of the model `source` names as an engine reading `format` reads it, at
/// `revision` on the Hub (None: main).
pub async fn read_shape(
    source: &ModelSource,
    format: ModelFormat,
    revision: Option<&str>,
    reach: ModelAccess<'_>,
    limits: ReadLimits,
) -> Result<ShapeRead> {
    let revision = revision.unwrap_or("main");
    let (mut files, gguf) = match (source, format) {
        (ModelSource::Path(path), format) => {
            let Some(toolbox) = reach.toolbox else {
                return Err(Error::Internal(format!(
                    "{path}: a path is read in its engine's toolbox, and none was given"
                )));
            };
            match format {
                ModelFormat::Safetensors => (Files::in_toolbox(toolbox, path, path, limits), Vec::new()),
                ModelFormat::Gguf => (Files::in_toolbox(toolbox, "", path, limits), gguf_parts(path)?),
            }
        }
        (ModelSource::Hub(repo), ModelFormat::Safetensors) => {
            (Files::hub(repo, revision, reach.hub, limits).await?, Vec::new())
        }
        (ModelSource::HubGguf { repo, pick }, ModelFormat::Gguf) => {
            let files = Files::hub(repo, revision, reach.hub, limits).await?;
            let listed: Vec<String> = match &files.place {
                Place::Hub { listing, .. } => listing.iter().cloned().collect(),
                Place::Toolbox { .. } => Vec::new(),
            };
            let names = pick_gguf(repo.as_str(), &listed, pick)?;
            (files, names)
        }
        (ModelSource::Hub(repo), ModelFormat::Gguf) => {
            return Err(Error::Usage(format!(
                "{repo}: the engine serves a GGUF: name it (`{repo}:QUANT` or --file NAME.gguf)"
            )))
        }
        (ModelSource::HubGguf { repo, .. }, ModelFormat::Safetensors) => {
            return Err(Error::Usage(format!(
                "{repo}: a GGUF model is served by llama.cpp (`--engine llama.cpp`), and this engine reads config.json \
                 with safetensors weights"
            )))
        }
    };
    let mut notes = Vec::new();
    let sizing = if gguf.is_empty() {
        read_safetensors_model(&mut files, &mut notes).await?
    } else {
        read_gguf(&mut files, &gguf, &mut notes).await?
    };
    Ok(ShapeRead {
        sizing,
        bytes_read: files.bytes_read,
        requests: files.requests,
        commit: files.commit.clone(),
        files: files.read.clone(),
        toolbox: match &files.place {
            Place::Toolbox { toolbox, .. } => Some(toolbox.name().to_string()),
            Place::Hub { .. } => None,
        },
        notes,
    })
}

/// config.json, then the weights from the safetensors headers (or, past the byte budget, the
/// index's total), or an estimate from the config when the model has no safetensors weights.
async fn read_safetensors_model(files: &mut Files<'_>, notes: &mut Vec<String>) -> Result<Sizing> {
    let Some(config_bytes) = files.whole(CONFIG, config::CONFIG_LIMIT).await? else {
        return Err(files.not_there(
            "there is no config.json",
            &format!(
                "give a model with its config.json (a Hugging Face repository or snapshot, as {}), or its .gguf file",
                files.seen_by()
            ),
        ));
    };
    let mut shape = match config::parse(&config_bytes).map_err(|e| e.of_file(&files.model(), CONFIG))? {
        Sizing::Sized(shape) => shape,
        cannot @ Sizing::CannotSize { .. } => return Ok(cannot),
    };
    let shards = if let Some(bytes) = files.whole(INDEX, safetensors::INDEX_LIMIT).await? {
        let index = safetensors::parse_index(&bytes).map_err(|e| e.of_file(&files.model(), INDEX))?;
        Some((index.shards.clone(), index.total_size))
    } else if files.exists(SINGLE).await? {
        Some((vec![SINGLE.to_string()], None))
    } else {
        None
    };
    let weights = match shards {
        None => {
            notes.push(format!(
                "no {SINGLE} or {INDEX}: the weights are estimated from the config's parameters at its dtype"
            ));
            Weights::estimated(&shape)
        }
        Some((shards, index_total)) => match (files.safetensors_headers(&shards).await?, index_total) {
            (Some(headers), index_total) => {
                let mut weights = Weights::new(WeightSource::Headers, shape.layers);
                for tensor in headers.iter().flat_map(|header| header.tensors.iter()) {
                    let dimensions = tensor.shape.iter().filter(|&&d| d > 1).count();
                    weights.add(Naming::HuggingFace, &tensor.name, dimensions, tensor.bytes);
                }
                if let Some(total) = index_total.filter(|&total| total != weights.total_bytes) {
                    notes.push(format!(
                        "the index says the weights are {total} bytes; their headers add up to {}: the headers' \
                         figure is used",
                        weights.total_bytes
                    ));
                }
                weights
            }
            (None, Some(total)) => {
                notes.push(format!(
                    "the shards' headers are more than the {} bytes allowed: the index's total ({total} bytes) is \
                     shared out by the config's parameters",
                    files.limits.total_bytes
                ));
                Weights::estimated(&shape).scaled_to(total, WeightSource::IndexTotal)
            }
            (None, None) => {
                return Ok(Sizing::CannotSize {
                    architecture: shape.architecture.clone(),
                    why: format!(
                        "its weights' headers are larger than the {} bytes a plan reads, and the model has no index \
                         total",
                        files.limits.total_bytes
                    ),
                })
            }
        },
    };
    if weights.source == WeightSource::Headers {
        shape.tied_embeddings = !weights.output_head;
    }
    shape.weights = Some(weights);
    Ok(Sizing::Sized(shape))
}

/// A GGUF model's header, each part's tensors added.
async fn read_gguf(files: &mut Files<'_>, parts: &[String], notes: &mut Vec<String>) -> Result<Sizing> {
    let mut headers = Vec::new();
    for part in parts {
        headers.push(files.gguf_header(part).await?);
    }
    let Some((first, more)) = headers.split_first() else {
        return Err(Error::Usage("no GGUF file to read. Fix: give the model's .gguf file".into()));
    };
    notes.extend(gguf::legacy_mla(first));
    gguf::shape(first, more).map_err(|e| e.of_file(&files.model(), parts.first().map_or("", String::as_str)))
}

/// The model's files, in a toolbox or on the Hub, and what reading them took.
struct Files<'a> {
    place: Place<'a>,
    limits: ReadLimits,
    bytes_read: u64,
    requests: u32,
    commit: Option<String>,
    read: Vec<String>,
}

enum Place<'a> {
    /// Inside the engine's toolbox: `root` joined to each name (names are whole paths when it is
    /// empty); `model` is the path as the operator gave it.
    Toolbox {
        toolbox: &'a dyn RunsInToolbox,
        root: String,
        model: String,
    },
    Hub {
        hub: Hub,
        repo: RepoId,
        revision: String,
        listing: BTreeSet<String>,
    },
}

/// What one read gave: up to the bytes asked, and the file's size when the place said it.
struct Part {
    bytes: Vec<u8>,
    total: Option<u64>,
}

impl<'a> Files<'a> {
    /// The files of the model at `model` in `toolbox`, its names in `root` (whole paths when
    /// empty).
    fn in_toolbox(toolbox: &'a dyn RunsInToolbox, root: &str, model: &str, limits: ReadLimits) -> Files<'a> {
        Files::at(Place::Toolbox { toolbox, root: root.to_string(), model: model.to_string() }, limits)
    }

    fn at(place: Place<'a>, limits: ReadLimits) -> Files<'a> {
        Files { place, limits, bytes_read: 0, requests: 0, commit: None, read: Vec::new() }
    }

    /// The repository at `revision`: its model info first (the commit, the file list).
    async fn hub(repo: &RepoId, revision: &str, access: &HubAccess, limits: ReadLimits) -> Result<Files<'a>> {
        let hub = Hub::new(access, limits.connect, limits.request)?;
        let (info, answer) = hub.model_info(repo, revision).await?;
        let revision = info.commit.as_ref().map_or(revision.to_string(), ToString::to_string);
        let place = Place::Hub { hub, repo: repo.clone(), revision, listing: info.files.into_iter().collect() };
        let mut files = Files::at(place, limits);
        files.requests = 1;
        files.bytes_read = answer.body.len() as u64;
        files.commit = info.commit.map(|commit| commit.to_string());
        Ok(files)
    }

    /// The model, as errors name it.
    fn model(&self) -> String {
        match &self.place {
            Place::Toolbox { toolbox, model, .. } => format!("{model} (in toolbox {})", toolbox.name()),
            Place::Hub { repo, .. } => repo.to_string(),
        }
    }

    /// Where the model is read, for a fix to name.
    fn seen_by(&self) -> String {
        match &self.place {
            Place::Toolbox { toolbox, .. } => {
                format!("toolbox {} sees it: `strix-toolbox enter {} -- ls -l PATH`", toolbox.name(), toolbox.name())
            }
            Place::Hub { .. } => "the Hub lists it".to_string(),
        }
    }

    /// Whether the model has a file `name`.
    async fn exists(&mut self, name: &str) -> Result<bool> {
        if let Place::Hub { listing, .. } = &self.place {
            return Ok(listing.contains(name));
        }
        Ok(self.ranges(&[(name.to_string(), 0, 0)]).await?.pop().flatten().is_some())
    }

    /// A whole small file, at most `limit` bytes (larger is refused); None when it is not there.
    async fn whole(&mut self, name: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        if let Place::Hub { listing, .. } = &self.place {
            if !listing.contains(name) {
                return Ok(None);
            }
        }
        let Some(part) = self.ranges(&[(name.to_string(), 0, limit.saturating_add(1))]).await?.pop().flatten() else {
            return Ok(None);
        };
        let size = part.total.unwrap_or(part.bytes.len() as u64);
        if size > limit || part.bytes.len() as u64 > limit {
            return Err(HeaderError::too_large(name, size, limit).of_file(&self.model(), name));
        }
        Ok(Some(part.bytes))
    }

    /// Every shard's safetensors header: the first bytes of each at once (its 8-byte length, and
    /// most often the whole header), then the rest of the longer ones at once. None when the byte
    /// budget would be passed.
    async fn safetensors_headers(&mut self, names: &[String]) -> Result<Option<Vec<safetensors::SafetensorsHeader>>> {
        if let Some(name) = names.iter().find(|name| !is_plain_path(name)) {
            return Err(HeaderError::invalid(name, "not a file in the model").of_file(&self.model(), name));
        }
        // A toolbox reads every shard at once whatever their number: the exact bytes, in two
        // execs. On the Hub each read is a round trip: the header is likely in a larger first one.
        let first_read = match self.place {
            Place::Toolbox { .. } => 8,
            Place::Hub { .. } => SAFETENSORS_FIRST_READ,
        };
        let mut left = self.limits.total_bytes.saturating_sub(self.bytes_read);
        let mut firsts = Vec::new();
        for name in names {
            if left < 8 {
                return Ok(None);
            }
            let first = first_read.min(left);
            left -= first;
            firsts.push((name.clone(), 0, first));
        }
        let mut heads = Vec::new();
        let mut rests = Vec::new();
        for ((name, _, _), part) in firsts.iter().zip(self.ranges(&firsts).await?) {
            let Some(part) = part else { return Err(self.missing(name)) };
            let length = safetensors::header_length(&part.bytes).map_err(|e| e.of_file(&self.model(), name))?;
            let (have, end) = (part.bytes.len() as u64, length.saturating_add(8));
            if end > have {
                rests.push((name.clone(), have, end - have));
            }
            heads.push((name, part, length));
        }
        let needed = rests.iter().fold(0u64, |sum, (_, _, more)| sum.saturating_add(*more));
        if self.bytes_read.saturating_add(needed) > self.limits.total_bytes {
            return Ok(None);
        }
        let mut more: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        if !rests.is_empty() {
            for ((name, _, _), part) in rests.iter().zip(self.ranges(&rests).await?) {
                let Some(part) = part else { return Err(self.missing(name)) };
                more.insert(name.clone(), part.bytes);
            }
        }
        let mut headers = Vec::new();
        for (name, mut part, length) in heads {
            part.bytes.extend(more.remove(name.as_str()).unwrap_or_default());
            let json = part.bytes.get(8..).unwrap_or_default();
            let json = json.get(..json.len().min(length as usize)).unwrap_or_default();
            if json.len() as u64 != length {
                let short =
                    HeaderError::Truncated { what: "header".into(), have: 8 + json.len() as u64, needed: 8 + length };
                return Err(short.of_file(&self.model(), name));
            }
            let header = safetensors::parse_json(json, 8 + length).map_err(|e| e.of_file(&self.model(), name))?;
            if let Some(total) = part.total.filter(|&total| total != header.file_bytes()) {
                let why = format!("its header describes {} bytes, the file has {total}", header.file_bytes());
                return Err(HeaderError::invalid(name, why).of_file(&self.model(), name));
            }
            headers.push(header);
        }
        Ok(Some(headers))
    }

    /// A GGUF's header: its first bytes, then more (from where the last read stopped) while the
    /// header goes on, up to [`gguf::HEADER_LIMIT`].
    async fn gguf_header(&mut self, name: &str) -> Result<gguf::GgufHeader> {
        if matches!(self.place, Place::Hub { .. }) && !is_plain_path(name) {
            return Err(HeaderError::invalid(name, "not a file in the model").of_file(&self.model(), name));
        }
        let mut bytes: Vec<u8> = Vec::new();
        let mut want = GGUF_FIRST_READ;
        // Each round at least doubles what is read, up to the header's bound: a few rounds.
        for _ in 0..16 {
            let asked = want.saturating_sub(bytes.len() as u64);
            let ask = (name.to_string(), bytes.len() as u64, asked);
            let Some(part) = self.ranges(&[ask]).await?.pop().flatten() else { return Err(self.missing(name)) };
            let at_end = (part.bytes.len() as u64) < asked;
            bytes.extend_from_slice(&part.bytes);
            match gguf::parse(&bytes) {
                Ok(header) => {
                    let end = header.data_offset.saturating_add(header.data_bytes);
                    if let Some(size) = part.total.filter(|&size| end > size) {
                        let why = format!("its tensors end at byte {end}, past the file's {size} bytes");
                        return Err(HeaderError::invalid(name, why).of_file(&self.model(), name));
                    }
                    return Ok(header);
                }
                Err(HeaderError::Truncated { needed, .. }) if !at_end => {
                    want = needed.max(want.saturating_mul(2)).min(gguf::HEADER_LIMIT);
                }
                Err(error) => return Err(error.of_file(&self.model(), name)),
            }
        }
        Err(HeaderError::too_large(name, bytes.len() as u64, gguf::HEADER_LIMIT).of_file(&self.model(), name))
    }

    /// A file the model names is not there.
    fn missing(&self, name: &str) -> Error {
        self.not_there(&format!("there is no file {name}"), &format!("give the model's path as {}", self.seen_by()))
    }

    /// What the model lacks, and what fixes it: a toolbox's failure to find it, or a Hub id that
    /// names no such model.
    fn not_there(&self, what: &str, fix: &str) -> Error {
        match &self.place {
            Place::Toolbox { toolbox, .. } => Error::toolbox(toolbox.name(), format!("{}: {what}", self.model()), fix),
            Place::Hub { .. } => Error::Usage(format!("{}: {what}. Fix: {fix}", self.model())),
        }
    }

    /// Each of `asks` (a name, where to start, how many bytes): None for a file that is not there.
    /// A toolbox reads them all in one exec, the Hub one request each. Refused when a file goes on
    /// past the byte budget.
    async fn ranges(&mut self, asks: &[(String, u64, u64)]) -> Result<Vec<Option<Part>>> {
        let mut left = self.limits.total_bytes.saturating_sub(self.bytes_read);
        let mut capped = Vec::with_capacity(asks.len());
        for (name, start, length) in asks {
            let cap = (*length).min(left);
            left -= cap;
            capped.push((name.clone(), *start, cap));
            if *length > 0 && !self.read.iter().any(|read| read == name) {
                self.read.push(name.clone());
            }
        }
        let got: Vec<Option<Part>> = match &self.place {
            Place::Toolbox { toolbox, root, .. } => {
                let path = |name: &str| match root.as_str() {
                    "" => name.to_string(),
                    root => format!("{}/{name}", root.trim_end_matches('/')),
                };
                let in_toolbox: Vec<Ask> = capped
                    .iter()
                    .map(|(name, start, length)| Ask { path: path(name), start: *start, length: *length })
                    .collect();
                self.requests += 1;
                in_toolbox::read(*toolbox, &in_toolbox)
                    .await?
                    .into_iter()
                    .map(|got| got.map(|got| Part { bytes: got.bytes, total: Some(got.size) }))
                    .collect()
            }
            Place::Hub { hub, repo, revision, .. } => {
                let mut got = Vec::with_capacity(capped.len());
                for (name, start, cap) in &capped {
                    if *cap == 0 {
                        got.push(Some(Part { bytes: Vec::new(), total: None }));
                        continue;
                    }
                    let url = hub.file_url(repo, revision, name);
                    let end = start.saturating_add(*cap).saturating_sub(1);
                    self.requests += 1;
                    let answer = hub.get(&url, Some((*start, end)), *cap, name).await?;
                    got.push(Some(Part { bytes: answer.body, total: answer.total }));
                }
                got
            }
        };
        for ((name, start, length), part) in asks.iter().zip(&got) {
            let Some(part) = part else { continue };
            self.bytes_read = self.bytes_read.saturating_add(part.bytes.len() as u64);
            let cap = capped.iter().find(|(n, s, _)| n == name && s == start).map_or(0, |(_, _, cap)| *cap);
            let more = part
                .total
                .map_or(part.bytes.len() as u64 == cap, |total| total > start.saturating_add(part.bytes.len() as u64));
            if cap < *length && more {
                return Err(Error::Usage(format!(
                    "{}: reading {name} would pass the {} bytes a plan reads of a model. Fix: this model's headers \
                     are too large to plan; launch it with --max-model-len",
                    self.model(),
                    self.limits.total_bytes
                )));
            }
        }
        Ok(got)
    }
}

#[cfg(test)]
mod tests;
