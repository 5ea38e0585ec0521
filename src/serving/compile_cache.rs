//! vLLM's compile cache: its compiled graphs are only valid for the image that compiled them, so a
//! launch on another image than the last one clears it first (a stale one crashes). Ray's start
//! clears it across nodes, the detached `vllm serve` on one node.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::serving::record::ServingFiles;
use crate::settings::Settings;
use crate::toolbox::running::RunningToolbox;

/// Before a launch's first vLLM process on a node (Ray's start, or `vllm serve` alone): the cache
/// of the toolbox's home, unless it was filled from the image the toolbox runs now.
pub(super) fn clear_before_launch(
    settings: &Settings,
    toolbox: &RunningToolbox,
    files: &ServingFiles,
    env: &BTreeMap<String, String>,
) -> Result<()> {
    clear_stale_compile_cache(files, &toolbox.image(), env, settings.paths.cache_home())
}

/// vLLM's compiled graphs are only valid for the image that compiled them: when the toolbox runs
/// another image than at the last launch, its compile cache goes first (a stale one crashes).
pub(super) fn clear_stale_compile_cache(
    files: &ServingFiles,
    image: &str,
    env: &BTreeMap<String, String>,
    cache_home: Option<&Path>,
) -> Result<()> {
    let last = std::fs::read_to_string(files.last_image()).unwrap_or_default();
    if last.trim() == image {
        return Ok(());
    }
    if let Some(cache) = compile_cache(env, cache_home) {
        match std::fs::remove_dir_all(&cache) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(Error::host(
                    cache.display().to_string(),
                    format!("cannot clear vLLM's compile cache {} after an image change: {error}", cache.display()),
                    format!("remove it by hand (`rm -rf {}`)", cache.display()),
                ))
            }
        }
    }
    files.write_file(&files.last_image(), image.as_bytes())
}

/// `$VLLM_CACHE_ROOT/torch_compile_cache`, else under `CACHE_HOME/vllm` (the XDG cache home,
/// `~/.cache` by default: the toolbox shares this home at the same path).
fn compile_cache(env: &BTreeMap<String, String>, cache_home: Option<&Path>) -> Option<PathBuf> {
    let root = match env.get("VLLM_CACHE_ROOT") {
        Some(root) => PathBuf::from(root),
        None => cache_home?.join("vllm"),
    };
    Some(root.join("torch_compile_cache"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compile_cache_follows_vllm_cache_root() {
        let env = [("VLLM_CACHE_ROOT".to_string(), "/data/vllm".to_string())].into_iter().collect();
        assert_eq!(compile_cache(&env, None), Some(PathBuf::from("/data/vllm/torch_compile_cache")));
        assert_eq!(
            compile_cache(&Default::default(), Some(Path::new("/c"))),
            Some("/c/vllm/torch_compile_cache".into())
        );
    }

    #[test]
    fn a_new_image_clears_the_compile_cache_once() {
        let dir = tempfile::tempdir().unwrap();
        let files = ServingFiles::in_dir(&dir.path().join("serving"), "vllm");
        let cache = dir.path().join("cache");
        std::fs::create_dir_all(cache.join("torch_compile_cache/graph")).unwrap();
        let env = [("VLLM_CACHE_ROOT".to_string(), cache.display().to_string())].into_iter().collect();
        clear_stale_compile_cache(&files, "sha256:new", &env, None).unwrap();
        assert!(!cache.join("torch_compile_cache").exists());
        std::fs::create_dir_all(cache.join("torch_compile_cache/graph")).unwrap();
        clear_stale_compile_cache(&files, "sha256:new", &env, None).unwrap();
        assert!(cache.join("torch_compile_cache/graph").exists(), "the same image keeps its cache");
    }
}
