//! `examples/hosts/` stays what `scripts/example-hosts.sh` makes of the test fixtures: the same
//! files, and every device node the fixture's devices.txt lists as a link to /dev/null.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use walkdir::WalkDir;

use crate::support::host_tree::fixture_dir;

const SCRIPT: &str = "scripts/example-hosts.sh";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The script's `[example]=fixture` table: the one place the pairs are written.
fn examples_and_fixtures() -> Vec<(String, String)> {
    let script = std::fs::read_to_string(repo_root().join(SCRIPT)).expect("read the script");
    let pairs: Vec<(String, String)> = script
        .lines()
        .filter_map(|line| {
            let (example, fixture) = line.trim().strip_prefix('[')?.split_once("]=")?;
            Some((example.to_string(), fixture.to_string()))
        })
        .collect();
    assert!(pairs.len() >= 2, "no [example]=fixture lines in {SCRIPT}");
    pairs
}

/// Paths under `dir`, relative, split into (regular files, symlinks).
fn tree(dir: &Path) -> (BTreeSet<PathBuf>, BTreeSet<PathBuf>) {
    let (mut files, mut links) = (BTreeSet::new(), BTreeSet::new());
    for entry in WalkDir::new(dir).min_depth(1) {
        let entry = entry.expect("walk");
        let relative = entry.path().strip_prefix(dir).expect("under dir").to_path_buf();
        if entry.file_type().is_symlink() {
            links.insert(relative);
        } else if entry.file_type().is_file() {
            files.insert(relative);
        }
    }
    (files, links)
}

/// The node paths a fixture's devices.txt lists.
fn device_paths(fixture: &Path) -> BTreeSet<PathBuf> {
    let manifest = std::fs::read_to_string(fixture.join("devices.txt")).unwrap_or_default();
    manifest
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| PathBuf::from(line.split_whitespace().nth(3).expect("devices.txt: a PATH field")))
        .collect()
}

#[test]
fn example_hosts_are_the_fixtures_with_linked_device_nodes() {
    let redo = format!("run `bash {SCRIPT}`");
    for (example, fixture) in examples_and_fixtures() {
        let example_dir = repo_root().join("examples/hosts").join(&example);
        let fixture_dir = fixture_dir(&fixture);
        let (example_files, example_links) = tree(&example_dir);
        let (mut fixture_files, _) = tree(&fixture_dir);
        fixture_files.remove(Path::new("devices.txt"));
        assert_eq!(example_files, fixture_files, "{example} has other files than {fixture}: {redo}");
        for file in &fixture_files {
            assert_eq!(
                std::fs::read(example_dir.join(file)).unwrap(),
                std::fs::read(fixture_dir.join(file)).unwrap(),
                "{example}/{} differs from {fixture}'s: {redo}",
                file.display()
            );
        }
        assert_eq!(example_links, device_paths(&fixture_dir), "{example}'s device nodes are not {fixture}'s: {redo}");
        for link in &example_links {
            let target = std::fs::read_link(example_dir.join(link)).unwrap();
            assert_eq!(target, Path::new("/dev/null"), "{example}/{}: {redo}", link.display());
        }
    }
}
