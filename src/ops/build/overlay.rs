//! `build`: the RCCL overlay image. A deterministic build context (the compiled-in
//! Containerfile + librccl.so.1 as a tar), the labels that record which RCCL went in, and the
//! build through the [`ContainerEngine`] seam.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use walkdir::WalkDir;

use crate::container_engine::{BuildJob, ContainerEngine};
use crate::error::{Error, Result};
use crate::image::reference::ImageRef;
use crate::labels;
use crate::rccl::RcclReport;
use crate::reporter::Reporter;

/// The overlay recipe, compiled in so the binary needs no repository checkout.
pub const OVERLAY_CONTAINERFILE: &str = include_str!("../../../containerfiles/rccl-overlay.Containerfile");
/// Name of the Containerfile inside the build context.
pub const CONTAINERFILE_NAME: &str = "Containerfile";
/// Name of the library inside the build context (the Containerfile COPYs it).
pub const LIBRARY_NAME: &str = "librccl.so.1";
/// Build arguments the Containerfile declares.
pub const ARG_BASE_IMAGE: &str = "BASE_IMAGE";
pub const ARG_RCCL_SHA256: &str = "RCCL_SHA256";

/// The build context is staged under TMPDIR: what to do when that fails.
const TMPDIR_FIX: &str = "point TMPDIR at a writable directory with room for the library";

/// Write the context files into `dir`: the Containerfile and the library.
pub fn stage_context(dir: &Path, library: &[u8]) -> Result<()> {
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|e| {
            Error::host(path.display().to_string(), format!("cannot write {}: {e}", path.display()), TMPDIR_FIX)
        })
    };
    write(CONTAINERFILE_NAME, OVERLAY_CONTAINERFILE.as_bytes())?;
    write(LIBRARY_NAME, library)
}

/// Tar `dir`'s regular files and directories, deterministically: entries sorted by path,
/// mtime 0, uid/gid 0, no user names, mode 0644 (0755 for directories). The same inputs give
/// the same bytes, so the engine's COPY cache key depends on the library alone.
pub fn tar_directory(dir: &Path) -> Result<Vec<u8>> {
    let failed = |what: String| {
        Error::host(
            dir.display().to_string(),
            format!("cannot make the build context from {}: {what}", dir.display()),
            TMPDIR_FIX,
        )
    };
    let mut builder = tar::Builder::new(Vec::new());
    for entry in WalkDir::new(dir).min_depth(1).sort_by_file_name() {
        let entry = entry.map_err(|e| failed(e.to_string()))?;
        let relative = entry.path().strip_prefix(dir).map_err(|e| failed(e.to_string()))?;
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        let file_type = entry.file_type();
        if file_type.is_dir() {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
            builder.append_data(&mut header, relative, std::io::empty()).map_err(|e| failed(e.to_string()))?;
        } else if file_type.is_file() {
            let file = std::fs::File::open(entry.path()).map_err(|e| Error::read(entry.path(), e))?;
            let size = file.metadata().map_err(|e| Error::read(entry.path(), e))?.len();
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(0o644);
            header.set_size(size);
            // take(size): a file growing while we read cannot corrupt the archive.
            builder.append_data(&mut header, relative, file.take(size)).map_err(|e| failed(e.to_string()))?;
        } else {
            return Err(failed(format!("{} is neither a file nor a directory", relative.display())));
        }
    }
    builder.into_inner().map_err(|e| failed(e.to_string()))
}

/// The complete build context for `library`, as the tar the engine's build API takes.
pub fn context_tar(library: &[u8]) -> Result<Vec<u8>> {
    let dir = tempfile::Builder::new().prefix("strix-toolbox-build-").tempdir().map_err(|e| {
        let tmp = std::env::temp_dir();
        Error::host(
            tmp.display().to_string(),
            format!("cannot create a temporary build directory in {}: {e}", tmp.display()),
            TMPDIR_FIX,
        )
    })?;
    stage_context(dir.path(), library)?;
    tar_directory(dir.path())
}

/// Where the image and its RCCL came from, recorded as labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Provenance {
    /// RFC 3339 UTC.
    pub created: String,
    /// org.opencontainers.image.source; omitted when unknown.
    pub source: Option<String>,
    /// org.opencontainers.image.revision; omitted when unknown.
    pub revision: Option<String>,
    /// Where the RCCL artifact came from (a workflow run URL, or the file's name).
    pub rccl_source: String,
}

