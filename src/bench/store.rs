//! Where results are kept: one JSON file per result under
//! `$XDG_STATE_HOME/strix-toolbox/bench/results/<id>.json` (else `~/.local/state/…`), written
//! atomically (a temporary file renamed into place), and the gate's references beside them
//! (`bench/references/`, see [`super::gate::references`]). Listing reads every file, newest
//! first; a file that cannot be read is reported beside the list, never a reason to fail it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::key::{BenchKey, EngineRef};
use super::result::{Acceptance, BenchResult, RESULT_FORMAT};
use crate::error::{Error, Result};
use crate::paths::Paths;

/// The shortest id prefix `find` accepts.
const MIN_ID_PREFIX: usize = 4;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchStore {
    dir: PathBuf,
}

/// Which results to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryFilter {
    /// Part of the image reference or digest.
    pub image: Option<String>,
    pub engine: Option<EngineRef>,
    /// Part of the model's identity as shown (`repo@commit`, `file.gguf (sha256:…)`).
    pub model: Option<String>,
    /// Only results with this level.
    pub concurrency: Option<u32>,
    pub accepted_only: bool,
    /// At most this many, newest first.
    pub limit: Option<usize>,
}

impl HistoryFilter {
    fn admits(&self, result: &BenchResult) -> bool {
        self.image.as_ref().is_none_or(|image| result.key.image.contains(image.as_str()))
            && self.engine.is_none_or(|engine| result.key.engine == engine)
            && self.model.as_ref().is_none_or(|model| result.key.model.to_string().contains(model.as_str()))
            && self.concurrency.is_none_or(|concurrency| result.level(concurrency).is_some())
            && (!self.accepted_only || result.accepted())
    }
}

/// What `bench history` shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// Newest first.
    pub results: Vec<BenchResult>,
    /// Files that are not results this version can read, and why.
    pub unreadable: Vec<Unreadable>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unreadable {
    pub path: PathBuf,
    pub why: String,
}

impl BenchStore {
    /// The store under this user's XDG state directory.
    pub fn open(paths: &Paths) -> Result<BenchStore> {
        Ok(BenchStore::at(&paths.state_dir("bench results")?.join("bench")))
    }

    pub fn at(dir: &Path) -> BenchStore {
        BenchStore { dir: dir.to_path_buf() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn results_dir(&self) -> PathBuf {
        self.dir.join("results")
    }

    fn path_of(&self, id: &str) -> PathBuf {
        self.results_dir().join(format!("{id}.json"))
    }

    /// Keep `result` (replacing a result with its id).
    pub fn save(&self, result: &BenchResult) -> Result<PathBuf> {
        let path = self.path_of(&result.id);
        let text = serde_json::to_vec_pretty(result)
            .map_err(|e| Error::Internal(format!("cannot encode a bench result: {e}")))?;
        write_atomically(&path, &text)?;
        Ok(path)
    }

    /// Every result the filter admits, newest first.
    pub fn list(&self, filter: &HistoryFilter) -> Result<History> {
        let (mut results, unreadable) = self.read_all()?;
        results.retain(|result| filter.admits(result));
        if let Some(limit) = filter.limit {
            results.truncate(limit);
        }
        Ok(History { results, unreadable })
    }

    /// The result whose id starts with `prefix` (at least 4 characters, and only one may match).
    pub fn find(&self, prefix: &str) -> Result<BenchResult> {
        let prefix = prefix.trim().to_ascii_lowercase();
        if prefix.len() < MIN_ID_PREFIX || !prefix.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(Error::Usage(format!(
                "{prefix:?} is not a result id. Fix: give {MIN_ID_PREFIX} or more hex digits of an id `strix-toolbox bench history` shows"
            )));
        }
        let (results, _) = self.read_all()?;
        let mut matching = results.into_iter().filter(|result| result.id.starts_with(&prefix));
        match (matching.next(), matching.next()) {
            (Some(result), None) => Ok(result),
            (None, _) => Err(Error::Usage(format!(
                "no bench result has an id starting with {prefix} in {}. Fix: see `strix-toolbox bench history`",
                self.results_dir().display()
            ))),
            (Some(first), Some(second)) => Err(Error::Usage(format!(
                "{prefix} names more than one result ({}, {}, …). Fix: give more digits of the id",
                first.id, second.id
            ))),
        }
    }

    /// The newest accepted result with exactly this key (image included): what a new image is
    /// held against is `last_accepted(&key.on_image(previous))`.
    pub fn last_accepted(&self, key: &BenchKey) -> Result<Option<BenchResult>> {
        let (results, _) = self.read_all()?;
        Ok(results.into_iter().find(|result| result.accepted() && &result.key == key))
    }

    /// Accept or reject a kept result (the canary decides after its gate and bench).
    pub fn set_verdict(&self, id: &str, verdict: Acceptance) -> Result<BenchResult> {
        let mut result = self.find(id)?;
        result.verdict = verdict;
        self.save(&result)?;
        Ok(result)
    }

    /// Every readable result, newest first, and the files that are not.
    fn read_all(&self) -> Result<(Vec<BenchResult>, Vec<Unreadable>)> {
        let dir = self.results_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
            Err(error) => return Err(Error::read(dir, error)),
        };
        let mut results = Vec::new();
        let mut unreadable = Vec::new();
        for entry in entries {
            let path = entry.map_err(|error| Error::read(&dir, error))?.path();
            if path.extension().is_none_or(|extension| extension != "json") {
                continue;
            }
            match read_result(&path) {
                Ok(result) => results.push(result),
                Err(why) => unreadable.push(Unreadable { path, why }),
            }
        }
        results.sort_by(|a, b| b.taken_at.cmp(&a.taken_at).then_with(|| a.id.cmp(&b.id)));
        unreadable.sort_by(|a, b| a.path.cmp(&b.path));
        Ok((results, unreadable))
    }
}

