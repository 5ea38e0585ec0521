//! Looking inside an image with what every image has: its shell. Not every image has `find`,
//! `grep` or `dd` (Fedora's container images ship without findutils), so each probe here is one
//! constant `sh` script, run as `sh -c SCRIPT sh ARG…` with its data in the positional parameters
//! (never in the script). Only [`mentioning`] uses a tool beyond the shell, `grep`, and only to
//! save reading files: without it the caller reads them all.

use super::probe::{Probe, Ran};

/// Regular files named like shared libraries (`*.so`, `*.so.*`) under each root, one a line. A
/// root may be a link and is followed (as `find -H`); links below it are not, so nothing loops.
/// (`entry` is global in sh, but each loop reads it only before recursing.)
const SHARED_LIBRARIES: &str = r#"walk() {
  for entry in "$1"/* "$1"/.[!.]* "$1"/..?*; do
    if [ -L "$entry" ]; then
      :
    elif [ -d "$entry" ]; then
      walk "$entry"
    elif [ -f "$entry" ]; then
      case "${entry##*/}" in *.so | *.so.*) printf '%s\n' "$entry" ;; esac
    fi
  done
}
for root do
  if [ -d "$root" ]; then walk "$root"; fi
done
exit 0"#;

/// The paths given that exist (links followed), one a line.
const EXISTING: &str = r#"for path do
  if [ -e "$path" ]; then printf '%s\n' "$path"; fi
done
exit 0"#;

/// The existing paths each glob pattern names (as ld.so.conf's `include` reads them), one a line.
const MATCHING: &str = r#"IFS=
for pattern do
  for path in $pattern; do
    if [ -e "$path" ]; then printf '%s\n' "$path"; fi
  done
done
exit 0"#;

/// Open the character device for reading and writing, as ROCm opens /dev/kfd, then close it. A
/// missing node is refused first: `<>` would create a regular file in its place.
const OPEN_READ_WRITE: &str = r#"if [ ! -c "$1" ]; then
  echo "$1: no such character device" >&2
  exit 2
fi
exec 3<>"$1""#;

/// Why a probe found nothing to go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unlooked {
    /// The image lacks the program the probe needs: which, and why.
    Missing(String),
    /// The program ran and failed, or the engine could not run it.
    Failed(String),
}

/// Every shared library under `roots` (see [`SHARED_LIBRARIES`]).
pub async fn shared_libraries_under(probe: &Probe<'_>, roots: &[&str]) -> Result<Vec<String>, Unlooked> {
    lines(probe.run(&script(SHARED_LIBRARIES, roots.iter().copied())).await, 0)
}

/// Those of `paths` that exist inside.
pub async fn existing(probe: &Probe<'_>, paths: &[String]) -> Result<Vec<String>, Unlooked> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    lines(probe.run(&script(EXISTING, paths.iter().map(String::as_str))).await, 0)
}

/// The existing paths the glob `patterns` name inside.
pub async fn matching(probe: &Probe<'_>, patterns: &[String]) -> Result<Vec<String>, Unlooked> {
    if patterns.is_empty() {
        return Ok(Vec::new());
    }
    lines(probe.run(&script(MATCHING, patterns.iter().map(String::as_str))).await, 0)
}

/// Open `device` read-write inside (see [`OPEN_READ_WRITE`]).
pub async fn open_read_write(probe: &Probe<'_>, device: &str) -> Ran {
    probe.run(&script(OPEN_READ_WRITE, [device])).await
}

/// Those of `paths` whose bytes hold one of `needles` (plain words: busybox's `grep -F` misses
/// words in binary files, so they go as patterns), by `grep -l`: what is worth reading of many
/// files. `Missing` when the image has no grep.
pub async fn mentioning(probe: &Probe<'_>, paths: &[String], needles: &[&str]) -> Result<Vec<String>, Unlooked> {
    let mut found = Vec::new();
    // A bounded command line per exec, however many libraries the image holds.
    for batch in paths.chunks(256) {
        let mut argv = vec!["grep", "-l", "-s"];
        for needle in needles {
            argv.extend(["-e", needle]);
        }
        argv.push("--");
        argv.extend(batch.iter().map(String::as_str));
        // 1: no match; 2: a file it could not read (not one to read, then).
        found.extend(lines(probe.run(&argv).await, 2)?);
    }
    Ok(found)
}

/// `sh -c SCRIPT sh ARG…`: `$0` is `sh`, the data `$1`…
fn script<'a>(script: &'a str, args: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut argv = vec!["sh", "-c", script, "sh"];
    argv.extend(args);
    argv
}

/// What a probe printed, a line each, when it exited with at most `worst_ok` (grep's 1 and 2).
fn lines(ran: Ran, worst_ok: i64) -> Result<Vec<String>, Unlooked> {
    match ran {
        Ran::Exited(code, stdout, _) if (0..=worst_ok).contains(&code) => {
            Ok(stdout.lines().filter(|l| !l.is_empty()).map(str::to_string).collect())
        }
        Ran::Exited(code, _, stderr) => Err(Unlooked::Failed(format!("exit {code}: {}", stderr.trim()))),
        Ran::Missing(why) => Err(Unlooked::Missing(why)),
        Ran::Broken(why) => Err(Unlooked::Failed(why)),
    }
}

