//! What the tests make once and keep (rootfs tarballs, models, Python environments), in the
//! machine's test cache beside the engines scripts/test.sh makes, so a fresh clone makes none of
//! them again: made in a staging directory, renamed into place when whole, one maker at a time (a
//! lock file per file), so parallel tests and later runs share it. A name carries the hash of its
//! recipe.

use std::path::{Path, PathBuf};

/// The machine's test cache (`STRIX_TEST_CACHE`, else `$XDG_CACHE_HOME` or `~/.cache`, then
/// `strix-toolbox-tests`, as scripts/llama-cpp.sh and scripts/vllm-cpu.sh find it), `test-cache/`
/// in it: made if missing.
pub fn dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    let root = var("STRIX_TEST_CACHE").unwrap_or_else(|| {
        var("XDG_CACHE_HOME")
            .or_else(|| var("HOME").map(|home| home.join(".cache")))
            .expect("HOME or XDG_CACHE_HOME: where the machine's test cache is")
            .join("strix-toolbox-tests")
    });
    let dir = root.join("test-cache");
    std::fs::create_dir_all(&dir).unwrap_or_else(|error| panic!("create {}: {error}", dir.display()));
    dir
}

/// `NAME` in the test cache, made first by `make(staging_dir, partial)`, which writes `partial`.
pub fn cached_file(name: &str, make: impl FnOnce(&Path, &Path)) -> PathBuf {
    let path = dir().join(name);
    let dir = path.parent().expect("a directory");
    std::fs::create_dir_all(dir).expect("create the test cache");
    let lock = std::fs::File::create(path.with_extension("lock")).expect("lock file");
    lock.lock().expect("lock a test cache file");
    if path.exists() {
        return path;
    }
    let staging = tempfile::Builder::new().prefix("staging-").tempdir_in(dir).expect("tempdir");
    let partial = staging.path().join("partial");
    make(staging.path(), &partial);
    std::fs::rename(&partial, &path).expect("move the file into the test cache");
    path
}

/// The first 12 hex digits of the SHA-256 of `recipe`: what a cached file's name carries.
pub fn recipe_hash(recipe: &str) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(recipe))[..12].to_string()
}