impl Provenance {
    /// From the flags, falling back to GitHub Actions' environment for source and revision,
    /// and to the artifact's file name for the RCCL source. `created` honours
    /// SOURCE_DATE_EPOCH (reproducible builds), else now.
    pub fn new(source: Option<&str>, revision: Option<&str>, rccl_source: Option<&str>, artifact: &Path) -> Self {
        let env = |name: &str| std::env::var(name).ok().filter(|value| !value.trim().is_empty());
        let non_empty = |value: Option<&str>| value.map(str::trim).filter(|v| !v.is_empty()).map(str::to_string);
        let github_source = || Some(format!("{}/{}", env("GITHUB_SERVER_URL")?, env("GITHUB_REPOSITORY")?));
        let artifact_name = artifact.file_name().map(|name| name.to_string_lossy().into_owned());
        Provenance {
            created: created_timestamp(env("SOURCE_DATE_EPOCH").as_deref()),
            source: non_empty(source).or_else(github_source),
            revision: non_empty(revision).or_else(|| env("GITHUB_SHA")),
            rccl_source: non_empty(rccl_source).or(artifact_name).unwrap_or_else(|| artifact.display().to_string()),
        }
    }
}

/// RFC 3339 UTC seconds: SOURCE_DATE_EPOCH when it is a valid number, else now.
pub fn created_timestamp(source_date_epoch: Option<&str>) -> String {
    let at = source_date_epoch
        .and_then(|epoch| epoch.trim().parse::<i64>().ok())
        .and_then(|seconds| chrono::DateTime::from_timestamp(seconds, 0))
        .unwrap_or_else(chrono::Utc::now);
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The labels of an overlay image.
pub fn image_labels(report: &RcclReport, provenance: &Provenance) -> BTreeMap<String, String> {
    let mut image_labels = BTreeMap::from([
        (labels::RCCL_SHA256.to_string(), report.sha256.clone()),
        (labels::RCCL_GFX_TARGETS.to_string(), report.gfx_targets_label()),
        (labels::RCCL_SOURCE.to_string(), provenance.rccl_source.clone()),
        (labels::OCI_CREATED.to_string(), provenance.created.clone()),
    ]);
    if let Some(source) = &provenance.source {
        image_labels.insert(labels::OCI_SOURCE.to_string(), source.clone());
    }
    if let Some(revision) = &provenance.revision {
        image_labels.insert(labels::OCI_REVISION.to_string(), revision.clone());
    }
    image_labels
}

/// Validate the base and the tags (usage errors), returning the tags without duplicates.
/// Cheap, so `build` calls it before reading the artifact.
pub fn check_references(base: &str, tags: &[String]) -> Result<Vec<String>> {
    ImageRef::parse(base)?;
    if tags.is_empty() {
        return Err(Error::Usage("build needs at least one --tag".into()));
    }
    let mut unique_tags: Vec<String> = Vec::new();
    for tag in tags {
        if ImageRef::parse(tag)?.digest.is_some() {
            return Err(Error::Usage(format!("--tag {tag}: a tag cannot carry a digest (@sha256:...)")));
        }
        if !unique_tags.contains(tag) {
            unique_tags.push(tag.clone());
        }
    }
    Ok(unique_tags)
}

/// What to build: validated references, labels and build arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BuildRequest {
    pub base: String,
    /// The first is the main tag; all are applied by the build and pushed with --push.
    pub tags: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub build_args: BTreeMap<String, String>,
    pub push: bool,
}

impl BuildRequest {
    /// Check every reference (usage error on a bad one) and assemble labels and arguments.
    pub fn new(
        report: &RcclReport,
        provenance: &Provenance,
        base: &str,
        tags: &[String],
        push: bool,
    ) -> Result<BuildRequest> {
        let unique_tags = check_references(base, tags)?;
        let build_args = BTreeMap::from([
            (ARG_BASE_IMAGE.to_string(), base.to_string()),
            (ARG_RCCL_SHA256.to_string(), report.sha256.clone()),
        ]);
        Ok(BuildRequest {
            base: base.to_string(),
            tags: unique_tags,
            labels: image_labels(report, provenance),
            build_args,
            push,
        })
    }
}

/// What a build produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildOutcome {
    pub image_id: String,
    pub tags: Vec<String>,
    pub base: String,
    pub rccl_sha256: String,
    pub gfx_targets: Vec<String>,
    pub labels: BTreeMap<String, String>,
    /// Tags pushed (empty without --push).
    pub pushed: Vec<String>,
    pub build_seconds: f64,
    pub push_seconds: Option<f64>,
}

