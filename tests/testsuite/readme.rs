//! The README's example block runs as written, so it cannot rot. The lines between its
//! `readme-example` markers are `strix-toolbox …` commands, each run from the repository root with
//! the built binary in place of `strix-toolbox`, as a newcomer would: as an unprivileged user,
//! with no container engine on PATH. Each must exit 0 unless its comment says `exit N`.
//!
//! Nor can the paths it and the pages under `docs/` name: every repository path they write
//! (`src/…`, `tests/…`, `scripts/…`, …) and every relative link they make must exist, so a file
//! moved or renamed fails here until the page says where it went.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support::cli::{stderr, stdout, STRIX};
use crate::support::user::{BinaryFor, TestUser};

const BEGIN: &str = "<!-- readme-example:begin -->";
const END: &str = "<!-- readme-example:end -->";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One line of the block: its words after `strix-toolbox`, and the exit code it promises.
#[derive(Debug)]
struct Example {
    line: String,
    args: Vec<String>,
    exit_code: i32,
}

fn examples(readme: &str) -> Vec<Example> {
    let start = readme.find(BEGIN).unwrap_or_else(|| panic!("README.md has no {BEGIN}")) + BEGIN.len();
    let length = readme[start..].find(END).unwrap_or_else(|| panic!("README.md has no {END} after {BEGIN}"));
    let block = &readme[start..start + length];
    let mut examples = Vec::new();
    for line in block.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("```") && !l.starts_with('#')) {
        let (command, comment) = line.split_once(" #").unwrap_or((line, ""));
        // Split as a shell would: only plain words are allowed, so the two cannot differ.
        assert!(
            !command.contains(['\'', '"', '$', '`', '\\', '|', '&', ';', '<', '>', '*', '?']),
            "README example {line:?}: keep it to plain words"
        );
        let mut words = command.split_whitespace().map(str::to_string);
        assert_eq!(words.next().as_deref(), Some("strix-toolbox"), "README example {line:?}: not strix-toolbox");
        let exit_code = comment
            .split_once("exit ")
            .and_then(|(_, code)| code.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
            .unwrap_or(0);
        examples.push(Example { line: line.to_string(), args: words.collect(), exit_code });
    }
    assert!(examples.len() >= 3, "the README example block holds too few commands: {examples:?}");
    examples
}

/// A newcomer's environment: nothing but a PATH without any engine, a home, and no colour.
fn newcomer(command: &mut Command, home: &Path, empty_path: &Path) {
    command.env_clear().env("PATH", empty_path).env("HOME", home).env("NO_COLOR", "1");
    command.stdin(Stdio::null());
}

fn check(example: &Example, output: &Output, who: &str) {
    assert_eq!(
        output.status.code(),
        Some(example.exit_code),
        "README example `{}` as {who}\nstdout:\n{}\nstderr:\n{}",
        example.line,
        stdout(output),
        stderr(output)
    );
    if example.args.iter().any(|a| a == "--dry-run") {
        let plan = stdout(output);
        for needle in ["no podman socket answers: planned for an empty podman", "podman create --name vllm-strix-new"] {
            assert!(plan.contains(needle), "`{}` as {who}: no {needle:?} in\n{plan}", example.line);
        }
    }
}

#[test]
fn the_readme_examples_run_as_written_without_root_or_an_engine() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("read README.md");
    let examples = examples(&readme);
    let scratch = tempfile::Builder::new().prefix("readme-").tempdir_in("/tmp").expect("tempdir");
    let empty_path = scratch.path().join("bin");
    std::fs::create_dir(&empty_path).unwrap();
    std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o755)).unwrap();

    // As an unprivileged user, from the repository root (or, when that user cannot enter the
    // checkout, from a copy of its examples with the same relative paths).
    let user = TestUser::rootless();
    let binary = BinaryFor::new(&user);
    let home = scratch.path().join("home");
    std::fs::create_dir(&home).unwrap();
    user.give(&home);
    let workdir = if readable_by_others(&repo_root()) {
        repo_root()
    } else {
        let copy = scratch.path().join("checkout");
        copy_tree(&repo_root().join("examples"), &copy.join("examples"));
        copy
    };
    for example in &examples {
        let mut command = Command::new(&binary.program);
        command.args(&example.args).current_dir(&workdir);
        newcomer(&mut command, &home, &empty_path);
        user.run_as(&mut command);
        check(example, &command.output().expect("run the README example"), &user.name);
    }

    // And as this test's own user, from the repository root itself.
    for example in &examples {
        let mut command = Command::new(STRIX);
        command.args(&example.args).current_dir(repo_root());
        newcomer(&mut command, scratch.path(), &empty_path);
        check(example, &command.output().expect("run the README example"), "the test's user");
    }
}

