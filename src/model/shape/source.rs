//! Where a model's headers come from, and how little of it is read: a local directory
//! (config.json, the safetensors index and each shard's header), local GGUF files (the header's
//! first bytes, more only when it is longer), or a Hub repository by HTTP range reads, as
//! huggingface_hub's `get_safetensors_metadata` reads safetensors: `GET
//! {endpoint}/{repo}/resolve/{revision}/{file}` with `Range` for the first 8 bytes (the header's
//! length), then for the header itself. The file list and the commit come from `GET
//! {endpoint}/api/models/{repo}/revision/{revision}`; every file after it is read at that commit.
//!
//! Every read is bounded in bytes (each file's own bound, and [`ReadLimits::total_bytes`] for
//! the whole) and in time; the report says how many bytes and requests it took.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_RANGE, RANGE};
use reqwest::StatusCode;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::safetensors::{self, is_plain_path};
use super::weights::{Naming, WeightSource, Weights};
use super::{config, gguf, HeaderError, Sizing};
use crate::error::{Error, Result};
use crate::model::gguf_pick::{pick_gguf, GgufPick};
use crate::model::repo_id::RepoId;
use crate::secret::Secret;

/// The Hub's address unless `HF_ENDPOINT` says another (huggingface_hub's default).
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// The first bytes of a safetensors file read at once from the Hub: its 8-byte length and, for a
/// dense model's shards (about 8 KiB of header each), the whole header: one request a shard; a
/// longer header (a MoE model's) is read on from there.
const SAFETENSORS_FIRST_READ: u64 = 16 << 10;
/// The first bytes of a GGUF read at once; most headers (their vocabulary included) fit.
const GGUF_FIRST_READ: u64 = 1 << 20;
/// The largest file list read from the Hub's API.
const LISTING_LIMIT: u64 = 16 << 20;
const CONFIG: &str = "config.json";
const INDEX: &str = "model.safetensors.index.json";
const SINGLE: &str = "model.safetensors";

/// What to read the model from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelSource {
    /// A local directory with config.json and safetensors weights (a Hub snapshot).
    Directory(PathBuf),
    /// A local GGUF: its first part, then the others of a split model.
    GgufFiles(Vec<PathBuf>),
    /// A Hub repository at a revision (a branch, tag or commit); `gguf` names the GGUF files to
    /// read (as `model::gguf_pick` chose them) instead of config.json and safetensors.
    Hub { repo: RepoId, revision: String, gguf: Vec<String> },
    /// The GGUF file(s) of a Hub repository that `pick` names, chosen from its file list as
    /// `model::gguf_pick` chooses them.
    HubGguf { repo: RepoId, revision: String, pick: GgufPick },
}

/// How to reach the Hub.
#[derive(Debug, Clone)]
pub struct HubAccess {
    /// `HF_ENDPOINT`, else [`DEFAULT_ENDPOINT`].
    pub endpoint: String,
    pub token: Option<Secret>,
}

impl HubAccess {
    /// The endpoint `HF_ENDPOINT` names (when set and not empty), else the Hub's.
    pub fn new(hf_endpoint: Option<&str>, token: Option<Secret>) -> HubAccess {
        let endpoint = hf_endpoint.map(str::trim).filter(|e| !e.is_empty()).unwrap_or(DEFAULT_ENDPOINT);
        HubAccess { endpoint: endpoint.trim_end_matches('/').to_string(), token }
    }
}

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
    /// Bytes read (answers' bodies on the Hub, bytes read from local files).
    pub bytes_read: u64,
    /// Requests to the Hub, or files opened.
    pub requests: u32,
    /// The commit a Hub revision resolved to.
    pub commit: Option<String>,
    /// The files read, in order.
    pub files: Vec<String>,
    /// What the reader had to assume, said (weights estimated, an index total that disagrees).
    pub notes: Vec<String>,
}

