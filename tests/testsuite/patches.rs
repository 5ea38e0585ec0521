//! The RCCL patch series in `patches/rccl/` is well-formed, offline:
//! - `UPSTREAM` names the upstream repository, RCCL's directory in it, and one 40-hex commit (the
//!   only place it is named);
//! - `series` lists exactly the `.patch` files present, in numeric order (none, when upstream
//!   lacks nothing at the pin: patches/rccl/README.md records what was checked);
//! - every patch is a `git format-patch` mail (From line, From:/Subject: [PATCH n/m] headers),
//!   with at least one `diff --git` and hunks whose header counts match their bodies;
//! - every patched path is recorded in `paths.txt` with its blob id at the pinned commit, and each
//!   patch's `index <old>..` pre-image matches that blob (or the previous patch's result).
//!
//! The series is empty at this pin, so every check also runs on a two-patch fixture series made
//! by the test, and on broken copies of it, each of which the check must refuse.
//!
//! That `git apply --check` passes against the real upstream tree is checked when the series is
//! refreshed (patches/rccl/README.md) and by .github/workflows/build-rccl.yml, which applies it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn patches_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("patches/rccl")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Non-empty lines that are not `#` comments, trimmed.
fn content_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'))
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

struct Upstream {
    repo: String,
    /// RCCL's directory inside the repository (rocm-systems is a monorepo).
    path: String,
    commit: String,
}

fn upstream() -> Upstream {
    upstream_in(&patches_dir())
}

fn upstream_in(dir: &Path) -> Upstream {
    let text = read(&dir.join("UPSTREAM"));
    let mut keys = BTreeMap::new();
    for line in content_lines(&text) {
        let (key, value) = line.split_once('=').unwrap_or_else(|| panic!("UPSTREAM: not key=value: {line:?}"));
        let previous = keys.insert(key.trim().to_string(), value.trim().to_string());
        assert!(previous.is_none(), "UPSTREAM names {key:?} twice");
    }
    let repo = keys.remove("repo").expect("UPSTREAM has no repo=");
    let path = keys.remove("path").expect("UPSTREAM has no path=");
    let commit = keys.remove("commit").expect("UPSTREAM has no commit=");
    assert!(keys.is_empty(), "UPSTREAM has unknown keys: {:?}", keys.keys().collect::<Vec<_>>());
    Upstream { repo, path, commit }
}

fn series(dir: &Path) -> Vec<String> {
    content_lines(&read(&dir.join("series"))).map(str::to_string).collect()
}

#[test]
fn upstream_names_a_repository_and_a_full_commit() {
    let up = upstream();
    assert!(
        up.repo.starts_with("https://github.com/")
            && up.repo.trim_start_matches("https://github.com/").split('/').count() == 2,
        "repo must be https://github.com/OWNER/NAME, got {:?}",
        up.repo
    );
    assert!(!up.repo.ends_with(".git") && !up.repo.ends_with('/'), "repo: plain URL without .git or /: {:?}", up.repo);
    assert!(is_hex(&up.commit, 40), "commit must be 40 lowercase hex digits, got {:?}", up.commit);
    assert!(
        !up.path.is_empty() && !up.path.starts_with('/') && !up.path.ends_with('/') && !up.path.contains(".."),
        "path must be a relative directory like projects/rccl, got {:?}",
        up.path
    );
}

#[test]
fn the_commit_is_named_only_in_upstream() {
    let commit = upstream().commit;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut stack = vec![root.join("patches"), root.join(".github"), root.join("containerfiles")];
    let mut offenders = Vec::new();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path != patches_dir().join("UPSTREAM") {
                if let Ok(text) = std::fs::read_to_string(&path) {
                    if text.contains(&commit) {
                        offenders.push(path.display().to_string());
                    }
                }
            }
        }
    }
    assert!(offenders.is_empty(), "the pinned commit is repeated outside UPSTREAM: {offenders:?}");
}

