//! The recipes kept on this machine: one JSON file a model and engine under the state
//! directory's `recipes/`, written atomically (a reader never sees half of one).

use std::path::{Path, PathBuf};

use super::Recipe;
use crate::bench::store::write_atomically;
use crate::error::{Error, Result};
use crate::paths::Paths;
use crate::serving::engine::EngineRef;

/// A recipe file is a few hundred bytes; one larger is not ours.
const MAX_RECIPE_BYTES: u64 = 1 << 20;

/// Where the recipes are kept.
#[derive(Debug, Clone)]
pub struct RecipeBook {
    dir: PathBuf,
}

impl RecipeBook {
    /// The book under this user's XDG state directory.
    pub fn open(paths: &Paths) -> Result<RecipeBook> {
        Ok(RecipeBook::at(&paths.state_dir("the models' recipes")?.join("recipes")))
    }

    pub fn at(dir: &Path) -> RecipeBook {
        RecipeBook { dir: dir.to_path_buf() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `ENGINE--MODEL.json`, the model's path or repository made a file name.
    fn path_of(&self, model: &str, engine: EngineRef) -> PathBuf {
        let safe: String = model
            .trim_matches('/')
            .replace('/', "--")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' })
            .collect();
        self.dir.join(format!("{}--{}.json", engine.name(), safe.trim_start_matches('.')))
    }

    /// Keep `recipe`, replacing the model's last one.
    pub fn keep(&self, recipe: &Recipe) -> Result<PathBuf> {
        let path = self.path_of(&recipe.model, recipe.engine);
        let text =
            serde_json::to_vec_pretty(recipe).map_err(|e| Error::Internal(format!("cannot encode a recipe: {e}")))?;
        write_atomically(&path, &text)?;
        Ok(path)
    }

    /// The recipe for `model` served by `engine`, if one was kept.
    pub fn find(&self, model: &str, engine: EngineRef) -> Result<Option<Recipe>> {
        let path = self.path_of(model, engine);
        match read(&path)? {
            Some(recipe) if recipe.model == model && recipe.engine == engine => Ok(Some(recipe)),
            _ => Ok(None),
        }
    }

    /// Every recipe kept, by model.
    pub fn list(&self) -> Result<Vec<Recipe>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(Error::read(&self.dir, error)),
        };
        let mut recipes = Vec::new();
        for entry in entries {
            let path = entry.map_err(|error| Error::read(&self.dir, error))?.path();
            if path.extension().is_some_and(|extension| extension == "json") {
                recipes.extend(read(&path)?);
            }
        }
        recipes.sort_by(|a, b| a.model.cmp(&b.model).then_with(|| a.engine.name().cmp(b.engine.name())));
        Ok(recipes)
    }
}

/// The recipe at `path` (None: there is none); one that is not a recipe is an error naming it.
fn read(path: &Path) -> Result<Option<Recipe>> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(Error::read(path, error)),
    };
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_RECIPE_BYTES + 1), &mut text)
        .map_err(|error| Error::read(path, error))?;
    let unreadable = |why: String| Error::Host {
        what: path.display().to_string(),
        message: format!("{} is not a recipe: {why}", path.display()),
        fix: Some("remove it and find the model's recipe again (`strix-toolbox cluster plan MODEL --try`)".into()),
    };
    if text.len() as u64 > MAX_RECIPE_BYTES {
        return Err(unreadable(format!("larger than {MAX_RECIPE_BYTES} bytes")));
    }
    serde_json::from_slice(&text).map(Some).map_err(|e| unreadable(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::recipe::tests::recipe;

    #[test]
    fn a_recipe_is_kept_found_by_its_model_and_engine_and_listed() {
        let dir = tempfile::tempdir().unwrap();
        let book = RecipeBook::at(dir.path());
        assert_eq!(book.list().unwrap(), Vec::new());
        let kept = recipe();
        book.keep(&kept).unwrap();
        assert_eq!(book.find(&kept.model, kept.engine).unwrap(), Some(kept.clone()));
        assert_eq!(book.find(&kept.model, crate::serving::vllm::VLLM).unwrap(), None, "another engine's");
        assert_eq!(book.find("/models/other.gguf", kept.engine).unwrap(), None);
        let faster = Recipe { output_throughput: 200.0, ..kept.clone() };
        book.keep(&faster).unwrap();
        assert_eq!(book.list().unwrap(), vec![faster], "the model's last recipe replaces its first");
    }

    #[test]
    fn a_file_that_is_not_a_recipe_is_named_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let book = RecipeBook::at(dir.path());
        let kept = recipe();
        let path = book.keep(&kept).unwrap();
        std::fs::write(&path, "{\"model\": 1}").unwrap();
        let error = book.find(&kept.model, kept.engine).unwrap_err().to_string();
        assert!(error.contains("is not a recipe") && error.contains("--try"), "{error}");
        std::fs::write(&path, vec![b' '; (MAX_RECIPE_BYTES + 2) as usize]).unwrap();
        assert!(book.list().unwrap_err().to_string().contains("larger than"));
    }
}
