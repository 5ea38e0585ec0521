//! The head's download: huggingface_hub's own `snapshot_download` inside the head's toolbox (the
//! client vLLM uses, so the cache is exactly what vLLM expects), into this node's cache, then
//! every blob hashed here, since huggingface_hub never checks what it downloads (research §1).
//! A blob that does not match is removed with its links and downloaded once more. A GGUF pick is
//! made first from the repository's model info, read by the one Hub reader (`model::hub`).
//!
//! The token reaches Python through the exec's environment only; the script is a constant and
//! every value it needs is in its environment. huggingface_hub bounds each read itself
//! (`HF_HUB_DOWNLOAD_TIMEOUT`), so a stalled Hub fails the download rather than hang it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::snapshot::{bad_blobs, files_here, manifest_here, paths_of};
use crate::error::{Error, Result};
use crate::model::cache::{HubCache, RepoDir};
use crate::model::gguf_pick::{pick_gguf, GgufPick};
use crate::model::hub::{Hub, HubAccess};
use crate::model::manifest::{SnapshotManifest, SnapshotRecords};
use crate::model::repo_id::RepoId;
use crate::model::revision::{Commit, Revision};
use crate::secret::Secret;
use crate::settings::Settings;
use crate::toolbox::running::ExecReport;
use crate::toolbox::running::RunningToolbox;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelDownload {
    pub toolbox: String,
    pub repo: RepoId,
    /// None: the Hub's default branch, `main`.
    pub revision: Option<Revision>,
    /// The operator's `HF_*` settings (`HF_ENDPOINT`...): `model::hub_env`.
    pub hub_env: BTreeMap<String, String>,
    pub hf_token: Option<Secret>,
    /// Only the GGUF file(s) this names (llama.cpp), not the whole repository: the Hub's file
    /// list is read first, the pick made here, and the revision pinned to the listed commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gguf: Option<GgufPick>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelDownloaded {
    /// The cache it is in, on this node.
    pub cache: String,
    pub manifest: SnapshotManifest,
    /// What was asked for (`main` when nothing was).
    pub revision: Revision,
    /// huggingface_hub's version in the toolbox.
    pub hub_version: String,
    /// Blob bytes this download added to the cache: what came over the uplink.
    pub downloaded_bytes: u64,
    /// Files whose blob was wrong here and was downloaded again.
    pub repaired: Vec<String>,
    /// The GGUF file(s) `gguf` picked, the model's first part first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gguf_files: Vec<String>,
}

/// Runs `snapshot_download` with what its environment says; prints one JSON line: the snapshot's
/// path and huggingface_hub's version, or the error's class and message.
const DOWNLOAD: &str = r#"import json, os, sys
try:
    import huggingface_hub
    from huggingface_hub import snapshot_download
except ImportError as error:
    print(json.dumps({"error": "ImportError", "message": str(error)}))
    sys.exit(3)
try:
    import glob
    only = json.loads(os.environ.get("STRIX_MODEL_FILES") or "null")
    allow = [glob.escape(name) for name in only] if only is not None else None
    path = snapshot_download(os.environ["STRIX_MODEL_REPO"], revision=os.environ.get("STRIX_MODEL_REVISION") or None,
                             allow_patterns=allow)
except Exception as error:
    print(json.dumps({"error": type(error).__name__, "message": str(error)}))
    sys.exit(2)
print(json.dumps({"snapshot": path, "version": huggingface_hub.__version__}))
"#;

/// The call the script makes, as an error names it.
const DOWNLOADING: &str = "huggingface_hub.snapshot_download";
/// The bounds of the model info's request.
const INFO_CONNECT: Duration = Duration::from_secs(10);
const INFO_REQUEST: Duration = Duration::from_secs(60);

/// What the script printed last.
#[derive(Debug, Deserialize)]
struct ScriptAnswer {
    snapshot: Option<String>,
    version: Option<String>,
    error: Option<String>,
    message: Option<String>,
}

