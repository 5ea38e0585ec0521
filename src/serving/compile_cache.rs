//! vLLM's compile cache, one per image. Compiled graphs are only valid for the image that compiled
//! them (a stale one crashes or hangs), so every image a node runs gets its own `VLLM_CACHE_ROOT`:
//! a relaunch on an image it ran before (after a canary's rollback) starts warm, and the caches
//! of images the node no longer holds (refresh's `--keep` pruned them) go. After a crash an
//! image's cache goes whole, as the Strix Halo guide says ("Erase vLLM Cache: yes if you are
//! restarting after a crash"): when a stop finds a recorded vLLM process dead, or when a launch
//! asks for it (`--fresh-compile-cache`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::settings::Settings;
use crate::toolbox::running::RunningToolbox;

/// The directory under vLLM's cache root that holds one cache root per image.
const BY_IMAGE: &str = "by-image";
/// The variable vLLM reads its cache root from (vllm/envs.py).
const CACHE_ROOT: &str = "VLLM_CACHE_ROOT";

/// What the first vLLM process of a launch on a node does with the image's compile cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompileCache {
    /// Use the image's own cache as it is: warm when the image ran here before.
    Keep,
    /// Erase the image's cache first (after a crash).
    Erase,
}

/// Before each vLLM process of a launch on the node (Ray's start, `vllm serve`): `env` gets the
/// image's own cache root, erased first when asked (nothing has compiled between two of one
/// launch's starts); the roots of images the node's engine no longer holds go.
pub(super) async fn use_image_cache(
    settings: &Settings,
    toolbox: &RunningToolbox,
    env: &mut BTreeMap<String, String>,
    use_: CompileCache,
) -> Result<()> {
    let image_id = toolbox.container.image_id.clone();
    let Some(root) = image_cache_root(env, settings.paths.cache_home(), &image_id)? else { return Ok(()) };
    if use_ == CompileCache::Erase {
        remove(&root)?;
    }
    if let Some(by_image) = root.parent() {
        for (other, dir) in image_roots(by_image) {
            if other != image_key(&image_id)? && !toolbox.holds_image(&format!("sha256:{other}")).await? {
                remove(&dir)?;
            }
        }
    }
    env.insert(CACHE_ROOT.into(), root.display().to_string());
    Ok(())
}

/// After a crash of a launch on `image_id` (a stop found its process dead, or the watch stopped
/// it after a fault): that image's cache goes, so the next launch compiles afresh. `env` is the launch's recorded environment.
pub(super) fn erase_after_crash(
    cache_home: Option<&Path>,
    env: &BTreeMap<String, String>,
    image_id: &str,
) -> Result<()> {
    match image_cache_root(env, cache_home, image_id)? {
        Some(root) => remove(&root),
        None => Ok(()),
    }
}

/// `BASE/by-image/sha256-ID`: BASE is the operator's `VLLM_CACHE_ROOT`, else `CACHE_HOME/vllm`
/// (the XDG cache home, `~/.cache` by default: the toolbox shares this home at the same path).
/// A root this launch set before (its recorded environment) is not nested again.
fn image_cache_root(
    env: &BTreeMap<String, String>,
    cache_home: Option<&Path>,
    image_id: &str,
) -> Result<Option<PathBuf>> {
    let base = match env.get(CACHE_ROOT) {
        Some(root) => PathBuf::from(root),
        None => match cache_home {
            Some(home) => home.join("vllm"),
            None => return Ok(None),
        },
    };
    let base = match base.parent() {
        Some(by_image) if by_image.file_name().is_some_and(|name| name == BY_IMAGE) => {
            by_image.parent().map(Path::to_path_buf).unwrap_or(base)
        }
        _ => base,
    };
    Ok(Some(base.join(BY_IMAGE).join(format!("sha256-{}", image_key(image_id)?))))
}

/// An image id's hex digits (`sha256:HEX` or bare `HEX`, as the engines give it).
fn image_key(image_id: &str) -> Result<String> {
    let hex = image_id.strip_prefix("sha256:").unwrap_or(image_id);
    if hex.len() == 64 && hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Ok(hex.to_ascii_lowercase());
    }
    Err(Error::Internal(format!("the toolbox's image id {image_id:?} is not a sha256 digest")))
}

/// Every image's cache root under `by_image`, by the image id's hex digits.
fn image_roots(by_image: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(by_image) else { return Vec::new() };
    entries
        .flatten()
        .take(super::record::MAX_DIR_ENTRIES)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let hex = name.strip_prefix("sha256-")?;
            Some((image_key(hex).ok()?, entry.path()))
        })
        .collect()
}

fn remove(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(Error::host(
            dir.display().to_string(),
            format!("cannot remove vLLM's compile cache {}: {error}", dir.display()),
            format!("remove it by hand (`rm -rf {}`)", dir.display()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const NEW: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    #[test]
    fn every_image_has_its_own_cache_root_under_vllm_s() {
        let env: BTreeMap<String, String> = [(CACHE_ROOT.to_string(), "/data/vllm".to_string())].into();
        let root = image_cache_root(&env, None, OLD).unwrap().unwrap();
        assert_eq!(
            root,
            Path::new("/data/vllm/by-image/sha256-1111111111111111111111111111111111111111111111111111111111111111")
        );
        let again: BTreeMap<String, String> = [(CACHE_ROOT.to_string(), root.display().to_string())].into();
        assert_eq!(image_cache_root(&again, None, OLD).unwrap().unwrap(), root, "a recorded root is not nested");
        let home = image_cache_root(&BTreeMap::new(), Some(Path::new("/c")), NEW).unwrap().unwrap();
        assert!(home.display().to_string().starts_with("/c/vllm/by-image/sha256-2222"), "{}", home.display());
        assert_eq!(image_cache_root(&BTreeMap::new(), None, NEW).unwrap(), None);
        assert!(image_key("sha256:../../etc").is_err(), "only a digest names a directory");
    }

    #[test]
    fn a_crash_erases_its_image_s_cache_and_leaves_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let env: BTreeMap<String, String> = [(CACHE_ROOT.to_string(), dir.path().display().to_string())].into();
        let old = image_cache_root(&env, None, OLD).unwrap().unwrap();
        let new = image_cache_root(&env, None, NEW).unwrap().unwrap();
        for root in [&old, &new] {
            std::fs::create_dir_all(root.join("torch_compile_cache/graph")).unwrap();
        }
        let roots: Vec<String> = image_roots(&dir.path().join(BY_IMAGE)).into_iter().map(|(hex, _)| hex).collect();
        assert_eq!(roots.len(), 2);
        erase_after_crash(None, &env, NEW).unwrap();
        assert!(!new.exists() && old.join("torch_compile_cache/graph").exists());
        erase_after_crash(None, &env, NEW).unwrap();
    }
}