#[test]
fn the_workflow_reads_the_pin_and_the_series() {
    let workflow = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join(".github/workflows/build-rccl.yml"));
    for needle in [
        "patches/rccl/UPSTREAM",
        "patches/rccl/series",
        "s/^path=//p",
        "-DGPU_TARGETS=gfx1151",
        "-DENABLE_AMDSMI=OFF",
        "containerfiles/vllm-therock-gfx1151.Containerfile",
    ] {
        assert!(workflow.contains(needle), "build-rccl.yml does not mention {needle}");
    }
}

#[test]
fn series_lists_exactly_the_patches_in_numeric_order() {
    check_series_order(&patches_dir());
}

fn check_series_order(dir: &Path) {
    let listed = series(dir);

    let mut present: Vec<String> = std::fs::read_dir(dir)
        .expect("read patches/rccl")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".patch"))
        .collect();
    present.sort();
    let listed_set: BTreeSet<&String> = listed.iter().collect();
    assert_eq!(listed_set.len(), listed.len(), "series lists a patch twice: {listed:?}");
    assert_eq!(listed_set, present.iter().collect::<BTreeSet<_>>(), "series and the .patch files present differ");

    for (index, name) in listed.iter().enumerate() {
        let (number, rest) = name.split_once('-').unwrap_or_else(|| panic!("{name}: want NNNN-title.patch"));
        assert!(number.len() == 4 && number.bytes().all(|b| b.is_ascii_digit()), "{name}: want a 4-digit number");
        assert_eq!(
            number.parse::<usize>().unwrap(),
            index + 1,
            "{name}: series position {} has number {number}",
            index + 1
        );
        assert!(rest.len() > ".patch".len(), "{name}: no title");
    }
}

/// One `diff --git` section of a patch.
#[derive(Debug)]
struct FileDiff {
    path: String,
    old_blob: Option<String>,
    new_blob: Option<String>,
    new_file: bool,
    hunks: usize,
}

#[derive(Debug)]
struct Patch {
    subject: String,
    files: Vec<FileDiff>,
}

/// Parse a `git format-patch` mail, checking the headers and every hunk's line counts.
fn parse_patch(name: &str, text: &str) -> Result<Patch, String> {
    let lines: Vec<&str> = text.lines().collect();
    let first = lines.first().ok_or("empty file")?;
    let from_commit = first
        .strip_prefix("From ")
        .and_then(|rest| rest.split_whitespace().next())
        .ok_or("first line is not the mbox `From <commit> <date>` line")?;
    if !is_hex(from_commit, 40) {
        return Err(format!("From line has no 40-hex commit: {first:?}"));
    }

    let header_end = lines.iter().position(|l| l.is_empty()).ok_or("no blank line after the mail headers")?;
    let headers = &lines[..header_end];
    if !headers.iter().any(|l| l.starts_with("From: ") && l.len() > "From: ".len()) {
        return Err("no From: header".into());
    }
    // Subject may be folded over several lines (continuations start with whitespace).
    let subject_at = headers.iter().position(|l| l.starts_with("Subject: ")).ok_or("no Subject: header")?;
    let mut subject = headers[subject_at]["Subject: ".len()..].to_string();
    for continuation in headers[subject_at + 1..].iter().take_while(|l| l.starts_with([' ', '\t'])) {
        subject.push(' ');
        subject.push_str(continuation.trim());
    }

    let mut files: Vec<FileDiff> = Vec::new();
    let mut i = header_end;
    while i < lines.len() {
        let line = lines[i];
        if let Some(rest) = line.strip_prefix("diff --git ") {
            let (a, b) = rest.split_once(' ').ok_or_else(|| format!("line {}: bad diff --git", i + 1))?;
            let a = a.strip_prefix("a/").ok_or_else(|| format!("line {}: no a/ prefix", i + 1))?;
            let b = b.strip_prefix("b/").ok_or_else(|| format!("line {}: no b/ prefix", i + 1))?;
            if a != b {
                return Err(format!("line {}: renames are not expected ({a} -> {b})", i + 1));
            }
            files.push(FileDiff { path: b.to_string(), old_blob: None, new_blob: None, new_file: false, hunks: 0 });
            i += 1;
            continue;
        }
        if let Some(file) = files.last_mut() {
            if line.starts_with("new file mode ") {
                file.new_file = true;
            } else if let Some(rest) = line.strip_prefix("index ") {
                let range = rest.split_whitespace().next().unwrap_or("");
                let (old, new) = range.split_once("..").ok_or_else(|| format!("line {}: bad index line", i + 1))?;
                file.old_blob = Some(old.to_string());
                file.new_blob = Some(new.to_string());
            } else if line.starts_with("@@ ") {
                let (old_count, new_count) =
                    parse_hunk_header(line).ok_or_else(|| format!("line {}: bad hunk header {line:?}", i + 1))?;
                file.hunks += 1;
                i = check_hunk_body(&lines, i + 1, old_count, new_count)
                    .map_err(|e| format!("{name}: hunk at line {} ({line}): {e}", i + 1))?;
                continue;
            }
        }
        i += 1;
    }
    if files.is_empty() {
        return Err("no `diff --git` section".into());
    }
    if let Some(empty) = files.iter().find(|f| f.hunks == 0) {
        return Err(format!("{} has no hunks", empty.path));
    }
    Ok(Patch { subject, files })
}

