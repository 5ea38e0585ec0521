//! Where a launch's model comes from, read from MODEL as the operator gave it (and `--file`): a
//! path on the nodes, a whole Hub repository (vLLM), or GGUF file(s) of a Hub repository
//! (llama.cpp: `owner/repo:QUANT`, the form `llama-server -hf` takes, or `--file NAME`). What
//! MODEL implies about the engine is decided here too, in one place.

use crate::error::{Error, Result};
use crate::model::gguf_pick::GgufPick;
use crate::model::repo_id::RepoId;
use crate::serving::engine::ServingEngine;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// A directory (vLLM) or GGUF file (llama.cpp) on the nodes that load it.
    Path(String),
    /// A Hub repository, every file of one revision (vLLM).
    Hub(RepoId),
    /// GGUF file(s) of a Hub repository, downloaded on the head only (llama.cpp).
    HubGguf { repo: RepoId, pick: GgufPick },
}

impl ModelSource {
    /// MODEL as given: `owner/repo:QUANT` is a Hub GGUF; a `.gguf` file or anything that is no
    /// Hub id is a path; a Hub id is the whole repository.
    pub fn of(model: &str) -> ModelSource {
        if let Some((repo, quant)) = hub_quant(model) {
            return ModelSource::HubGguf { repo, pick: GgufPick::Quant(quant.to_string()) };
        }
        match RepoId::parse(model) {
            Ok(repo) if !model.ends_with(".gguf") => ModelSource::Hub(repo),
            _ => ModelSource::Path(model.to_string()),
        }
    }

    /// MODEL and `--file` for `engine`: a Hub id served by llama.cpp is one GGUF of it (the
    /// file named, else its only one); `--file` is only for that.
    pub fn for_engine(model: &str, engine: ServingEngine, file: Option<&str>) -> Result<ModelSource> {
        match (ModelSource::of(model), engine, file) {
            (ModelSource::Hub(repo), ServingEngine::LlamaCpp, file) => {
                let pick = file.map_or(GgufPick::Only, |name| GgufPick::File(name.to_string()));
                Ok(ModelSource::HubGguf { repo, pick })
            }
            (source, _, None) => Ok(source),
            (ModelSource::HubGguf { .. }, _, Some(file)) => Err(Error::Usage(format!(
                "{model} names its GGUF by the quant after ':' and --file {file} names another: give one of them"
            ))),
            (_, _, Some(file)) => Err(Error::Usage(format!(
                "--file {file} names a GGUF in a Hub repository, served by llama.cpp: MODEL must be that \
                 repository (`org/name`), not {model}"
            ))),
        }
    }

    /// The serving engine MODEL (and `--file`) implies, if they imply one: a GGUF, by path or
    /// from the Hub, is llama.cpp's.
    pub fn implied_engine(model: &str, file: Option<&str>) -> Option<ServingEngine> {
        let gguf = model.ends_with(".gguf") || hub_quant(model).is_some() || file.is_some();
        gguf.then_some(ServingEngine::LlamaCpp)
    }
}

/// `owner/repo:QUANT`: a Hub id, then a quant (no `/`: `./x:y` and `/m/a:b` stay paths).
fn hub_quant(model: &str) -> Option<(RepoId, &str)> {
    let (repo, quant) = model.rsplit_once(':')?;
    let quant_ok =
        !quant.is_empty() && quant.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    (quant_ok && !repo.starts_with('.') && !repo.starts_with('/'))
        .then(|| Some((RepoId::parse(repo).ok()?, quant)))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub_gguf(repo: &str, pick: GgufPick) -> ModelSource {
        ModelSource::HubGguf { repo: RepoId::parse(repo).unwrap(), pick }
    }

    #[test]
    fn a_repo_with_a_quant_is_a_hub_gguf_and_implies_llama_cpp() {
        let model = "unsloth/Qwen3-235B-A22B-GGUF:Q4_K_M";
        assert_eq!(ModelSource::of(model), hub_gguf("unsloth/Qwen3-235B-A22B-GGUF", GgufPick::Quant("Q4_K_M".into())));
        assert_eq!(ModelSource::implied_engine(model, None), Some(ServingEngine::LlamaCpp));
        assert_eq!(ModelSource::of("/m/a:b"), ModelSource::Path("/m/a:b".into()), "a path with a colon");
        assert_eq!(ModelSource::of("org/name:"), ModelSource::Path("org/name:".into()));
        assert_eq!(ModelSource::implied_engine("org/name", None), None, "a plain Hub id stays vLLM's");
        assert_eq!(ModelSource::implied_engine("org/name", Some("x.gguf")), Some(ServingEngine::LlamaCpp));
    }

    #[test]
    fn a_gguf_or_a_path_is_a_path_and_a_gguf_implies_llama_cpp() {
        assert_eq!(ModelSource::of("acme/tiny"), ModelSource::Hub(RepoId::parse("acme/tiny").unwrap()));
        assert_eq!(ModelSource::of("models/tiny.gguf"), ModelSource::Path("models/tiny.gguf".into()));
        assert_eq!(ModelSource::implied_engine("/m/x-00001-of-00002.gguf", None), Some(ServingEngine::LlamaCpp));
    }

    #[test]
    fn llama_cpp_takes_one_gguf_of_a_plain_hub_id() {
        let llama = ServingEngine::LlamaCpp;
        assert_eq!(ModelSource::for_engine("o/r", llama, None).unwrap(), hub_gguf("o/r", GgufPick::Only));
        assert_eq!(
            ModelSource::for_engine("o/r", llama, Some("a/b-Q8_0.gguf")).unwrap(),
            hub_gguf("o/r", GgufPick::File("a/b-Q8_0.gguf".into()))
        );
        assert!(ModelSource::for_engine("o/r:Q8_0", llama, Some("x.gguf")).is_err(), "both a quant and a file");
        assert!(ModelSource::for_engine("/m/x.gguf", llama, Some("x.gguf")).is_err(), "--file of a path");
        let vllm = ModelSource::for_engine("o/r", ServingEngine::Vllm, None).unwrap();
        assert_eq!(vllm, ModelSource::Hub(RepoId::parse("o/r").unwrap()));
    }
}