/// Every directory from / down to `dir` lets others in, and `dir` lets them read.
fn readable_by_others(dir: &Path) -> bool {
    dir.ancestors().all(|d| d.metadata().is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
        && dir.metadata().is_ok_and(|m| m.permissions().mode() & 0o004 != 0)
}

/// `cp -a`: links stay links.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    let status = Command::new("cp").arg("-a").arg(from).arg(to).status().expect("cp");
    assert!(status.success(), "cp -a {} {}", from.display(), to.display());
    let status = Command::new("chmod").args(["-R", "a+rX"]).arg(to).status().expect("chmod");
    assert!(status.success());
}

/// The top folders of the repository whose paths the pages name, from its root.
const TOP_FOLDERS: [&str; 8] =
    ["src/", "tests/", "scripts/", "containerfiles/", "docs/", ".github/", "examples/", "patches/"];

/// The README and every page under docs/.
fn pages() -> Vec<PathBuf> {
    let docs = repo_root().join("docs");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&docs)
        .unwrap_or_else(|e| panic!("read {}: {e}", docs.display()))
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages.insert(0, repo_root().join("README.md"));
    pages
}

/// A character a path is written with (what ends it: a space, a quote, a bracket, `*`, `…`).
fn path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')
}

/// The repository paths `text` names, with their line numbers: a top folder and what follows it,
/// where no path character comes just before (`~/src/x`, `$HOME/tests/y` and a URL's path are
/// not this repository's). A sentence's full stop or comma after it is not part of it; a glob
/// ends it (`src/commands/*.rs` names `src/commands/`).
fn repository_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        for (start, _) in line.char_indices() {
            let rest = &line[start..];
            if !TOP_FOLDERS.iter().any(|top| rest.starts_with(top)) {
                continue;
            }
            if line[..start].chars().next_back().is_some_and(path_char) {
                continue;
            }
            let end = rest.find(|c: char| !path_char(c)).unwrap_or(rest.len());
            found.push((number + 1, rest[..end].trim_end_matches(['.', ',']).to_string()));
        }
    }
    found
}

/// The targets of `text`'s relative Markdown links (`[text](target)`, its `#anchor` left out),
/// with their line numbers: what is neither a URL nor an anchor on the same page.
fn relative_links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split('#').next().unwrap_or_default();
            if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
                found.push((number + 1, target.to_string()));
            }
            rest = &after[end..];
        }
    }
    found
}

#[test]
fn every_path_the_readme_and_the_docs_name_exists() {
    let root = repo_root();
    let pages = pages();
    assert!(pages.len() >= 3, "the README and the pages under docs/: {pages:?}");
    let mut missing = Vec::new();
    let mut named = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap_or_else(|e| panic!("read {}: {e}", page.display()));
        let shown = page.strip_prefix(&root).unwrap_or(page).display().to_string();
        for (line, path) in repository_paths(&text) {
            named += 1;
            if !root.join(&path).exists() {
                missing.push(format!("{shown}:{line}: {path}"));
            }
        }
        let folder = page.parent().expect("a page's folder");
        for (line, target) in relative_links(&text) {
            named += 1;
            if !folder.join(&target).exists() {
                missing.push(format!("{shown}:{line}: the link to {target}"));
            }
        }
    }
    assert!(named > 50, "the pages name only {named} paths: is the scan finding them?");
    assert!(
        missing.is_empty(),
        "the README and docs/ name paths that do not exist (moved or renamed? say where it went):\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_path_scan_finds_repository_paths_and_links_and_nothing_else() {
    let text = "See `src/link.rs` and src/cluster/launch/, then scripts/bench.sh's table.\n\
                Not ours: ~/src/x, $HOME/tests/y, https://github.com/vllm-project/vllm/blob/main/tests/models/utils.py\n\
                Globs end it: `containerfiles/*.Containerfile`; so does a full stop: docs/json.md.\n\
                [the JSON](json.md#errors), [a page](../README.md), [upstream](https://example.com/a.md), [here](#top)";
    let paths: Vec<(usize, String)> = repository_paths(text);
    let expected = [
        (1, "src/link.rs"),
        (1, "src/cluster/launch/"),
        (1, "scripts/bench.sh"),
        (3, "containerfiles/"),
        (3, "docs/json.md"),
    ];
    assert_eq!(paths, expected.map(|(line, path)| (line, path.to_string())));
    let links = relative_links(text);
    assert_eq!(links, [(4, "json.md".to_string()), (4, "../README.md".to_string())]);
}