/// `@@ -start[,count] +start[,count] @@ ...` → (old count, new count); a missing count is 1.
fn parse_hunk_header(line: &str) -> Option<(usize, usize)> {
    let inner = line.strip_prefix("@@ ")?;
    let (ranges, _) = inner.split_once(" @@")?;
    let (old, new) = ranges.split_once(' ')?;
    let count = |range: &str, sign: char| -> Option<usize> {
        let range = range.strip_prefix(sign)?;
        match range.split_once(',') {
            Some((start, count)) => {
                start.parse::<usize>().ok()?;
                count.parse().ok()
            }
            None => {
                range.parse::<usize>().ok()?;
                Some(1)
            }
        }
    };
    Some((count(old, '-')?, count(new, '+')?))
}

/// Consume a hunk body starting at `start`; returns the index of the first line after it.
fn check_hunk_body(lines: &[&str], start: usize, old_count: usize, new_count: usize) -> Result<usize, String> {
    let (mut old_seen, mut new_seen) = (0, 0);
    let mut i = start;
    while old_seen < old_count || new_seen < new_count {
        let Some(line) = lines.get(i) else {
            return Err(format!("patch ends after {old_seen}/{old_count} old and {new_seen}/{new_count} new lines"));
        };
        match line.chars().next() {
            Some(' ') | None => {
                old_seen += 1;
                new_seen += 1;
            }
            Some('-') => old_seen += 1,
            Some('+') => new_seen += 1,
            Some('\\') => {}
            _ => {
                return Err(format!(
                "line {} {line:?} ends the hunk after {old_seen}/{old_count} old and {new_seen}/{new_count} new lines",
                i + 1
            ))
            }
        }
        i += 1;
    }
    if old_seen != old_count || new_seen != new_count {
        return Err(format!("counts {old_seen} old / {new_seen} new, header says {old_count} / {new_count}"));
    }
    // "\ No newline at end of file" may follow the last line.
    while lines.get(i).is_some_and(|l| l.starts_with('\\')) {
        i += 1;
    }
    // What follows must start something new, not continue the hunk.
    match lines.get(i) {
        None => Ok(i),
        Some(next) if next.starts_with("@@ ") || next.starts_with("diff --git ") || *next == "-- " => Ok(i),
        Some(next) if next.starts_with([' ', '-', '+']) => {
            Err(format!("line {} {next:?} is beyond the counts in the hunk header", i + 1))
        }
        Some(_) => Ok(i),
    }
}

fn parsed_series(dir: &Path) -> Vec<(String, Patch)> {
    series(dir)
        .into_iter()
        .map(|name| {
            let text = read(&dir.join(&name));
            let patch = parse_patch(&name, &text).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, patch)
        })
        .collect()
}

#[test]
fn every_patch_is_a_format_patch_mail_with_consistent_hunks() {
    check_mails(&patches_dir());
}

