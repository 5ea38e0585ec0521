//! The Hub's HTTP API as strix-toolbox reads it, in one place: its address and token
//! ([`HubAccess`]), a bounded `GET` (with `Range` for a file's bytes, as huggingface_hub's
//! `get_safetensors_metadata` reads them: `GET {endpoint}/{repo}/resolve/{revision}/{file}`), and
//! a repository's model info (`GET {endpoint}/api/models/{repo}/revision/{revision}`, what
//! huggingface_hub's `HfApi.model_info` asks): the commit a revision resolves to and its files.
//! The plan reads a model's headers through it, and the download picks a GGUF from its file list.
//!
//! Every answer is read within a byte bound and a time bound; an error says which request failed,
//! why (the Hub's own `X-Error-Code` when it sends one), and what fixes it. The token is sent only
//! in a header marked sensitive, never in a URL or a message.

use std::time::Duration;

use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_RANGE, RANGE};
use reqwest::StatusCode;
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::model::repo_id::RepoId;
use crate::model::revision::Commit;
use crate::model::shape::safetensors::is_plain_path;
use crate::secret::Secret;

/// The Hub's address unless `HF_ENDPOINT` says another (huggingface_hub's default).
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// The largest model info read from the Hub's API (a repository's file list).
const INFO_LIMIT: u64 = 16 << 20;

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

/// A repository at a revision, as the Hub lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// The commit the revision resolved to (None: the Hub, or a mirror, named none).
    pub commit: Option<Commit>,
    /// Its files' paths (only plain relative paths: nothing that could leave the repository).
    pub files: Vec<String>,
}

/// One answer: its body (within the bound asked) and the file's whole size when the Hub said it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub body: Vec<u8>,
    /// From `Content-Range`, or a whole answer's length.
    pub total: Option<u64>,
}

/// The Hub, reached with one HTTP client.
pub struct Hub {
    http: reqwest::Client,
    access: HubAccess,
}

/// The Hub's answer to the model info request, what of it is read.
#[derive(Deserialize)]
struct Info {
    sha: Option<String>,
    #[serde(default)]
    siblings: Vec<Sibling>,
}

#[derive(Deserialize)]
struct Sibling {
    rfilename: String,
}

impl Hub {
    /// The Hub `access` names, each request bounded by `connect` and `request` (its whole answer
    /// included).
    pub fn new(access: &HubAccess, connect: Duration, request: Duration) -> Result<Hub> {
        let http = reqwest::Client::builder()
            .connect_timeout(connect)
            .timeout(request)
            .build()
            .map_err(|e| Error::Internal(format!("cannot build the HTTP client: {e}")))?;
        Ok(Hub { http, access: access.clone() })
    }

    pub fn endpoint(&self) -> &str {
        &self.access.endpoint
    }

    /// `repo` at `revision`: the commit it resolves to and its files.
    pub async fn model_info(&self, repo: &RepoId, revision: &str) -> Result<(ModelInfo, Answer)> {
        let url = format!("{}/api/models/{repo}/revision/{}", self.access.endpoint, quote(revision, false));
        let what = "the repository's model info";
        let answer = self.get(&url, None, INFO_LIMIT, what).await?;
        let info: Info = serde_json::from_slice(&answer.body)
            .map_err(|e| self.failed(&url, what, &format!("not the Hub's answer ({e})")))?;
        let info = ModelInfo {
            commit: info.sha.as_deref().and_then(Commit::parse),
            files: info.siblings.into_iter().map(|s| s.rfilename).filter(|name| is_plain_path(name)).collect(),
        };
        Ok((info, answer))
    }

    /// The address of `file` of `repo` at `revision` (a commit, for reads that must agree).
    pub fn file_url(&self, repo: &RepoId, revision: &str, file: &str) -> String {
        format!("{}/{repo}/resolve/{}/{}", self.access.endpoint, quote(revision, false), quote(file, true))
    }