/// Build the overlay for an accepted artifact, then push every tag when asked.
/// Refuses a rejected artifact before touching the engine.
pub async fn build_image(
    engine: &dyn ContainerEngine,
    report: &RcclReport,
    request: &BuildRequest,
    reporter: &dyn Reporter,
) -> Result<BuildOutcome> {
    report.ensure_gfx1151()?;
    let context = context_tar(&report.library_bytes)?;

    if engine.image_inspect(&request.base).await?.is_none() {
        reporter.line(&format!("pulling base image {}", request.base));
        engine.pull(&request.base, reporter).await?;
        reporter.finish();
    }
    reporter.line(&format!(
        "building {} on {} with librccl.so.1 {} ({})",
        request.tags.join(", "),
        request.base,
        report.sha256,
        report.gfx_targets_label()
    ));
    let started = Instant::now();
    let image_id = engine
        .build(
            BuildJob {
                context_tar: context,
                containerfile: CONTAINERFILE_NAME,
                tags: &request.tags,
                labels: &request.labels,
                build_args: &request.build_args,
            },
            reporter,
        )
        .await?;
    let build_seconds = started.elapsed().as_secs_f64();

    let mut pushed = Vec::new();
    let mut push_seconds = None;
    if request.push {
        let started = Instant::now();
        for tag in &request.tags {
            reporter.line(&format!("pushing {tag}"));
            engine.image_push(tag, reporter).await?;
            pushed.push(tag.clone());
        }
        push_seconds = Some(started.elapsed().as_secs_f64());
    }
    reporter.finish();
    Ok(BuildOutcome {
        image_id,
        tags: request.tags.clone(),
        base: request.base.clone(),
        rccl_sha256: report.sha256.clone(),
        gfx_targets: report.gfx_targets.clone(),
        labels: request.labels.clone(),
        pushed,
        build_seconds,
        push_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(tar_bytes: &[u8]) -> Vec<(String, u64, u32, u64, Vec<u8>)> {
        let mut archive = tar::Archive::new(tar_bytes);
        archive
            .entries()
            .expect("entries")
            .map(|entry| {
                let mut entry = entry.expect("entry");
                let header = entry.header().clone();
                let mut data = Vec::new();
                entry.read_to_end(&mut data).expect("read entry");
                (
                    entry.path().expect("path").display().to_string(),
                    header.mtime().expect("mtime"),
                    header.mode().expect("mode"),
                    header.uid().expect("uid") + header.gid().expect("gid"),
                    data,
                )
            })
            .collect()
    }

    #[test]
    fn context_holds_the_containerfile_and_library_deterministically() {
        let first = context_tar(b"library bytes").expect("context");
        let second = context_tar(b"library bytes").expect("context");
        assert_eq!(first, second, "same inputs, same tar");
        let listed = entries(&first);
        assert_eq!(
            listed,
            vec![
                (CONTAINERFILE_NAME.to_string(), 0, 0o644, 0, OVERLAY_CONTAINERFILE.as_bytes().to_vec()),
                (LIBRARY_NAME.to_string(), 0, 0o644, 0, b"library bytes".to_vec()),
            ]
        );
        assert_ne!(context_tar(b"other library").expect("context"), first);
    }

    #[test]
    fn tar_directory_sorts_entries_and_includes_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("b")).expect("mkdir");
        std::fs::write(dir.path().join("b/z"), b"z").expect("write");
        std::fs::write(dir.path().join("a"), b"a").expect("write");
        std::fs::write(dir.path().join("c"), b"c").expect("write");
        let names: Vec<_> = entries(&tar_directory(dir.path()).expect("tar")).into_iter().map(|e| (e.0, e.2)).collect();
        assert_eq!(names, [("a".into(), 0o644), ("b".into(), 0o755), ("b/z".into(), 0o644), ("c".into(), 0o644)]);
    }

    #[test]
    fn the_containerfile_copies_the_library_in_its_last_layers() {
        let instructions: Vec<&str> = OVERLAY_CONTAINERFILE
            .lines()
            .filter(|line| line.chars().next().is_some_and(|c| c.is_ascii_uppercase()))
            .map(|line| line.split_whitespace().next().unwrap_or_default())
            .collect();
        assert_eq!(instructions, ["ARG", "FROM", "COPY", "ARG", "RUN"]);
        assert!(OVERLAY_CONTAINERFILE.contains("COPY librccl.so.1 /opt/rocm/lib/librccl.so.1.0"));
        assert!(OVERLAY_CONTAINERFILE.contains(&format!("ARG {ARG_RCCL_SHA256}")));
        assert!(OVERLAY_CONTAINERFILE.contains(&format!("FROM ${{{ARG_BASE_IMAGE}}}")));
    }

    fn accepted_report() -> RcclReport {
        let bundle = crate::rccl::bundle::make_bundle(&[
            ("host-x86_64-unknown-linux-gnu-", b""),
            ("hipv4-amdgcn-amd-amdhsa--gfx1151", &[1u8; 32]),
            ("hipv4-amdgcn-amd-amdhsa--gfx1100", &[2u8; 32]),
        ]);
        let library = crate::rccl::elf::tests::synthetic_elf(3, 62, ".hip_fatbin", &bundle);
        crate::rccl::inspect_library(Path::new("dl/librccl.zip"), crate::rccl::ArtifactFormat::Zip, None, library)
            .expect("inspect")
    }

    fn provenance(source: Option<&str>, revision: Option<&str>) -> Provenance {
        Provenance {
            created: "2025-01-02T03:04:05Z".into(),
            source: source.map(str::to_string),
            revision: revision.map(str::to_string),
            rccl_source: "https://github.com/o/r/actions/runs/1".into(),
        }
    }

    #[test]
    fn labels_record_the_rccl_and_omit_unknown_provenance() {
        let report = accepted_report();
        let known = image_labels(&report, &provenance(Some("https://github.com/o/r"), Some("abc123")));
        assert_eq!(
            known,
            BTreeMap::from([
                (labels::RCCL_SHA256.to_string(), report.sha256.clone()),
                (labels::RCCL_GFX_TARGETS.to_string(), "gfx1100,gfx1151".to_string()),
                (labels::RCCL_SOURCE.to_string(), "https://github.com/o/r/actions/runs/1".to_string()),
                (labels::OCI_CREATED.to_string(), "2025-01-02T03:04:05Z".to_string()),
                (labels::OCI_SOURCE.to_string(), "https://github.com/o/r".to_string()),
                (labels::OCI_REVISION.to_string(), "abc123".to_string()),
            ])
        );
        let unknown = image_labels(&report, &provenance(None, None));
        assert_eq!(unknown.len(), 4);
        assert!(!unknown.contains_key(labels::OCI_SOURCE) && !unknown.contains_key(labels::OCI_REVISION));
    }

    #[test]
    fn provenance_prefers_flags_and_falls_back_to_the_file_name() {
        let from_flags = Provenance::new(Some("https://x/y"), Some("deadbeef"), Some("run 7"), Path::new("/a/b.zip"));
        assert_eq!(
            (from_flags.source.as_deref(), from_flags.revision.as_deref(), from_flags.rccl_source.as_str()),
            (Some("https://x/y"), Some("deadbeef"), "run 7")
        );
        let bare = Provenance::new(Some(" "), None, None, Path::new("/downloads/librccl.so.1.gz"));
        assert_eq!(bare.rccl_source, "librccl.so.1.gz");
        if std::env::var_os("GITHUB_REPOSITORY").is_none() {
            assert_eq!(bare.source, None);
        }
    }

    #[test]
    fn build_request_validates_references_and_dedups_tags() {
        let report = accepted_report();
        let tags = vec!["localhost/v:local".to_string(), "localhost/v:a".to_string(), "localhost/v:local".to_string()];
        let request =
            BuildRequest::new(&report, &provenance(None, None), "127.0.0.1:5000/base:1", &tags, true).expect("valid");
        assert_eq!(request.tags, ["localhost/v:local", "localhost/v:a"]);
        assert_eq!(
            request.build_args,
            BTreeMap::from([
                (ARG_BASE_IMAGE.to_string(), "127.0.0.1:5000/base:1".to_string()),
                (ARG_RCCL_SHA256.to_string(), report.sha256.clone()),
            ])
        );
        let bad_tag = BuildRequest::new(&report, &provenance(None, None), "base:1", &["Bad Tag".into()], false);
        assert!(matches!(bad_tag, Err(Error::Usage(_))));
        let digest_tag = format!("localhost/v@sha256:{}", "a".repeat(64));
        assert!(matches!(
            BuildRequest::new(&report, &provenance(None, None), "base:1", &[digest_tag], false),
            Err(Error::Usage(_))
        ));
        assert!(matches!(BuildRequest::new(&report, &provenance(None, None), "", &tags, false), Err(Error::Usage(_))));
    }

    #[test]
    fn created_timestamps_are_rfc3339_utc() {
        assert_eq!(created_timestamp(Some("0")), "1970-01-01T00:00:00Z");
        assert_eq!(created_timestamp(Some("1700000000")), "2023-11-14T22:13:20Z");
        let now = created_timestamp(Some("not a number"));
        assert!(now.ends_with('Z') && now.len() == 20, "{now}");
    }
}