pub async fn model_download(settings: &Settings, request: &ModelDownload) -> Result<ModelDownloaded> {
    let cache = HubCache::of(&settings.paths)?;
    let repo = cache.repo(&request.repo);
    let revision = request.revision.clone().unwrap_or_else(Revision::main);
    let before = repo.bytes_on_disk();
    let toolbox = RunningToolbox::open(settings, &request.toolbox).await?;
    // A GGUF pick: only its files, at the commit the listing saw (so a push between the two
    // cannot mix revisions).
    let (request, gguf_files) = match &request.gguf {
        Some(pick) => {
            let (commit, files) = list_repo(request).await?;
            let chosen = pick_gguf(request.repo.as_str(), &files, pick)?;
            let pinned = ModelDownload { revision: Some(Revision::parse(commit.as_str())?), ..request.clone() };
            (pinned, chosen)
        }
        None => (request.clone(), Vec::new()),
    };
    let request = &request;
    let only = (!gguf_files.is_empty()).then_some(gguf_files.as_slice());
    let (commit, hub_version) = run_download(&toolbox, &cache, &repo, request, only).await?;

    let (files, missing) = files_here(&repo, &commit)?;
    let bad = bad_blobs(&repo, files.iter().map(|f| (f.blob.clone(), f.size)).collect()).await?;
    let mut repaired = paths_of(&files, &bad);
    repaired.extend(missing);
    if !repaired.is_empty() {
        // huggingface_hub skips a file whose link exists: remove both, and it fetches them again.
        for name in &bad {
            repo.remove_blob(name)?;
        }
        for path in &repaired {
            repo.remove_entry(&commit, path)?;
        }
        run_download(&toolbox, &cache, &repo, request, only).await?;
    }
    let manifest = manifest_here(&repo, &commit)?;
    if !repaired.is_empty() {
        let still = bad_blobs(&repo, manifest.blobs()).await?;
        if !still.is_empty() {
            return Err(Error::Verification {
                message: format!(
                    "{} from the Hub twice, and still not what its name says: {}",
                    request.repo,
                    paths_of(&manifest.files, &still).join(", ")
                ),
                fix: Some(
                    "a proxy or cache between the head and the Hub changes files: check HF_ENDPOINT and proxies".into(),
                ),
            });
        }
    }
    if repo.resolve(&revision)?.as_ref() != Some(&commit) {
        repo.write_ref(&revision, &commit)?;
    }
    SnapshotRecords::of(&settings.paths)?.write(&manifest)?;
    Ok(ModelDownloaded {
        cache: cache.root().display().to_string(),
        manifest,
        revision,
        hub_version,
        downloaded_bytes: repo.bytes_on_disk().saturating_sub(before),
        repaired,
        gguf_files,
    })
}

/// One `snapshot_download` in the toolbox: the commit it resolved and huggingface_hub's version.
async fn run_download(
    toolbox: &RunningToolbox,
    cache: &HubCache,
    repo: &RepoDir,
    request: &ModelDownload,
    only: Option<&[String]>,
) -> Result<(Commit, String)> {
    let argv: Vec<String> = ["python3", "-c", DOWNLOAD].map(String::from).to_vec();
    let report = toolbox.run(&argv, &download_env(cache, request, only)).await?;
    let answer = last_answer(&report);
    let secret = request.hf_token.as_ref();
    let (snapshot, version) = match answer {
        Some(ScriptAnswer { snapshot: Some(snapshot), version, .. }) if report.success() => {
            (snapshot, version.unwrap_or_default())
        }
        Some(ScriptAnswer { error: Some(class), message, .. }) => {
            return Err(hub_error(
                DOWNLOADING,
                &request.repo,
                &class,
                &redact(&message.unwrap_or_default(), secret),
                request,
            ));
        }
        _ => {
            return Err(Error::Command {
                program: "python3 (huggingface_hub.snapshot_download)".into(),
                message: format!(
                    "in toolbox {} (exit {}): {}",
                    toolbox.name,
                    report.exit_code,
                    redact(&report.last_lines(3).join(" | "), secret)
                ),
                fix: Some("check that the toolbox has python3 with huggingface_hub (`strix-toolbox enter -- python3 -c 'import huggingface_hub'`); kyuz0's llama.cpp images have no Python: download the GGUF yourself and give its path".into()),
            })
        }
    };
    let commit = std::path::Path::new(&snapshot)
        .file_name()
        .and_then(|name| name.to_str())
        .and_then(Commit::parse)
        .filter(|commit| repo.snapshot_dir(commit).is_dir())
        .ok_or_else(|| Error::Host {
            what: cache.root().display().to_string(),
            message: format!(
                "huggingface_hub in toolbox {} put the snapshot at {snapshot}, not in this node's cache {}",
                toolbox.name,
                cache.root().display()
            ),
            fix: Some(
                "the toolbox must mount the home directory at the same path (`strix-toolbox refresh` makes it so)"
                    .into(),
            ),
        })?;
    Ok((commit, version))
}