    /// `GET url` (bytes `start..=end` of it when `range` says), its body up to `limit` bytes.
    /// `what` names it in errors.
    pub async fn get(&self, url: &str, range: Option<(u64, u64)>, limit: u64, what: &str) -> Result<Answer> {
        let mut request = self.http.get(url);
        if let Some((start, end)) = range {
            request = request.header(RANGE, format!("bytes={start}-{end}"));
        }
        if let Some(token) = &self.access.token {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", token.expose())).map_err(|_| {
                Error::Usage("the Hub token has characters a header cannot carry. Fix: check HF_TOKEN".into())
            })?;
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        let mut response = request.send().await.map_err(|e| self.failed(url, what, &chain(&e)))?;
        let status = response.status();
        if !status.is_success() {
            let code = response.headers().get("x-error-code").and_then(|v| v.to_str().ok()).map(str::to_string);
            return Err(self.refused(url, what, status, code.as_deref()));
        }
        let ranged = status == StatusCode::PARTIAL_CONTENT;
        if range.is_some_and(|(start, _)| start > 0) && !ranged {
            return Err(self.failed(url, what, &format!("HTTP {status} to a range request: the server ignored it")));
        }
        let total = response
            .headers()
            .get(CONTENT_RANGE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit('/').next())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .or(if ranged { None } else { response.content_length() });
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.failed(url, what, &chain(&e)))? {
            let room = usize::try_from(limit.saturating_sub(body.len() as u64)).unwrap_or(usize::MAX);
            body.extend_from_slice(chunk.get(..chunk.len().min(room)).unwrap_or_default());
            if body.len() as u64 >= limit {
                break;
            }
        }
        Ok(Answer { body, total })
    }

    /// The Hub answered `status`: what it means and what fixes it (its `X-Error-Code`, when sent:
    /// `RepoNotFound`, `RevisionNotFound`, `EntryNotFound`, `GatedRepo`).
    fn refused(&self, url: &str, what: &str, status: StatusCode, code: Option<&str>) -> Error {
        let fix = match (status, code) {
            (_, Some("GatedRepo")) | (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN, _) => {
                "a private or gated model needs a token with access (HF_TOKEN, or --hf-token-file FILE); check the id \
                 on the Hub"
                    .to_string()
            }
            (_, Some("RevisionNotFound")) => "check --revision: a branch, tag or commit of the repository".to_string(),
            (StatusCode::NOT_FOUND, _) => "check the model id, the revision and the file on the Hub".to_string(),
            _ => format!("the Hub is {}: check HF_ENDPOINT and the network", self.access.endpoint),
        };
        Error::Command {
            program: format!("GET {url}"),
            message: format!("{what}: HTTP {status}{}", code.map(|c| format!(" ({c})")).unwrap_or_default()),
            fix: Some(fix),
        }
    }

    fn failed(&self, url: &str, what: &str, why: &str) -> Error {
        Error::Command {
            program: format!("GET {url}"),
            message: format!("{what}: {why}"),
            fix: Some(format!("the Hub is {}: check the network, proxies and HF_ENDPOINT", self.access.endpoint)),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_and_paths_are_quoted_as_huggingface_hub_does() {
        assert_eq!(HubAccess::new(None, None).endpoint, "https://huggingface.co");
        assert_eq!(HubAccess::new(Some(" "), None).endpoint, "https://huggingface.co");
        assert_eq!(HubAccess::new(Some("http://mirror:8080/"), None).endpoint, "http://mirror:8080");
        assert_eq!(quote("refs/pr/1", false), "refs%2Fpr%2F1");
        assert_eq!(quote("sub dir/model-00001.safetensors", true), "sub%20dir/model-00001.safetensors");
    }

    #[test]
    fn the_hubs_refusals_say_what_fixes_them() {
        let hub =
            Hub::new(&HubAccess::new(Some("http://127.0.0.1:9"), None), Duration::from_secs(1), Duration::from_secs(1))
                .expect("a client");
        let gated = hub.refused("u", "x", StatusCode::FORBIDDEN, Some("GatedRepo"));
        assert!(gated.fix().unwrap().contains("HF_TOKEN") && gated.to_string().contains("GatedRepo"), "{gated}");
        let revision = hub.refused("u", "x", StatusCode::NOT_FOUND, Some("RevisionNotFound"));
        assert!(revision.fix().unwrap().contains("--revision"), "{revision}");
        let other = hub.refused("u", "x", StatusCode::BAD_GATEWAY, None);
        assert!(other.fix().unwrap().contains("http://127.0.0.1:9"), "{other}");
    }
}
