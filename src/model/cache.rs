//! The Hugging Face cache on a node, as huggingface_hub lays it out (research §1):
//! `ROOT/models--org--name/{blobs/<hash>, snapshots/<commit>/<path> -> ../../blobs/<hash>,
//! refs/<revision>}`. Read the way huggingface_hub reads it, written the way it writes it (relative
//! links, refs of exactly 40 bytes), so that vLLM's `HF_HUB_OFFLINE=1` lookup finds what another
//! node received. `.locks/`, `.no_exist/`, `*.incomplete` and 2.x's shared `blobs/` are not ours.

use std::path::{Component, Path, PathBuf};

use super::blob::BlobName;
use super::repo_id::RepoId;
use super::revision::{Commit, Revision};
use crate::error::{Error, Result};
use crate::paths::Paths;

/// The deepest a snapshot's tree or a ref name goes (the Hub's repos are shallow).
const MAX_DEPTH: usize = 32;
/// The most entries one snapshot may list: far above any model's file count.
const MAX_ENTRIES: usize = 100_000;

/// The cache's root folder (`…/huggingface/hub`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubCache {
    root: PathBuf,
}

/// One entry of a snapshot: its path inside the snapshot and the blob it links to (None: not a
/// link into `blobs/`, e.g. a copy made where symlinks were not possible).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotEntry {
    pub path: String,
    pub blob: Option<BlobName>,
}

impl HubCache {
    pub fn at(root: impl Into<PathBuf>) -> HubCache {
        HubCache { root: root.into() }
    }

    /// Where huggingface_hub puts it (`constants.py`): `HF_HUB_CACHE`, else
    /// `HUGGINGFACE_HUB_CACHE`, else `$HF_HOME/hub`, else `CACHE_HOME/huggingface/hub` (the XDG
    /// cache home, `~/.cache` by default). None without even a HOME.
    pub fn resolve(env: impl Fn(&str) -> Option<String>, cache_home: Option<&Path>) -> Option<HubCache> {
        let set = |name: &str| env(name).filter(|value| !value.is_empty()).map(PathBuf::from);
        let root = set("HF_HUB_CACHE")
            .or_else(|| set("HUGGINGFACE_HUB_CACHE"))
            .or_else(|| set("HF_HOME").map(|home| home.join("hub")))
            .or_else(|| Some(cache_home?.join("huggingface/hub")))?;
        Some(HubCache::at(root))
    }