fn read_result(path: &Path) -> std::result::Result<BenchResult, String> {
    let text = std::fs::read(path).map_err(|error| error.to_string())?;
    #[derive(Deserialize)]
    struct Format {
        format: u32,
    }
    let format: Format = serde_json::from_slice(&text).map_err(|e| format!("not a bench result ({e})"))?;
    if format.format > RESULT_FORMAT {
        return Err(format!(
            "written in format {} by a newer strix-toolbox (this one reads {RESULT_FORMAT})",
            format.format
        ));
    }
    serde_json::from_slice(&text).map_err(|e| format!("not a bench result ({e})"))
}

/// Write `bytes` to `path` through a temporary file beside it, so a reader never sees half.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().ok_or_else(|| Error::Internal(format!("{} has no parent directory", path.display())))?;
    std::fs::create_dir_all(dir).map_err(|error| Error::read(dir, error))?;
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(|error| Error::read(dir, error))?;
    file.write_all(bytes).map_err(|error| Error::read(file.path().to_path_buf(), error))?;
    file.persist(path).map_err(|error| Error::read(path, error.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::result::tests::result;

    #[test]
    fn results_are_kept_listed_newest_first_and_found_by_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let store = BenchStore::at(dir.path());
        assert!(store.list(&HistoryFilter::default()).unwrap().results.is_empty());
        let old = result("sha256:aaaa", "2026-11-20T10:00:00Z", &[(1, 10.0), (4, 30.0)]);
        let new = result("sha256:bbbb", "2026-11-24T10:00:00Z", &[(1, 12.0)]);
        store.save(&old).unwrap();
        store.save(&new).unwrap();
        let history = store.list(&HistoryFilter::default()).unwrap();
        assert_eq!(history.results, vec![new.clone(), old.clone()]);

        let only_old = store.list(&HistoryFilter { image: Some("aaaa".into()), ..HistoryFilter::default() }).unwrap();
        assert_eq!(only_old.results, vec![old.clone()]);
        let at_four = store.list(&HistoryFilter { concurrency: Some(4), ..HistoryFilter::default() }).unwrap();
        assert_eq!(at_four.results, vec![old.clone()]);
        let limited = store.list(&HistoryFilter { limit: Some(1), ..HistoryFilter::default() }).unwrap();
        assert_eq!(limited.results, vec![new.clone()]);
        let vllm = store
            .list(&HistoryFilter { engine: Some(crate::serving::vllm::VLLM), ..HistoryFilter::default() })
            .unwrap();
        assert!(vllm.results.is_empty());

        assert_eq!(store.find(&new.id[..5]).unwrap(), new);
        assert_eq!(store.find(&new.id.to_uppercase()).unwrap(), new);
        assert!(store.find("ab").unwrap_err().to_string().contains("4 or more"));
        assert!(store.find("zzzz").is_err());
        assert!(store.find("0000000").unwrap_err().to_string().contains("no bench result"));
    }

    #[test]
    fn the_last_accepted_result_on_an_image_skips_rejected_ones() {
        let dir = tempfile::tempdir().unwrap();
        let store = BenchStore::at(dir.path());
        let first = result("sha256:aaaa", "2026-11-20T10:00:00Z", &[(1, 10.0)]);
        let second = result("sha256:aaaa", "2026-11-21T10:00:00Z", &[(1, 11.0)]);
        let other_image = result("sha256:bbbb", "2026-11-22T10:00:00Z", &[(1, 12.0)]);
        for kept in [&first, &second, &other_image] {
            store.save(kept).unwrap();
        }
        assert_eq!(store.last_accepted(&first.key).unwrap(), Some(second.clone()));
        let rejected = store.set_verdict(&second.id, Acceptance::Rejected { reason: "slow".into() }).unwrap();
        assert!(!rejected.accepted());
        assert_eq!(store.last_accepted(&first.key).unwrap(), Some(first.clone()));
        assert_eq!(store.last_accepted(&first.key.on_image("sha256:bbbb")).unwrap(), Some(other_image));
        assert_eq!(store.last_accepted(&first.key.on_image("sha256:cccc")).unwrap(), None);
        let accepted_only = store.list(&HistoryFilter { accepted_only: true, ..HistoryFilter::default() }).unwrap();
        assert_eq!(accepted_only.results.len(), 2);
    }

    #[test]
    fn unreadable_files_are_named_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let store = BenchStore::at(dir.path());
        let kept = result("sha256:aaaa", "2026-11-20T10:00:00Z", &[(1, 10.0)]);
        store.save(&kept).unwrap();
        std::fs::write(dir.path().join("results/broken.json"), "{").unwrap();
        std::fs::write(dir.path().join("results/future.json"), r#"{"format": 99}"#).unwrap();
        std::fs::write(dir.path().join("results/notes.txt"), "ignored").unwrap();
        let history = store.list(&HistoryFilter::default()).unwrap();
        assert_eq!(history.results, vec![kept]);
        assert_eq!(history.unreadable.len(), 2);
        assert!(history.unreadable.iter().any(|file| file.why.contains("newer strix-toolbox")));
    }
}