fn check_mails(dir: &Path) {
    let patches = parsed_series(dir);
    let total = patches.len();
    for (index, (name, patch)) in patches.iter().enumerate() {
        let want = format!("[PATCH {}/{}] ", index + 1, total);
        let want_single = "[PATCH] ";
        assert!(
            patch.subject.starts_with(&want) || (total == 1 && patch.subject.starts_with(want_single)),
            "{name}: Subject should start with {want:?}, got {:?}",
            patch.subject
        );
        assert!(patch.subject.len() > want.len() + 5, "{name}: Subject has no summary");
    }
}

/// `paths.txt`: `<40-hex blob>  <path>` for every upstream path the series touches.
fn recorded_paths(dir: &Path) -> BTreeMap<String, String> {
    let text = read(&dir.join("paths.txt"));
    let mut paths = BTreeMap::new();
    for line in content_lines(&text) {
        let (blob, path) = line.split_once(char::is_whitespace).unwrap_or_else(|| panic!("paths.txt: {line:?}"));
        let path = path.trim();
        assert!(is_hex(blob, 40), "paths.txt: blob for {path} is not 40 hex: {blob:?}");
        assert!(!path.is_empty() && !path.starts_with('/') && !path.contains(".."), "paths.txt: bad path {path:?}");
        assert!(paths.insert(path.to_string(), blob.to_string()).is_none(), "paths.txt lists {path} twice");
    }
    paths
}

#[test]
fn patches_touch_only_recorded_upstream_paths_at_matching_preimages() {
    check_preimages(&patches_dir());
}

fn check_preimages(dir: &Path) {
    let recorded = recorded_paths(dir);
    // The blob each path has after the patches so far (starts at the upstream blob).
    let mut current: BTreeMap<String, String> = recorded.clone();
    let mut touched = BTreeSet::new();
    for (name, patch) in parsed_series(dir) {
        for file in &patch.files {
            touched.insert(file.path.clone());
            if file.new_file {
                assert!(!recorded.contains_key(&file.path), "{name}: creates {} which exists upstream", file.path);
                if let Some(new) = &file.new_blob {
                    current.insert(file.path.clone(), new.clone());
                }
                continue;
            }
            let have = current
                .get(&file.path)
                .unwrap_or_else(|| panic!("{name}: touches {} which paths.txt does not record as upstream", file.path));
            let old = file.old_blob.as_deref().unwrap_or_else(|| panic!("{name}: {} has no index line", file.path));
            assert!(
                old.len() >= 7 && is_hex(old, old.len()) && have.starts_with(old),
                "{name}: {} pre-image {old} does not match the expected blob {have}",
                file.path
            );
            let new = file.new_blob.clone().unwrap_or_else(|| panic!("{name}: {} has no index line", file.path));
            current.insert(file.path.clone(), new);
        }
    }
    let rccl_dir = format!("{}/", upstream_in(dir).path);
    let outside: Vec<&String> = touched.iter().filter(|p| !p.starts_with(&rccl_dir)).collect();
    assert!(outside.is_empty(), "the series touches paths outside {rccl_dir}: {outside:?}");
    let stale: Vec<&String> = recorded.keys().filter(|p| !touched.contains(*p)).collect();
    assert!(stale.is_empty(), "paths.txt records paths no patch touches: {stale:?}");
}

#[test]
fn the_hunk_checker_catches_miscounted_hunks() {
    let good = "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: a <a@b>\nSubject: [PATCH 1/1] x: y\n\nbody\n---\ndiff --git a/f b/f\nindex 1234567..89abcde 100644\n--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n d\n-- \n2.47.3\n";
    let patch = parse_patch("good", good).expect("good patch parses");
    assert_eq!(patch.files.len(), 1);
    assert_eq!(patch.files[0].hunks, 1);

    let short = good.replace("@@ -1,3 +1,3 @@", "@@ -1,4 +1,4 @@").replace(" d\n-- \n2.47.3\n", " d\n");
    assert!(parse_patch("short", &short).is_err(), "a hunk shorter than its header must fail");

    let long = good.replace("@@ -1,3 +1,3 @@", "@@ -1,2 +1,2 @@");
    assert!(parse_patch("long", &long).is_err(), "a hunk longer than its header must fail");

    let no_diff = "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: a <a@b>\nSubject: [PATCH 1/1] x\n\nbody\n";
    assert!(parse_patch("no_diff", no_diff).is_err());

    assert_eq!(parse_hunk_header("@@ -7 +7,2 @@ ctx"), Some((1, 2)));
    assert_eq!(parse_hunk_header("@@ -0,0 +1 @@"), Some((0, 1)));
    assert_eq!(parse_hunk_header("@@ bogus @@"), None);
}