#[cfg(test)]
mod tests {
    //! The scripts run here, on a real tree, by each shell an image may have that this machine has
    //! too: dash (Debian's sh), bash (Fedora's sh) and busybox's ash.

    use std::os::unix::fs::symlink;
    use std::process::Command;

    use super::*;

    /// Run `script` in every shell; they must agree, and what they say is returned.
    fn run(script: &str, args: &[&str]) -> (i32, String, String) {
        let shells: Vec<Vec<&str>> = [vec!["dash"], vec!["bash", "--posix"], vec!["busybox", "sh"]]
            .into_iter()
            .filter(|shell| which::which(shell[0]).is_ok())
            .collect();
        assert!(!shells.is_empty(), "no shell to run the scripts");
        let mut results = shells.iter().map(|shell| {
            let output = Command::new(shell[0]).args(&shell[1..]).arg("-c").arg(script).arg("sh").args(args).output();
            let output = output.unwrap();
            let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
            (shell[0], output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
        });
        let (first_shell, code, stdout, stderr) = results.next().unwrap();
        for (shell, other_code, other_stdout, _) in results {
            assert_eq!(
                (other_code == 0, sorted_lines(&other_stdout)),
                (code == 0, sorted_lines(&stdout)),
                "{shell} and {first_shell} differ on {script}"
            );
        }
        (code, stdout, stderr)
    }

    fn sorted_lines(text: &str) -> Vec<String> {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines.sort();
        lines
    }

    #[test]
    fn lists_libraries_through_a_linked_root_but_no_link_below_it() {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        let torch = venv.join("lib/python3.12/site-packages/torch/lib");
        let sdk = venv.join("lib/python3.12/site-packages/_rocm_sdk_libraries_gfx1151/lib");
        std::fs::create_dir_all(&torch).unwrap();
        std::fs::create_dir_all(&sdk).unwrap();
        std::fs::create_dir_all(venv.join(".hidden")).unwrap();
        for file in [torch.join("libtorch_hip.so"), sdk.join("librccl.so.1"), venv.join(".hidden/libx.so.2")] {
            std::fs::write(file, b"\x7fELF").unwrap();
        }
        std::fs::write(torch.join("notes.txt"), b"").unwrap();
        std::fs::write(torch.join("libnot.sox"), b"").unwrap();
        symlink("librccl.so.1", sdk.join("librccl.so")).unwrap();
        symlink(&venv, venv.join("loop")).unwrap();
        // /opt/rocm as TheRock lays it out: a link into the venv.
        symlink(&sdk, dir.path().join("rocm-lib")).unwrap();

        let root = |p: &str| dir.path().join(p).display().to_string();
        let (code, stdout, _) = run(SHARED_LIBRARIES, &[&root("rocm-lib"), &root("venv"), &root("absent")]);
        assert_eq!(code, 0);
        assert_eq!(
            sorted_lines(&stdout),
            [
                format!("{}/librccl.so.1", root("rocm-lib")),
                format!("{}/.hidden/libx.so.2", root("venv")),
                format!("{}/lib/python3.12/site-packages/_rocm_sdk_libraries_gfx1151/lib/librccl.so.1", root("venv")),
                format!("{}/lib/python3.12/site-packages/torch/lib/libtorch_hip.so", root("venv")),
            ]
        );
    }

    #[test]
    fn names_the_paths_that_exist_and_those_a_pattern_matches() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("ld.so.conf.d");
        std::fs::create_dir_all(&conf).unwrap();
        std::fs::write(conf.join("rocm.conf"), "").unwrap();
        std::fs::write(conf.join("x86_64 linux.conf"), "").unwrap();
        std::fs::write(conf.join("README"), "").unwrap();
        let path = |p: &str| dir.path().join(p).display().to_string();

        let (_, stdout, _) = run(EXISTING, &[&path("ld.so.conf.d/rocm.conf"), &path("absent"), "$(touch /x)"]);
        assert_eq!(sorted_lines(&stdout), [path("ld.so.conf.d/rocm.conf")]);
        let (_, stdout, _) = run(MATCHING, &[&path("ld.so.conf.d/*.conf"), &path("none/*.conf")]);
        assert_eq!(sorted_lines(&stdout), [path("ld.so.conf.d/rocm.conf"), path("ld.so.conf.d/x86_64 linux.conf")]);
    }

    #[test]
    fn opens_a_character_device_and_never_creates_a_missing_one() {
        let (code, _, stderr) = run(OPEN_READ_WRITE, &["/dev/null"]);
        assert_eq!((code, stderr.as_str()), (0, ""));
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("kfd").display().to_string();
        let (code, _, stderr) = run(OPEN_READ_WRITE, &[&missing]);
        assert_eq!(code, 2);
        assert_eq!(stderr.trim(), format!("{missing}: no such character device"));
        assert!(!dir.path().join("kfd").exists(), "not created");
    }

    #[test]
    fn exit_codes_that_still_count() {
        let exited = |code| Ran::Exited(code, "a\n\nb\n".into(), "why".into());
        assert_eq!(lines(exited(0), 0), Ok(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(lines(exited(1), 0), Err(Unlooked::Failed("exit 1: why".into())));
        assert_eq!(lines(exited(2), 2).unwrap().len(), 2, "grep: a file it could not read");
        assert_eq!(
            lines(Ran::Missing("sh not in the image".into()), 0),
            Err(Unlooked::Missing("sh not in the image".into()))
        );
    }
}
