//! Where a model comes from, read from MODEL as the operator gave it (and `--file`): a path as
//! the engine's toolbox sees it, a whole Hub repository (vLLM), or GGUF file(s) of a Hub
//! repository (llama.cpp: `owner/repo:QUANT`, the form `llama-server -hf` takes, or `--file
//! NAME`). Each engine says which of these it takes (`EngineRef::source`) from the readings here,
//! and in which [`ModelFormat`] it reads the model; the launch, the plan's read of the model's
//! headers (`model::shape`), the download and the record all name the model by this one value.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::gguf_pick::GgufPick;
use crate::model::repo_id::RepoId;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelSource {
    /// A directory (vLLM) or GGUF file (llama.cpp) as the toolbox of the nodes that load it sees it.
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

    /// MODEL and `--file` where a Hub id names GGUF file(s) of it: the file named, else the
    /// repository's only one.
    pub fn gguf(model: &str, file: Option<&str>) -> Result<ModelSource> {
        match (ModelSource::of(model), file) {
            (ModelSource::Hub(repo), file) => {
                let pick = file.map_or(GgufPick::Only, |name| GgufPick::File(name.to_string()));
                Ok(ModelSource::HubGguf { repo, pick })
            }
            (source, None) => Ok(source),
            (ModelSource::HubGguf { .. }, Some(file)) => Err(Error::Usage(format!(
                "{model} names its GGUF by the quant after ':' and --file {file} names another: give one of them"
            ))),
            (ModelSource::Path(_), Some(file)) => Err(file_without_repo(model, file)),
        }
    }

    /// MODEL (a Hub id is the whole repository); `--file` is for GGUF files only.
    pub fn whole(model: &str, file: Option<&str>) -> Result<ModelSource> {
        match (ModelSource::of(model), file) {
            (source, None) => Ok(source),
            (ModelSource::Hub(_), Some(file)) => Err(Error::Usage(format!(
                "--file {file} names a GGUF in a Hub repository, which llama.cpp serves: give `--engine llama.cpp`"
            ))),
            (_, Some(file)) => Err(file_without_repo(model, file)),
        }
    }

    /// Whether MODEL (and `--file`) can only be GGUF file(s): a `.gguf` path, `REPO:QUANT`, a file.
    pub fn names_gguf(model: &str, file: Option<&str>) -> bool {
        model.ends_with(".gguf") || hub_quant(model).is_some() || file.is_some()
    }
}

/// How an engine reads a model: which files hold its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelFormat {
    /// Hugging Face's layout: config.json, and safetensors weights with their index (vLLM).
    Safetensors,
    /// GGUF file(s): the first part, then the others of a split model (llama.cpp).
    Gguf,
}

fn file_without_repo(model: &str, file: &str) -> Error {
    Error::Usage(format!(
        "--file {file} names a GGUF in a Hub repository, served by llama.cpp: MODEL must be that repository \
         (`org/name`), not {model}"
    ))
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
    fn a_repo_with_a_quant_is_a_hub_gguf() {
        let model = "unsloth/Qwen3-235B-A22B-GGUF:Q4_K_M";
        assert_eq!(ModelSource::of(model), hub_gguf("unsloth/Qwen3-235B-A22B-GGUF", GgufPick::Quant("Q4_K_M".into())));
        assert!(ModelSource::names_gguf(model, None));
        assert_eq!(ModelSource::of("/m/a:b"), ModelSource::Path("/m/a:b".into()), "a path with a colon");
        assert_eq!(ModelSource::of("org/name:"), ModelSource::Path("org/name:".into()));
        assert!(!ModelSource::names_gguf("org/name", None), "a plain Hub id is a whole repository");
        assert!(ModelSource::names_gguf("org/name", Some("x.gguf")));
    }

    #[test]
    fn a_gguf_or_a_path_is_a_path() {
        assert_eq!(ModelSource::of("acme/tiny"), ModelSource::Hub(RepoId::parse("acme/tiny").unwrap()));
        assert_eq!(ModelSource::of("models/tiny.gguf"), ModelSource::Path("models/tiny.gguf".into()));
        assert!(ModelSource::names_gguf("/m/x-00001-of-00002.gguf", None));
    }

    #[test]
    fn one_gguf_of_a_plain_hub_id_or_the_whole_repository() {
        assert_eq!(ModelSource::gguf("o/r", None).unwrap(), hub_gguf("o/r", GgufPick::Only));
        assert_eq!(
            ModelSource::gguf("o/r", Some("a/b-Q8_0.gguf")).unwrap(),
            hub_gguf("o/r", GgufPick::File("a/b-Q8_0.gguf".into()))
        );
        assert!(ModelSource::gguf("o/r:Q8_0", Some("x.gguf")).is_err(), "both a quant and a file");
        assert!(ModelSource::gguf("/m/x.gguf", Some("x.gguf")).is_err(), "--file of a path");
        assert_eq!(ModelSource::whole("o/r", None).unwrap(), ModelSource::Hub(RepoId::parse("o/r").unwrap()));
        assert!(ModelSource::whole("o/r", Some("x.gguf")).unwrap_err().to_string().contains("--engine llama.cpp"));
    }
}
