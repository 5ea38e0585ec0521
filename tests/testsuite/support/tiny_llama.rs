//! The tests' real model for llama.cpp: a tiny llama-architecture GGUF with random weights
//! (tiny_llama.py: n_embd 96, 6 heads / 2 KV heads, FFN 256, the llama SPM vocabulary, float32),
//! written by the build's `gguf` package and cached under the test cache's tiny-llama by what
//! decides its bytes: the script, the llama.cpp build (its vocabulary and gguf), seed and layers.
//!
//! ```ignore
//! let model = TinyLlama::default().gguf();              // seed 1, 6 layers
//! let other = TinyLlama { seed: 2, ..TinyLlama::default() }.gguf(); // another model
//! ```

use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::llama_cpp::llama_cpp;
use super::test_cache::{cached_file, recipe_hash};

const WRITER: &str = include_str!("tiny_llama.py");

/// Which tiny model: the same fields give the same file, byte for byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TinyLlama {
    /// Seeds numpy's PCG64: another seed, other weights, another model.
    pub seed: u64,
    /// Transformer blocks. Six let an RPC split over two workers put layers on each.
    pub layers: u32,
}

impl Default for TinyLlama {
    fn default() -> TinyLlama {
        TinyLlama { seed: 1, layers: 6 }
    }
}

impl TinyLlama {
    /// The GGUF's path, written on first use (~27 MB, about a second).
    pub fn gguf(&self) -> PathBuf {
        let build = llama_cpp();
        let recipe = recipe_hash(&format!("{} {WRITER}", build.key()));
        let name = format!("tiny-llama/tiny-llama-{recipe}-s{}-l{}.gguf", self.seed, self.layers);
        cached_file(&name, |staging, gguf| {
            let script = staging.join("tiny_llama.py");
            std::fs::write(&script, WRITER).expect("write tiny_llama.py");
            let output = Command::new(build.python())
                .arg(&script)
                .arg(build.vocabulary())
                .arg(gguf)
                .arg(self.seed.to_string())
                .arg(self.layers.to_string())
                .stdin(Stdio::null())
                .output()
                .expect("run the venv's python (scripts/llama-cpp.sh makes it)");
            assert!(output.status.success(), "writing {self:?} failed: {}", String::from_utf8_lossy(&output.stderr));
        })
    }
}
