//! The gate's references, beside the bench results:
//! `bench/references/<model slug>/prompts-v<N>.json`, one per model identity and prompt-set
//! version. The first accepted run for a model is its reference and is never replaced by a later
//! one (a new image is what gets checked, not what moves the yardstick); a model with another
//! identity (other weights, another commit) has its own.

use std::path::{Path, PathBuf};

use super::answer::{GateRun, GATE_FORMAT};
use super::prompts::PromptSet;
use crate::bench::key::ModelIdentity;
use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceStore {
    dir: PathBuf,
}

impl ReferenceStore {
    /// Under the bench store's directory.
    pub fn in_bench_dir(bench_dir: &Path) -> ReferenceStore {
        ReferenceStore { dir: bench_dir.join("references") }
    }

    fn path_of(&self, model: &ModelIdentity, version: u32) -> PathBuf {
        self.dir.join(model.slug()).join(format!("prompts-v{version}.json"))
    }

    /// The reference for `model` on `set`, if one was accepted.
    pub fn get(&self, model: &ModelIdentity, set: &PromptSet) -> Result<Option<GateRun>> {
        let path = self.path_of(model, set.version);
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(Error::read(path, error)),
        };
        let run: GateRun = serde_json::from_slice(&text)
            .map_err(|e| crate::bench::error::store_file(&path, &format!("not a gate reference ({e})")))?;
        if run.format > GATE_FORMAT {
            return Err(crate::bench::error::store_file(
                &path,
                &format!("written in format {} by a newer strix-toolbox", run.format),
            ));
        }
        // Two identities whose names and hash prefixes collide share a file name, never a reference.
        if &run.model != model || run.fingerprint != set.fingerprint() {
            return Err(crate::bench::error::store_file(
                &path,
                &format!("it holds the reference of {} (prompt set v{}), not of {model}", run.model, run.prompt_set),
            ));
        }
        Ok(Some(run))
    }

    /// Keep `run` as its model's reference unless one exists: true when it became the reference.
    pub fn record_first(&self, run: &GateRun) -> Result<bool> {
        let path = self.path_of(&run.model, run.prompt_set);
        if path.exists() {
            return Ok(false);
        }
        let text =
            serde_json::to_vec_pretty(run).map_err(|e| Error::Internal(format!("cannot encode a gate run: {e}")))?;
        crate::bench::store::write_atomically(&path, &text)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::gate::prompts::PROMPT_SET;

    fn run(model: ModelIdentity, image: &str) -> GateRun {
        GateRun {
            format: GATE_FORMAT,
            prompt_set: PROMPT_SET.version,
            fingerprint: PROMPT_SET.fingerprint(),
            model,
            engine: crate::serving::llama::LLAMA_CPP,
            image: image.into(),
            layout: "one node alone".into(),
            endpoint: "http://127.0.0.1:8080/v1".into(),
            taken_at: "2026-11-24T10:00:00Z".into(),
            answers: vec![],
        }
    }

    #[test]
    fn the_first_run_stays_the_reference_and_models_keep_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let references = ReferenceStore::in_bench_dir(dir.path());
        let tiny = ModelIdentity::Gguf { name: "tiny.gguf".into(), sha256: "aa".repeat(32) };
        let other_weights = ModelIdentity::Gguf { name: "tiny.gguf".into(), sha256: "bb".repeat(32) };
        assert_eq!(references.get(&tiny, &PROMPT_SET).unwrap(), None);
        assert!(references.record_first(&run(tiny.clone(), "sha256:first")).unwrap());
        assert!(!references.record_first(&run(tiny.clone(), "sha256:second")).unwrap());
        assert_eq!(references.get(&tiny, &PROMPT_SET).unwrap().unwrap().image, "sha256:first");
        assert_eq!(references.get(&other_weights, &PROMPT_SET).unwrap(), None);
        assert!(references.record_first(&run(other_weights.clone(), "sha256:third")).unwrap());
        assert_eq!(references.get(&other_weights, &PROMPT_SET).unwrap().unwrap().image, "sha256:third");
        assert_eq!(references.get(&tiny, &PROMPT_SET).unwrap().unwrap().image, "sha256:first");
    }
}
