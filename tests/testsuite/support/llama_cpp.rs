//! The llama.cpp that `scripts/llama-cpp.sh` builds (CPU, RPC backend, from a pinned
//! llama-cpp-python sdist) and that `scripts/test.sh` makes before `cargo test`: no test builds
//! it. Found through `target/llama-cpp/current`, which the script points at its build; a missing
//! build fails the test naming the script.

use std::path::PathBuf;

/// The script that builds it, as the failure messages name it.
pub const BUILD_SCRIPT: &str = "scripts/llama-cpp.sh";

/// One build: `bin/` (static `llama-server` and `ggml-rpc-server`), `models/` (the llama SPM
/// vocabulary), `venv/` (Python with the tree's `gguf` package).
pub struct LlamaCpp {
    dir: PathBuf,
}

/// The build `target/llama-cpp/current` points at.
pub fn llama_cpp() -> LlamaCpp {
    let current = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/llama-cpp/current");
    let dir = std::fs::canonicalize(&current).unwrap_or_else(|error| {
        panic!(
            "llama.cpp is not built ({}: {error}): run `bash {BUILD_SCRIPT}` (scripts/test.sh runs it)",
            current.display()
        )
    });
    let build = LlamaCpp { dir };
    for path in [build.llama_server(), build.rpc_server(), build.vocabulary(), build.python()] {
        assert!(path.exists(), "{} is missing: run `bash {BUILD_SCRIPT}` again", path.display());
    }
    build
}

impl LlamaCpp {
    /// KEY of `target/llama-cpp/KEY`: the pinned version and the build flags, what a cache of
    /// things made with this build is keyed by.
    pub fn key(&self) -> String {
        self.dir.file_name().expect("a build directory").to_string_lossy().into_owned()
    }

    pub fn bin_dir(&self) -> PathBuf {
        self.dir.join("bin")
    }

    pub fn llama_server(&self) -> PathBuf {
        self.bin_dir().join("llama-server")
    }

    /// The RPC server; its CMake target and binary are `ggml-rpc-server` in this llama.cpp
    /// (older trees and most images call it `rpc-server`).
    pub fn rpc_server(&self) -> PathBuf {
        self.bin_dir().join("ggml-rpc-server")
    }

    /// `models/ggml-vocab-llama-spm.gguf` of the tree: the llama SPM tokenizer, no weights.
    pub fn vocabulary(&self) -> PathBuf {
        self.dir.join("models/ggml-vocab-llama-spm.gguf")
    }

    /// The venv's interpreter, which imports `gguf` and numpy.
    pub fn python(&self) -> PathBuf {
        self.dir.join("venv/bin/python")
    }
}
