//! What the tests make once and keep under target/test-cache (rootfs tarballs, models): made in a
//! staging directory, renamed into place when whole, one maker at a time (a lock file per file),
//! so parallel tests and later runs share it. A name carries the hash of its recipe.

use std::path::{Path, PathBuf};

/// `target/test-cache/NAME`, made first by `make(staging_dir, partial)`, which writes `partial`.
pub fn cached_file(name: &str, make: impl FnOnce(&Path, &Path)) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-cache").join(name);
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