const OLD_BLOB: &str = "1111111111111111111111111111111111111111";

/// A patch of `projects/rccl/src/a.cc` from blob `old` to blob `new`, number `n` of `total`.
fn fixture_patch(n: usize, total: usize, old: &str, new: &str, path: &str) -> String {
    format!(
        "From {commit} Mon Sep 17 00:00:00 2001\nFrom: a <a@example.com>\nSubject: [PATCH {n}/{total}] rccl: step {n}\n\n\
         body\n---\ndiff --git a/{path} b/{path}\nindex {old}..{new} 100644\n--- a/{path}\n+++ b/{path}\n\
         @@ -1,3 +1,3 @@\n a\n-b{n}\n+c{n}\n d\n-- \n2.47.3\n",
        commit = "0".repeat(40)
    )
}

/// A well-formed two-patch series in a directory of its own, the second patch on the first's result.
fn fixture_series() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let path = "projects/rccl/src/a.cc";
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write(
        "UPSTREAM",
        &format!("repo=https://github.com/ROCm/rocm-systems\npath=projects/rccl\ncommit={}\n", "ab".repeat(20)),
    );
    write("series", "# fixture\n0001-first.patch\n0002-second.patch\n");
    write("paths.txt", &format!("{OLD_BLOB}  {path}\n"));
    write("0001-first.patch", &fixture_patch(1, 2, &OLD_BLOB[..7], "2222222", path));
    write("0002-second.patch", &fixture_patch(2, 2, "2222222", "3333333", path));
    dir
}

/// True when `check` refuses the series in `dir` (panics, as the tests above fail).
fn refuses(check: fn(&Path), dir: &Path) -> bool {
    std::panic::catch_unwind(|| check(dir)).is_err()
}

#[test]
fn the_checks_pass_a_good_fixture_series_and_refuse_each_defect() {
    let good = fixture_series();
    let _ = upstream_in(good.path());
    check_series_order(good.path());
    check_mails(good.path());
    check_preimages(good.path());
    assert_eq!(parsed_series(good.path()).len(), 2, "the fixture's patches were not all read");

    let broken = |name: &str, edit: &dyn Fn(&str) -> String| {
        let dir = fixture_series();
        let file = dir.path().join(name);
        std::fs::write(&file, edit(&read(&file))).unwrap();
        dir
    };
    // A patch on disk that the series does not list; the series out of order.
    let unlisted = broken("series", &|text| text.replace("0002-second.patch\n", ""));
    assert!(refuses(check_series_order, unlisted.path()));
    let swapped = broken("series", &|_| "0002-second.patch\n0001-first.patch\n".into());
    assert!(refuses(check_series_order, swapped.path()));
    // A subject numbered for another series; a hunk whose header miscounts.
    let misnumbered = broken("0002-second.patch", &|text| text.replace("[PATCH 2/2]", "[PATCH 2/3]"));
    assert!(refuses(check_mails, misnumbered.path()));
    let miscounted = broken("0001-first.patch", &|text| text.replace("@@ -1,3 +1,3 @@", "@@ -1,2 +1,3 @@"));
    assert!(refuses(check_mails, miscounted.path()));
    // The second patch not on the first's result; a path upstream does not have; paths.txt stale.
    let off_base = broken("0002-second.patch", &|text| text.replace("index 2222222..", "index 4444444.."));
    assert!(refuses(check_preimages, off_base.path()));
    let unknown = broken("0001-first.patch", &|text| text.replace("src/a.cc", "src/b.cc"));
    assert!(refuses(check_preimages, unknown.path()));
    let stale = broken("paths.txt", &|text| format!("{text}{}  projects/rccl/src/c.cc\n", "5".repeat(40)));
    assert!(refuses(check_preimages, stale.path()));
}
