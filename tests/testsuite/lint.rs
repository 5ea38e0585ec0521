//! The image recipes and the workflows pass their linters: hadolint over every
//! `containerfiles/*.Containerfile` (with the repository's `.hadolint.yaml`), actionlint over every
//! `.github/workflows/*.yml` (with shellcheck, so the `run:` scripts are checked too).
//! The tools come from `scripts/test-deps.sh`; a missing tool fails the test, it never skips.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The linters' virtualenv that `scripts/test-deps.sh` fills (target/linters-venv/bin), then PATH.
fn find_tool(name: &str) -> PathBuf {
    let venv_bin = repo_root().join("target/linters-venv/bin");
    let path_dirs = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default();
    for dir in std::iter::once(venv_bin).chain(path_dirs) {
        let candidate = dir.join(name);
        if is_executable(&candidate) {
            return candidate;
        }
    }
    panic!("`{name}` is not installed (not in target/linters-venv/bin nor on PATH). Install the test tools with: sudo bash scripts/test-deps.sh");
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// Files directly in `dir` whose names end with one of `suffixes`, sorted.
fn files_with_suffix(dir: &Path, suffixes: &[&str]) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| {
            path.is_file()
                && path.file_name().and_then(|n| n.to_str()).is_some_and(|n| suffixes.iter().any(|s| n.ends_with(s)))
        })
        .collect();
    files.sort();
    files
}

fn relative(paths: &[PathBuf]) -> Vec<OsString> {
    let root = repo_root();
    paths.iter().map(|p| p.strip_prefix(&root).unwrap_or(p).as_os_str().to_owned()).collect()
}

fn assert_clean(tool: &str, files: &[OsString], output: &Output) {
    assert!(
        output.status.success(),
        "{tool} failed ({}) on {files:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
}

#[test]
fn hadolint_passes_on_every_containerfile() {
    let hadolint = find_tool("hadolint");
    let root = repo_root();
    let files = relative(&files_with_suffix(&root.join("containerfiles"), &[".Containerfile"]));
    assert!(!files.is_empty(), "no containerfiles/*.Containerfile to lint");
    let output = Command::new(&hadolint)
        .current_dir(&root)
        .arg("--config")
        .arg(root.join(".hadolint.yaml"))
        .arg("--no-color")
        .args(&files)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", hadolint.display()));
    assert_clean("hadolint", &files, &output);
}

#[test]
fn actionlint_passes_on_every_workflow() {
    let actionlint = find_tool("actionlint");
    // Without shellcheck on PATH actionlint silently skips the `run:` scripts.
    let shellcheck = find_tool("shellcheck");
    let root = repo_root();
    let files = relative(&files_with_suffix(&root.join(".github/workflows"), &[".yml", ".yaml"]));
    assert!(!files.is_empty(), "no .github/workflows/*.yml to lint");
    let output = Command::new(&actionlint)
        .current_dir(&root)
        .arg("-no-color")
        .arg("-shellcheck")
        .arg(&shellcheck)
        .args(&files)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", actionlint.display()));
    assert_clean("actionlint", &files, &output);
}

/// The `run:` scripts of a workflow: (first line number, script text).
fn run_scripts(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut scripts = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        let key = trimmed.strip_prefix("- ").unwrap_or(trimmed);
        if let Some(value) = key.strip_prefix("run:") {
            let indent = line.len() - trimmed.len();
            let value = value.trim();
            if value.starts_with('|') || value.starts_with('>') {
                let mut body = String::new();
                let mut j = i + 1;
                while j < lines.len() {
                    let next = lines[j];
                    let next_indent = next.len() - next.trim_start().len();
                    if !next.trim().is_empty() && next_indent <= indent {
                        break;
                    }
                    body.push_str(next);
                    body.push('\n');
                    j += 1;
                }
                scripts.push((i + 1, body));
                i = j;
                continue;
            }
            scripts.push((i + 1, value.to_string()));
        }
        i += 1;
    }
    scripts
}

#[test]
fn workflow_scripts_take_inputs_through_env_not_expressions() {
    let root = repo_root();
    let files = files_with_suffix(&root.join(".github/workflows"), &[".yml", ".yaml"]);
    let mut offenders = Vec::new();
    let mut seen_scripts = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read workflow");
        for (line, script) in run_scripts(&text) {
            seen_scripts += 1;
            if script.contains("${{") {
                offenders.push(format!("{}:{line}", file.display()));
            }
        }
    }
    assert!(seen_scripts > 0, "found no run: scripts in {files:?}");
    assert!(
        offenders.is_empty(),
        "`${{{{ }}}}` expressions inside run: scripts (pass them through env: instead): {offenders:?}"
    );
}

#[test]
fn run_script_scanner_finds_block_and_inline_scripts() {
    let text = "steps:\n  - run: echo one\n  - name: two\n    run: |\n      echo \"$A\"\n\n      echo ${{ x }}\n    env:\n      A: b\n";
    let scripts = run_scripts(text);
    assert_eq!(scripts.len(), 2, "{scripts:?}");
    assert_eq!(scripts[0], (2, "echo one".to_string()));
    assert_eq!(scripts[1].0, 4);
    assert!(scripts[1].1.contains("${{ x }}"));
    assert!(!scripts[1].1.contains("A: b"));
}
