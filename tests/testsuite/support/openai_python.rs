//! The `openai` Python package, the client most programs speak to an OpenAI-compatible endpoint
//! with, in a virtualenv of Debian's python3 (PEP 668: no pip outside one) made once under
//! the machine's test cache and kept: `pip install openai==VERSION` from PyPI, the one download.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

/// The version the tests pin (PyPI's newest when they were written).
pub const OPENAI_VERSION: &str = "3.57.0";

/// The venv's interpreter, which imports `openai`; made on first use (one maker at a time).
pub fn openai_python() -> PathBuf {
    let dir = super::test_cache::dir().join(format!("openai-{OPENAI_VERSION}"));
    std::fs::create_dir_all(&dir).expect("create the openai venv's directory");
    let lock = std::fs::File::create(dir.join("lock")).expect("lock file");
    lock.lock().expect("lock the openai venv");
    let venv = dir.join("venv");
    let python = venv.join("bin/python");
    let complete = dir.join("complete");
    if complete.exists() {
        return python;
    }
    let _ = std::fs::remove_dir_all(&venv);
    run(Command::new("/usr/bin/python3").args(["-m", "venv"]).arg(&venv), "python3 -m venv (Debian: python3-venv)");
    run(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .arg(format!("openai=={OPENAI_VERSION}")),
        "pip install openai",
    );
    std::fs::write(&complete, OPENAI_VERSION).expect("mark the openai venv complete");
    python
}

/// support/openai_client.py against `base_url` with `key`: each of `models` streamed (chat and
/// completion, `max_tokens` each), and `unknown` asked; what it printed, parsed.
pub fn openai_client(base_url: &str, key: &str, max_tokens: u32, models: &[&str], unknown: &str) -> Value {
    let output = Command::new(openai_python())
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/testsuite/support/openai_client.py"))
        .args([base_url, key, &max_tokens.to_string()])
        .args(models)
        .args(["--", unknown])
        .stdin(Stdio::null())
        .output()
        .expect("run the openai client");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}\n{said}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_str(&said).expect("the client's JSON")
}

fn run(command: &mut Command, what: &str) {
    let output = command.stdin(Stdio::null()).output().unwrap_or_else(|error| panic!("{what}: {error}"));
    assert!(output.status.success(), "{what} failed:\n{}", String::from_utf8_lossy(&output.stderr));
}