/// Read the shape of the model `source` names.
pub async fn read_shape(source: &ModelSource, hub: &HubAccess, limits: ReadLimits) -> Result<ShapeRead> {
    let (mut files, gguf) = match source {
        ModelSource::Directory(path) => (Files::local(path.clone(), limits), Vec::new()),
        ModelSource::GgufFiles(paths) => {
            let Some(first) = paths.first() else {
                return Err(Error::Usage("no GGUF file to read. Fix: give the model's .gguf file".into()));
            };
            let root = first.parent().map(Path::to_path_buf).unwrap_or_default();
            let names = paths
                .iter()
                .map(|path| path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
                .collect();
            (Files::local(root, limits), names)
        }
        ModelSource::Hub { repo, revision, gguf } => (Files::hub(repo, revision, hub, limits).await?, gguf.clone()),
        ModelSource::HubGguf { repo, revision, pick } => {
            let files = Files::hub(repo, revision, hub, limits).await?;
            let listed: Vec<String> = match &files.place {
                Place::Hub { listing, .. } => listing.iter().cloned().collect(),
                Place::Local(_) => Vec::new(),
            };
            let names = pick_gguf(&repo.to_string(), &listed, pick)?;
            (files, names)
        }
    };
    let mut notes = Vec::new();
    let sizing = if gguf.is_empty() {
        read_safetensors_model(&mut files, &mut notes).await?
    } else {
        read_gguf(&mut files, &gguf).await?
    };
    Ok(ShapeRead {
        sizing,
        bytes_read: files.bytes_read,
        requests: files.requests,
        commit: files.commit.clone(),
        files: files.read.clone(),
        notes,
    })
}

/// config.json, then the weights from the safetensors headers (or, past the byte budget, the
/// index's total), or an estimate from the config when the model has no safetensors weights.
async fn read_safetensors_model(files: &mut Files, notes: &mut Vec<String>) -> Result<Sizing> {
    let Some(config_bytes) = files.whole(CONFIG, config::CONFIG_LIMIT).await? else {
        return Err(Error::Usage(format!(
            "{}: there is no config.json. Fix: give a model with its config.json (a Hugging Face repository or \
             snapshot), or its .gguf file",
            files.model()
        )));
    };
    let mut shape = match config::parse(&config_bytes).map_err(|e| e.of_file(&files.model(), CONFIG))? {
        Sizing::Sized(shape) => shape,
        cannot @ Sizing::CannotSize { .. } => return Ok(cannot),
    };
    let shards = if files.exists(INDEX).await? {
        let bytes = files.whole(INDEX, safetensors::INDEX_LIMIT).await?.unwrap_or_default();
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
        Some((shards, index_total)) => {
            let mut weights = Weights::new(WeightSource::Headers, shape.layers);
            let mut complete = true;
            for shard in &shards {
                match files.safetensors_header(shard).await? {
                    Some(header) => {
                        for tensor in &header.tensors {
                            let dimensions = tensor.shape.iter().filter(|&&d| d > 1).count();
                            weights.add(Naming::HuggingFace, &tensor.name, dimensions, tensor.bytes);
                        }
                    }
                    None => {
                        complete = false;
                        break;
                    }
                }
            }
            match (complete, index_total) {
                (true, Some(total)) if total != weights.total_bytes => {
                    notes.push(format!(
                        "the index says the weights are {total} bytes; their headers add up to {}: the headers' \
                         figure is used",
                        weights.total_bytes
                    ));
                    weights
                }
                (true, _) => weights,
                (false, Some(total)) => {
                    notes.push(format!(
                        "the shards' headers are more than the {} bytes allowed: the index's total ({total} bytes) is \
                         shared out by the config's parameters",
                        files.limits.total_bytes
                    ));
                    Weights::estimated(&shape).scaled_to(total, WeightSource::IndexTotal)
                }
                (false, None) => {
                    return Err(Error::Usage(format!(
                        "{}: the weights' headers are larger than the {} bytes a plan reads, and the model has no \
                         index total. Fix: this model cannot be planned; launch it with --max-model-len",
                        files.model(),
                        files.limits.total_bytes
                    )))
                }
            }
        }
    };
    if weights.source == WeightSource::Headers {
        shape.tied_embeddings = !weights.output_head;
    }
    shape.weights = Some(weights);
    Ok(Sizing::Sized(shape))
}

/// A GGUF model's header, each part's tensors added.
async fn read_gguf(files: &mut Files, parts: &[String]) -> Result<Sizing> {
    let mut headers = Vec::new();
    for part in parts {
        headers.push(files.gguf_header(part).await?);
    }
    let Some((first, more)) = headers.split_first() else {
        return Err(Error::Usage("no GGUF file to read. Fix: give the model's .gguf file".into()));
    };
    gguf::shape(first, more).map_err(|e| e.of_file(&files.model(), parts.first().map_or("", String::as_str)))
}

/// The model's files, local or on the Hub, and what reading them took.
struct Files {
    place: Place,
    limits: ReadLimits,
    bytes_read: u64,
    requests: u32,
    commit: Option<String>,
    read: Vec<String>,
}

enum Place {
    Local(PathBuf),
    Hub {
        http: reqwest::Client,
        endpoint: String,
        repo: RepoId,
        revision: String,
        token: Option<Secret>,
        listing: BTreeSet<String>,
    },
}

/// The Hub's answer to `GET /api/models/{repo}/revision/{revision}`, what of it is read.
#[derive(Deserialize)]
struct Listing {
    sha: Option<String>,
    #[serde(default)]
    siblings: Vec<Sibling>,
}

#[derive(Deserialize)]
struct Sibling {
    rfilename: String,
}

impl Files {
    fn local(root: PathBuf, limits: ReadLimits) -> Files {
        Files { place: Place::Local(root), limits, bytes_read: 0, requests: 0, commit: None, read: Vec::new() }
    }

    async fn hub(repo: &RepoId, revision: &str, access: &HubAccess, limits: ReadLimits) -> Result<Files> {
        let http = reqwest::Client::builder()
            .connect_timeout(limits.connect)
            .timeout(limits.request)
            .build()
            .map_err(|e| Error::Internal(format!("cannot build the HTTP client: {e}")))?;
        let mut files = Files {
            place: Place::Hub {
                http,
                endpoint: access.endpoint.clone(),
                repo: repo.clone(),
                revision: revision.to_string(),
                token: access.token.clone(),
                listing: BTreeSet::new(),
            },
            limits,
            bytes_read: 0,
            requests: 0,
            commit: None,
            read: Vec::new(),
        };
        let url = format!("{}/api/models/{repo}/revision/{}", access.endpoint, quote(revision, false));
        let (body, _) = files.get(&url, None, LISTING_LIMIT, "the repository's file list").await?;
        let listing: Listing = serde_json::from_slice(&body).map_err(|e| {
            hub_error(&url, "the repository's file list", &format!("not the Hub's answer ({e})"), &access.endpoint)
        })?;
        if let Some(commit) = listing.sha.as_deref().and_then(crate::model::revision::Commit::parse) {
            files.commit = Some(commit.to_string());
            if let Place::Hub { revision, .. } = &mut files.place {
                *revision = commit.to_string();
            }
        }
        if let Place::Hub { listing: names, .. } = &mut files.place {
            *names = listing.siblings.into_iter().map(|s| s.rfilename).filter(|name| is_plain_path(name)).collect();
        }
        Ok(files)
    }

    /// The model, as errors name it.
    fn model(&self) -> String {
        match &self.place {
            Place::Local(root) => root.display().to_string(),
            Place::Hub { repo, .. } => repo.to_string(),
        }
    }

    async fn exists(&self, name: &str) -> Result<bool> {
        Ok(match &self.place {
            Place::Local(root) => tokio::fs::metadata(root.join(name)).await.is_ok_and(|m| m.is_file()),
            Place::Hub { listing, .. } => listing.contains(name),
        })
    }

    /// A whole small file, at most `limit` bytes (larger is refused); None when it is not there.
    async fn whole(&mut self, name: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        if !self.exists(name).await? {
            return Ok(None);
        }
        let (bytes, total) = self.range(name, 0, limit.saturating_add(1)).await?;
        let size = total.unwrap_or(bytes.len() as u64);
        if size > limit || bytes.len() as u64 > limit {
            return Err(HeaderError::too_large(name, size, limit).of_file(&self.model(), name));
        }
        Ok(Some(bytes))
    }

    /// A safetensors file's header: its first 8 bytes, then the header they announce. None when
    /// the byte budget would be passed.
    async fn safetensors_header(&mut self, name: &str) -> Result<Option<safetensors::Header>> {
        if !is_plain_path(name) {
            return Err(HeaderError::invalid(name, "not a file in the model").of_file(&self.model(), name));
        }
        // On the Hub a request costs a round trip: the header is likely in the first read. The
        // first read stays inside the byte budget (what is left of it decides, as below).
        let first_read = match self.place {
            Place::Local(_) => 8,
            Place::Hub { .. } => {
                SAFETENSORS_FIRST_READ.min(self.limits.total_bytes.saturating_sub(self.bytes_read)).max(8)
            }
        };
        let (mut first, total) = self.range(name, 0, first_read).await?;
        let length = safetensors::header_length(&first).map_err(|e| e.of_file(&self.model(), name))?;
        let have = first.len() as u64;
        let end = length.saturating_add(8);
        if end > have {
            if self.bytes_read.saturating_add(end - have) > self.limits.total_bytes {
                return Ok(None);
            }
            let (rest, _) = self.range(name, have, end - have).await?;
            first.extend_from_slice(&rest);
        }
        let json = first.get(8..).unwrap_or_default();
        let json = json.get(..json.len().min(length as usize)).unwrap_or_default();
        if json.len() as u64 != length {
            let short =
                HeaderError::Truncated { what: "header".into(), have: 8 + json.len() as u64, needed: 8 + length };
            return Err(short.of_file(&self.model(), name));
        }
        let header = safetensors::parse_json(json, 8 + length).map_err(|e| e.of_file(&self.model(), name))?;
        if let Some(total) = total.filter(|&total| total != header.file_bytes()) {
            let why = format!("its header describes {} bytes, the file has {total}", header.file_bytes());
            return Err(HeaderError::invalid(name, why).of_file(&self.model(), name));
        }
        Ok(Some(header))
    }

    /// A GGUF's header: its first bytes, then more (from where the last read stopped) while the
    /// header goes on, up to [`gguf::HEADER_LIMIT`].
    async fn gguf_header(&mut self, name: &str) -> Result<gguf::Header> {
        if !is_plain_path(name) {
            return Err(HeaderError::invalid(name, "not a file in the model").of_file(&self.model(), name));
        }
        let mut bytes: Vec<u8> = Vec::new();
        let mut want = GGUF_FIRST_READ;
        // Each round at least doubles what is read, up to the header's bound: a few rounds.
        for _ in 0..16 {
            let asked = want.saturating_sub(bytes.len() as u64);
            let (more, total) = self.range(name, bytes.len() as u64, asked).await?;
            let at_end = (more.len() as u64) < asked;
            bytes.extend_from_slice(&more);
            match gguf::parse(&bytes) {
                Ok(header) => {
                    let end = header.data_offset.saturating_add(header.data_bytes);
                    if let Some(size) = total.filter(|&size| end > size) {
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

    /// Up to `length` bytes of `name` from `start` (fewer at the end of the file), and the file's
    /// size when the source says it. Refused when the file goes on past the byte budget.
    async fn range(&mut self, name: &str, start: u64, length: u64) -> Result<(Vec<u8>, Option<u64>)> {
        let cap = length.min(self.limits.total_bytes.saturating_sub(self.bytes_read));
        if !self.read.iter().any(|read| read == name) {
            self.read.push(name.to_string());
        }
        let (bytes, total) = match &self.place {
            _ if cap == 0 => (Vec::new(), None),
            Place::Local(root) => {
                let path = root.join(name);
                let mut file = tokio::fs::File::open(&path).await.map_err(|e| Error::read(&path, e))?;
                let size = file.metadata().await.map_err(|e| Error::read(&path, e))?.len();
                file.seek(std::io::SeekFrom::Start(start)).await.map_err(|e| Error::read(&path, e))?;
                let mut bytes = Vec::with_capacity(cap.min(size.saturating_sub(start)) as usize);
                file.take(cap).read_to_end(&mut bytes).await.map_err(|e| Error::read(&path, e))?;
                self.requests += 1;
                self.bytes_read = self.bytes_read.saturating_add(bytes.len() as u64);
                (bytes, Some(size))
            }
            Place::Hub { endpoint, repo, revision, .. } => {
                let url = format!("{endpoint}/{repo}/resolve/{}/{}", quote(revision, false), quote(name, true));
                let end = start.saturating_add(cap).saturating_sub(1);
                self.get(&url, Some((start, end)), cap, name).await?
            }
        };
        let more = total.map_or(bytes.len() as u64 == cap, |total| total > start.saturating_add(bytes.len() as u64));
        if cap < length && more {
            return Err(Error::Usage(format!(
                "{}: reading {name} would pass the {} bytes a plan reads of a model. Fix: this model's headers are \
                 too large to plan; launch it with --max-model-len",
                self.model(),
                self.limits.total_bytes
            )));
        }
        Ok((bytes, total))
    }

    /// `GET url` (with `Range` when given), its body up to `limit` bytes, and the file's size
    /// (from `Content-Range`, or a whole answer's length).
    async fn get(
        &mut self,
        url: &str,
        range: Option<(u64, u64)>,
        limit: u64,
        what: &str,
    ) -> Result<(Vec<u8>, Option<u64>)> {
        let Place::Hub { http, endpoint, token, .. } = &self.place else {
            return Err(Error::Internal("an HTTP read of a local model".into()));
        };
        let endpoint = endpoint.clone();
        let mut request = http.get(url);
        if let Some((start, end)) = range {
            request = request.header(RANGE, format!("bytes={start}-{end}"));
        }
        if let Some(token) = token {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", token.expose())).map_err(|_| {
                Error::Usage("the Hub token has characters a header cannot carry. Fix: check HF_TOKEN".into())
            })?;
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        self.requests += 1;
        let mut response = request.send().await.map_err(|e| hub_error(url, what, &chain(&e), &endpoint))?;
        let status = response.status();
        if !status.is_success() {
            let code = response
                .headers()
                .get("x-error-code")
                .and_then(|v| v.to_str().ok())
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            let fix = match status {
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => "a private or gated model needs a token with \
                                                                     access (HF_TOKEN); check the id on the Hub"
                    .to_string(),
                StatusCode::NOT_FOUND => "check the model id, the revision and the file on the Hub".to_string(),
                _ => format!("the Hub is {endpoint}: check HF_ENDPOINT and the network"),
            };
            return Err(Error::Command {
                program: format!("GET {url}"),
                message: format!("{what}: HTTP {status}{code}"),
                fix: Some(fix),
            });
        }
        let ranged = status == StatusCode::PARTIAL_CONTENT;
        if range.is_some_and(|(start, _)| start > 0) && !ranged {
            return Err(hub_error(
                url,
                what,
                &format!("HTTP {status} to a range request: the server ignored it"),
                &endpoint,
            ));
        }
        let total = response
            .headers()
            .get(CONTENT_RANGE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit('/').next())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .or(if ranged { None } else { response.content_length() });
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| hub_error(url, what, &chain(&e), &endpoint))? {
            let room = usize::try_from(limit.saturating_sub(body.len() as u64)).unwrap_or(usize::MAX);
            let kept = chunk.get(..chunk.len().min(room)).unwrap_or_default();
            body.extend_from_slice(kept);
            self.bytes_read = self.bytes_read.saturating_add(kept.len() as u64);
            if body.len() as u64 >= limit {
                break;
            }
        }
        Ok((body, total))
    }
}

/// `text` percent-encoded for a URL path (`/` kept between a file's folders, not in a revision).
fn quote(text: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') || (keep_slash && byte == b'/') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// An error and its causes, on one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

fn hub_error(url: &str, what: &str, why: &str, endpoint: &str) -> Error {
    Error::Command {
        program: format!("GET {url}"),
        message: format!("{what}: {why}"),
        fix: Some(format!("the Hub is {endpoint}: check the network, proxies and HF_ENDPOINT")),
    }
}

#[cfg(test)]
mod tests;