/// The repository's file list at the revision asked for, and the commit it resolved to.
async fn list_repo(request: &ModelDownload) -> Result<(Commit, Vec<String>)> {
    let access = HubAccess::new(request.hub_env.get("HF_ENDPOINT").map(String::as_str), request.hf_token.clone());
    let hub = Hub::new(&access, INFO_CONNECT, INFO_REQUEST)?;
    let revision = request.revision.as_ref().map_or_else(|| "main".to_string(), ToString::to_string);
    let (info, _) = hub.model_info(&request.repo, &revision).await?;
    let commit = info.commit.ok_or_else(|| Error::Command {
        program: format!("GET {}/api/models/{}/revision/{revision}", hub.endpoint(), request.repo),
        message: format!("{}: the Hub named no commit", request.repo),
        fix: Some("check HF_ENDPOINT: it must be the Hub or a faithful mirror".into()),
    })?;
    Ok((commit, info.files))
}

/// The script's environment: the operator's Hub settings, then what this download needs (`only`
/// these files, by their exact paths, when given).
fn download_env(cache: &HubCache, request: &ModelDownload, only: Option<&[String]>) -> BTreeMap<String, String> {
    let mut env = request.hub_env.clone();
    let fixed = [
        ("HF_HUB_CACHE", cache.root().display().to_string()),
        // The download is the one step that must reach the Hub, whatever the toolbox says.
        ("HF_HUB_OFFLINE", "0".into()),
        ("HF_HUB_DISABLE_TELEMETRY", "1".into()),
        ("HF_HUB_DISABLE_PROGRESS_BARS", "1".into()),
        // huggingface_hub 2.x: regular blob files, as every other node gets them.
        ("HF_HUB_DISABLE_SHARED_BLOBS", "1".into()),
        ("STRIX_MODEL_REPO", request.repo.to_string()),
        ("STRIX_MODEL_REVISION", request.revision.as_ref().map(ToString::to_string).unwrap_or_default()),
    ];
    env.extend(fixed.into_iter().map(|(k, v)| (k.to_string(), v)));
    if let Some(token) = &request.hf_token {
        env.insert("HF_TOKEN".into(), token.expose().to_string());
    }
    if let Some(files) = only {
        env.insert("STRIX_MODEL_FILES".into(), serde_json::to_string(files).unwrap_or_default());
    }
    env
}

fn last_answer(report: &ExecReport) -> Option<ScriptAnswer> {
    report.stdout.lines().rev().find_map(|line| serde_json::from_str(line.trim()).ok())
}

/// `text` with the token's value blanked, wherever a message might have picked it up.
fn redact(text: &str, secret: Option<&Secret>) -> String {
    match secret.map(Secret::expose).filter(|value| !value.is_empty()) {
        Some(value) => text.replace(value, "<redacted>"),
        None => text.to_string(),
    }
}