    /// This node's cache (the node's agent: the home the toolbox mounts at the same path).
    pub fn of(paths: &Paths) -> Result<HubCache> {
        HubCache::resolve(|name| std::env::var(name).ok(), paths.cache_home()).ok_or_else(|| {
            Error::host(
                "HOME",
                "neither HF_HUB_CACHE, HF_HOME nor HOME is set, so there is no Hugging Face cache",
                "set HOME (or HF_HOME) for the node's sessions",
            )
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn repo(&self, id: &RepoId) -> RepoDir {
        RepoDir { id: id.clone(), path: self.root.join(id.folder_name()) }
    }

    /// Every model repository the cache has a folder for, by id.
    pub fn repos(&self) -> Result<Vec<RepoId>> {
        let mut repos: Vec<RepoId> = read_dir_names(&self.root)?
            .into_iter()
            .filter_map(|name| RepoId::from_folder_name(&name))
            .filter(|id| self.root.join(id.folder_name()).is_dir())
            .collect();
        repos.sort();
        Ok(repos)
    }
}

/// One repository's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoDir {
    pub id: RepoId,
    pub path: PathBuf,
}

impl RepoDir {
    pub fn blobs_dir(&self) -> PathBuf {
        self.path.join("blobs")
    }

    pub fn blob(&self, name: &BlobName) -> PathBuf {
        self.blobs_dir().join(name.as_str())
    }

    /// Where a blob is written until its hash is proven (huggingface_hub 0.x's own name for it).
    pub fn incomplete(&self, name: &BlobName) -> PathBuf {
        self.blobs_dir().join(format!("{name}.incomplete"))
    }

    pub fn snapshot_dir(&self, commit: &Commit) -> PathBuf {
        self.path.join("snapshots").join(commit.as_str())
    }

    /// Every ref (`main`, `refs/pr/1`) with its commit. A ref whose content is not exactly a
    /// commit is left out, as huggingface_hub's offline lookup would not find it either.
    pub fn refs(&self) -> Result<Vec<(String, Commit)>> {
        let base = self.path.join("refs");
        let mut refs = Vec::new();
        for path in walk_files(&base)? {
            let Ok(name) = relative_name(&base, &path) else { continue };
            if let Some(commit) = read_commit(&path)? {
                refs.push((name, commit));
            }
        }
        refs.sort();
        Ok(refs)
    }

    /// The commit `refs/REVISION` names; the revision itself when it is a commit.
    pub fn resolve(&self, revision: &Revision) -> Result<Option<Commit>> {
        if let Some(commit) = revision.commit() {
            return Ok(Some(commit));
        }
        read_commit(&self.path.join("refs").join(revision.as_str()))
    }

    /// The commits that have a snapshot folder.
    pub fn snapshots(&self) -> Result<Vec<Commit>> {
        let mut commits: Vec<Commit> = read_dir_names(&self.path.join("snapshots"))?
            .into_iter()
            .filter_map(|name| Commit::parse(&name))
            .filter(|commit| self.snapshot_dir(commit).is_dir())
            .collect();
        commits.sort();
        Ok(commits)
    }

    /// A snapshot's entries, sorted by path; each link's blob read from its target's last part.
    pub fn snapshot_entries(&self, commit: &Commit) -> Result<Vec<SnapshotEntry>> {
        let base = self.snapshot_dir(commit);
        let mut entries = Vec::new();
        for path in walk_files(&base)? {
            let Ok(name) = relative_name(&base, &path) else { continue };
            let blob = match std::fs::read_link(&path) {
                Ok(target) => blob_of_link(&target),
                Err(_) => None,
            };
            entries.push(SnapshotEntry { path: name, blob });
        }
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(entries)
    }

    /// The size of blob `name`, None when it is not there (a link into 2.x's shared store is
    /// followed).
    pub fn blob_size(&self, name: &BlobName) -> Option<u64> {
        std::fs::metadata(self.blob(name)).ok().filter(|m| m.is_file()).map(|m| m.len())
    }

    /// Everything in `blobs/`, partial downloads included: what a transfer has written so far.
    pub fn bytes_on_disk(&self) -> u64 {
        let Ok(entries) = std::fs::read_dir(self.blobs_dir()) else { return 0 };
        entries.filter_map(|entry| std::fs::metadata(entry.ok()?.path()).ok()).map(|m| m.len()).sum()
    }

    /// Link `path` in snapshot `commit` to blob `blob`, as huggingface_hub does: a relative link
    /// (`../../blobs/X`, one more `../` per folder). An entry already right is left alone;
    /// anything else there is replaced atomically.
    pub fn write_link(&self, commit: &Commit, path: &str, blob: &BlobName) -> Result<()> {
        let pointer = self.snapshot_dir(commit).join(checked_relative(path)?);
        let depth = path.matches('/').count();
        let target = format!("../../{}blobs/{blob}", "../".repeat(depth));
        if std::fs::read_link(&pointer).is_ok_and(|existing| existing == Path::new(&target)) {
            return Ok(());
        }
        let folder = pointer.parent().ok_or_else(|| Error::Internal(format!("{path}: no folder")))?;
        std::fs::create_dir_all(folder).map_err(|e| cache_error(folder, "create", &e))?;
        let file_name = pointer.file_name().and_then(|n| n.to_str()).unwrap_or("entry");
        let temporary = folder.join(format!(".{file_name}.strix-link"));
        let _ = std::fs::remove_file(&temporary);
        std::os::unix::fs::symlink(&target, &temporary).map_err(|e| cache_error(&temporary, "link", &e))?;
        std::fs::rename(&temporary, &pointer).map_err(|e| cache_error(&pointer, "link", &e))
    }

    /// `refs/REVISION` holding `commit`: exactly its 40 bytes, no newline (huggingface_hub reads
    /// it without stripping). Nothing for a revision that is itself a commit.
    pub fn write_ref(&self, revision: &Revision, commit: &Commit) -> Result<()> {
        if revision.commit().is_some() {
            return Ok(());
        }
        let path = self.path.join("refs").join(checked_relative(revision.as_str())?);
        if read_commit(&path)?.as_ref() == Some(commit) {
            return Ok(());
        }
        let folder = path.parent().ok_or_else(|| Error::Internal("a ref without a folder".into()))?;
        std::fs::create_dir_all(folder).map_err(|e| cache_error(folder, "create", &e))?;
        let mut temporary = tempfile::NamedTempFile::new_in(folder).map_err(|e| cache_error(folder, "write in", &e))?;
        std::io::Write::write_all(&mut temporary, commit.as_str().as_bytes())
            .map_err(|e| cache_error(&path, "write", &e))?;
        temporary.persist(&path).map_err(|e| cache_error(&path, "write", &e.error))?;
        Ok(())
    }

    /// Remove blob `name` (a corrupt one): the next download or fetch brings it again.
    pub fn remove_blob(&self, name: &BlobName) -> Result<()> {
        let path = self.blob(name);
        match std::fs::remove_file(&path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(cache_error(&path, "remove", &error)),
            _ => Ok(()),
        }
    }

    /// Remove snapshot entry `path` (so huggingface_hub downloads its file again).
    pub fn remove_entry(&self, commit: &Commit, path: &str) -> Result<()> {
        let pointer = self.snapshot_dir(commit).join(checked_relative(path)?);
        match std::fs::remove_file(&pointer) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(cache_error(&pointer, "remove", &error)),
            _ => Ok(()),
        }
    }
}

/// A cache path that could not be read or written, with where to look.
pub fn cache_error(path: &Path, action: &str, error: &std::io::Error) -> Error {
    Error::host(
        path.display().to_string(),
        format!("cannot {action} {}: {error}", path.display()),
        "check that the Hugging Face cache is writable by this user and its disk has room (`df -h`)",
    )
}

/// `path` as a relative path of normal parts (`a/b.txt`), never one that leaves its folder.
pub fn checked_relative(path: &str) -> Result<&Path> {
    let relative = Path::new(path);
    let normal = !path.is_empty()
        && !path.contains('\0')
        && path.split('/').count() <= MAX_DEPTH
        && relative.components().all(|part| matches!(part, Component::Normal(_)))
        && !path.ends_with('/')
        && !path.contains("//");
    if normal {
        Ok(relative)
    } else {
        Err(Error::Usage(format!("{path:?} is not a file path inside a snapshot")))
    }
}

/// The blob a snapshot link points at: a target ending in `blobs/<hash>`.
fn blob_of_link(target: &Path) -> Option<BlobName> {
    let name = target.file_name()?.to_str()?;
    let folder = target.parent()?.file_name()?;
    (folder == "blobs").then(|| BlobName::parse(name)).flatten()
}

/// A ref file's commit: exactly 40 hex bytes, or None (missing, or anything else).
fn read_commit(path: &Path) -> Result<Option<Commit>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(std::str::from_utf8(&bytes).ok().and_then(Commit::parse)),
        Err(error) if matches!(error.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => {
            Ok(None)
        }
        Err(error) if error.kind() == std::io::ErrorKind::IsADirectory => Ok(None),
        Err(error) => Err(Error::read(path, error)),
    }
}

/// The names in a folder; none when it does not exist.
fn read_dir_names(dir: &Path) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(Error::read(dir, error)),
    };
    Ok(entries.filter_map(|entry| entry.ok()?.file_name().into_string().ok()).collect())
}

/// Every non-folder under `base` (links not followed), bounded in depth and count.
fn walk_files(base: &Path) -> Result<Vec<PathBuf>> {
    if !base.is_dir() {
        return Ok(Vec::new());
    }
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(base).follow_links(false).max_depth(MAX_DEPTH).min_depth(1) {
        let entry = entry.map_err(|e| {
            let path = e.path().unwrap_or(base).to_path_buf();
            Error::read(&path, e.into_io_error().unwrap_or_else(|| std::io::Error::other("a link loop")))
        })?;
        if entry.file_type().is_dir() || entry.file_name().to_string_lossy().ends_with(".strix-link") {
            continue;
        }
        files.push(entry.into_path());
        if files.len() > MAX_ENTRIES {
            return Err(Error::host(
                base.display().to_string(),
                format!("{} holds more than {MAX_ENTRIES} files", base.display()),
                "this is not a model snapshot huggingface_hub made; remove it",
            ));
        }
    }
    Ok(files)
}

/// `base/a/b` → `a/b`, when every part is UTF-8.
fn relative_name(base: &Path, path: &Path) -> std::result::Result<String, ()> {
    let relative = path.strip_prefix(base).map_err(drop)?;
    let parts: Option<Vec<&str>> = relative.components().map(|c| c.as_os_str().to_str()).collect();
    parts.map(|parts| parts.join("/")).ok_or(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMIT: &str = "c12a728b0b9a3d8c0a9e6a1d5b1f4e2c3d4e5f60";
    const GIT_HELLO: &str = "ce013625030ba8dba906f756967f9e9ca394464a";

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn the_root_is_where_huggingface_hub_looks() {
        let root = |pairs: &[(&str, &str)]| {
            let paths = Paths::from_env(|name| env(pairs)(name).map(Into::into), 1000);
            HubCache::resolve(env(pairs), paths.cache_home()).map(|c| c.root().to_path_buf())
        };
        assert_eq!(root(&[("HOME", "/h")]), Some("/h/.cache/huggingface/hub".into()));
        assert_eq!(root(&[("HOME", "/h"), ("XDG_CACHE_HOME", "/x")]), Some("/x/huggingface/hub".into()));
        assert_eq!(root(&[("HOME", "/h"), ("HF_HOME", "/hf")]), Some("/hf/hub".into()));
        assert_eq!(root(&[("HF_HOME", "/hf"), ("HUGGINGFACE_HUB_CACHE", "/old")]), Some("/old".into()));
        assert_eq!(root(&[("HUGGINGFACE_HUB_CACHE", "/old"), ("HF_HUB_CACHE", "/new")]), Some("/new".into()));
        assert_eq!(root(&[("HF_HOME", "")]), None);
    }

    #[test]
    fn links_and_refs_are_written_as_huggingface_hub_writes_them() {
        let dir = tempfile::tempdir().unwrap();
        let cache = HubCache::at(dir.path());
        let repo = cache.repo(&RepoId::parse("acme/tiny").unwrap());
        let commit = Commit::parse(COMMIT).unwrap();
        let blob = BlobName::parse(GIT_HELLO).unwrap();
        std::fs::create_dir_all(repo.blobs_dir()).unwrap();
        std::fs::write(repo.blob(&blob), "hello\n").unwrap();
        repo.write_link(&commit, "config.json", &blob).unwrap();
        repo.write_link(&commit, "sub/deeper/notes.txt", &blob).unwrap();
        let snapshot = repo.snapshot_dir(&commit);
        assert_eq!(
            std::fs::read_link(snapshot.join("config.json")).unwrap(),
            Path::new(&format!("../../blobs/{blob}"))
        );
        assert_eq!(
            std::fs::read_link(snapshot.join("sub/deeper/notes.txt")).unwrap(),
            Path::new(&format!("../../../../blobs/{blob}"))
        );
        assert_eq!(std::fs::read_to_string(snapshot.join("sub/deeper/notes.txt")).unwrap(), "hello\n");
        // Again: left alone; a wrong entry is replaced.
        repo.write_link(&commit, "config.json", &blob).unwrap();
        std::fs::remove_file(snapshot.join("config.json")).unwrap();
        std::fs::write(snapshot.join("config.json"), "a copy").unwrap();
        repo.write_link(&commit, "config.json", &blob).unwrap();
        assert!(std::fs::read_link(snapshot.join("config.json")).is_ok());

        repo.write_ref(&Revision::main(), &commit).unwrap();
        repo.write_ref(&Revision::parse("refs/pr/1").unwrap(), &commit).unwrap();
        assert_eq!(std::fs::read(repo.path.join("refs/main")).unwrap(), COMMIT.as_bytes(), "40 bytes, no newline");
        repo.write_ref(&Revision::parse(COMMIT).unwrap(), &commit).unwrap();
        assert!(!repo.path.join("refs").join(COMMIT).exists(), "a commit gets no ref");

        assert_eq!(cache.repos().unwrap(), vec![repo.id.clone()]);
        assert_eq!(repo.snapshots().unwrap(), vec![commit.clone()]);
        assert_eq!(repo.refs().unwrap(), vec![("main".into(), commit.clone()), ("refs/pr/1".into(), commit.clone())]);
        assert_eq!(repo.resolve(&Revision::main()).unwrap(), Some(commit.clone()));
        assert_eq!(repo.resolve(&Revision::parse("v2").unwrap()).unwrap(), None);
        let entries = repo.snapshot_entries(&commit).unwrap();
        let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["config.json", "sub/deeper/notes.txt"]);
        assert!(entries.iter().all(|e| e.blob.as_ref() == Some(&blob)));
        assert_eq!(repo.blob_size(&blob), Some(6));
    }

    #[test]
    fn a_ref_with_a_newline_is_no_ref_and_paths_stay_inside() {
        let dir = tempfile::tempdir().unwrap();
        let repo = HubCache::at(dir.path()).repo(&RepoId::parse("acme/tiny").unwrap());
        std::fs::create_dir_all(repo.path.join("refs")).unwrap();
        std::fs::write(repo.path.join("refs/main"), format!("{COMMIT}\n")).unwrap();
        assert!(repo.refs().unwrap().is_empty());
        for bad in ["", "../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a/"] {
            assert!(checked_relative(bad).is_err(), "{bad:?}");
        }
        let commit = Commit::parse(COMMIT).unwrap();
        let blob = BlobName::parse(GIT_HELLO).unwrap();
        assert!(repo.write_link(&commit, "../../../escape", &blob).is_err());
    }
}