/// huggingface_hub's error, by its class, with what fixes it.
fn hub_error(program: &str, repo: &RepoId, class: &str, message: &str, request: &ModelDownload) -> Error {
    let endpoint = request.hub_env.get("HF_ENDPOINT").map_or("https://huggingface.co", String::as_str);
    let fix = match class {
        "RepositoryNotFoundError" | "GatedRepoError" => format!(
            "check the id on the Hub; a private or gated model needs a token with access (HF_TOKEN{}, or \
             --hf-token-file FILE)",
            if request.hf_token.is_some() { " was given: does it have access?" } else { "" }
        ),
        "RevisionNotFoundError" => "check --revision: a branch, tag or commit of the repository".into(),
        "ImportError" | "ModuleNotFoundError" => {
            "the toolbox's python3 lacks huggingface_hub (the vLLM image has it; kyuz0's llama.cpp images have no \
             Python): install it in the toolbox, or download the model yourself and give its path"
                .into()
        }
        "LocalEntryNotFoundError" | "ConnectionError" | "ConnectTimeout" | "ReadTimeout" | "OfflineModeIsEnabled" => {
            format!("the head must reach {endpoint}: check its network, proxies and HF_ENDPOINT")
        }
        _ => format!("see the message; the Hub is {endpoint}"),
    };
    Error::Command {
        program: program.into(),
        message: format!("{repo}: {class}: {}", message.lines().next().unwrap_or_default()),
        fix: Some(fix),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(token: Option<&str>) -> ModelDownload {
        ModelDownload {
            toolbox: "vllm".into(),
            repo: RepoId::parse("acme/tiny").unwrap(),
            revision: Some(Revision::parse("v1").unwrap()),
            hub_env: [("HF_ENDPOINT".to_string(), "http://127.0.0.1:9".to_string())].into_iter().collect(),
            hf_token: token.map(|t| Secret::new(t.into())),
            gguf: None,
        }
    }

    #[test]
    fn the_script_gets_everything_from_its_environment() {
        assert!(!DOWNLOAD.contains("acme") && DOWNLOAD.contains("os.environ[\"STRIX_MODEL_REPO\"]"));
        let env = download_env(&HubCache::at("/home/me/.cache/huggingface/hub"), &request(Some("hf_s3cret")), None);
        assert!(!env.contains_key("STRIX_MODEL_FILES"), "the whole repository");
        assert_eq!(env["HF_HUB_CACHE"], "/home/me/.cache/huggingface/hub");
        assert_eq!(env["STRIX_MODEL_REPO"], "acme/tiny");
        assert_eq!(env["STRIX_MODEL_REVISION"], "v1");
        assert_eq!(env["HF_ENDPOINT"], "http://127.0.0.1:9");
        assert_eq!(env["HF_HUB_OFFLINE"], "0");
        assert_eq!(env["HF_TOKEN"], "hf_s3cret");
        assert!(!format!("{:?}", request(Some("hf_s3cret"))).contains("hf_s3cret"), "the call's Debug hides it");
    }

    #[test]
    fn a_gguf_pick_downloads_only_its_files_by_their_exact_names() {
        assert!(DOWNLOAD.contains("allow_patterns=allow") && DOWNLOAD.contains("glob.escape"));
        let only = ["Q2_K/t-Q2_K-00001-of-00002.gguf".to_string(), "Q2_K/t-Q2_K-00002-of-00002.gguf".to_string()];
        let env = download_env(&HubCache::at("/c"), &request(None), Some(&only));
        let files: Vec<String> = serde_json::from_str(&env["STRIX_MODEL_FILES"]).unwrap();
        assert_eq!(files, only);
    }

    #[test]
    fn the_hubs_errors_say_what_fixes_them_without_the_token() {
        let request = request(Some("hf_s3cret"));
        let said = redact("401 for http://x?token=hf_s3cret\nmore", request.hf_token.as_ref());
        let error = hub_error(DOWNLOADING, &request.repo, "RepositoryNotFoundError", &said, &request);
        let text = error.to_string();
        assert!(!text.contains("hf_s3cret") && text.contains("<redacted>"), "{text}");
        assert!(error.fix().unwrap().contains("does it have access"), "{text}");
        let offline = hub_error(DOWNLOADING, &request.repo, "LocalEntryNotFoundError", "x", &request);
        assert!(offline.fix().unwrap().contains("http://127.0.0.1:9"));
    }

    #[test]
    fn the_last_json_line_is_the_answer() {
        let report = ExecReport {
            exit_code: 0,
            stdout: "noise\n{\"snapshot\": \"/c/models--a--b/snapshots/x\", \"version\": \"0.36.2\"}\n".into(),
            stderr: String::new(),
        };
        let answer = last_answer(&report).unwrap();
        assert_eq!(answer.version.as_deref(), Some("0.36.2"));
        assert!(answer.error.is_none());
    }
}
