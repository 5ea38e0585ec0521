//! One refresh per toolbox name at a time: an advisory lock file in the private runtime directory
//! ([`Paths::runtime_dir`]), which holds the pid of the process that has it (so the one waiting
//! can say whom it waits for). The file is never followed through a link, and never truncated
//! before it is known to be ours and locked.
//!
//! A second `refresh` of a busy toolbox waits for the first, within a bound (`--wait`, 10 minutes
//! by default; `--no-wait` fails at once). A cluster's node refresh and its phases never wait:
//! every other node would sit staged meanwhile, so the cluster refresh fails at once, changing
//! nothing anywhere, and says which node is busy.

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::paths::{open_lock_file, Paths};
use crate::reporter::Reporter;

/// How long `refresh` waits for another refresh of the same toolbox by default.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(600);
/// The longest a refresh waits for another (`--wait`'s bound; a node's request asking longer, from
/// a head of another build, waits this long).
pub const MAX_WAIT: Duration = Duration::from_secs(7 * 24 * 3600);
/// How often a waiting refresh tries the lock again.
const POLL: Duration = Duration::from_millis(100);
/// How long a lock this process let go may still be held by a child it was forking meanwhile.
const OUR_CHILD_GRACE: Duration = Duration::from_secs(2);
/// How often it tries again meanwhile.
const CHILD_POLL: Duration = Duration::from_millis(10);

/// Held for the whole refresh; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct ToolboxLock {
    _file: File,
}

/// One try at the lock.
enum Attempt {
    Taken(ToolboxLock),
    /// Another process holds it: its lock file, and its pid when the file names one.
    Busy {
        path: PathBuf,
        holder: Option<u32>,
    },
}

impl ToolboxLock {
    /// Take the lock for `name`, failing at once when another refresh holds it.
    pub fn acquire(paths: &Paths, name: &str) -> Result<ToolboxLock> {
        Self::acquire_in(&paths.runtime_dir()?, name)
    }

    pub fn acquire_in(dir: &Path, name: &str) -> Result<ToolboxLock> {
        let deadline = Instant::now() + OUR_CHILD_GRACE;
        loop {
            match attempt(dir, name)? {
                Attempt::Taken(lock) => return Ok(lock),
                // We held it last and let it go: a child of ours forked meanwhile holds a copy
                // until its exec closes it (the file is close-on-exec). That takes moments.
                Attempt::Busy { holder, .. } if held_by_our_child(holder, deadline) => {
                    std::thread::sleep(CHILD_POLL);
                }
                Attempt::Busy { path, holder } => return Err(busy(name, &path, holder, None)),
            }
        }
    }

    /// Take the lock for `name`, waiting up to `wait` for another refresh that holds it (zero:
    /// fail at once). It says once, through `reporter`, whom it waits for.
    pub async fn wait_for(paths: &Paths, name: &str, wait: Duration, reporter: &dyn Reporter) -> Result<ToolboxLock> {
        Self::wait_in(&paths.runtime_dir()?, name, wait, reporter).await
    }

    pub async fn wait_in(dir: &Path, name: &str, wait: Duration, reporter: &dyn Reporter) -> Result<ToolboxLock> {
        let wait = wait.min(MAX_WAIT);
        let deadline = Instant::now() + wait;
        let grace = Instant::now() + OUR_CHILD_GRACE;
        let mut said = false;
        loop {
            let (path, holder) = match attempt(dir, name)? {
                Attempt::Taken(lock) => return Ok(lock),
                Attempt::Busy { path, holder } => (path, holder),
            };
            // Not waiting for another refresh, even when told not to wait: see `acquire_in`.
            if held_by_our_child(holder, grace) {
                tokio::time::sleep(CHILD_POLL).await;
                continue;
            }
            let now = Instant::now();
            if wait.is_zero() {
                return Err(busy(name, &path, holder, None));
            }
            if now >= deadline {
                return Err(busy(name, &path, holder, Some(wait)));
            }
            if !said {
                reporter.warning(&format!(
                    "waiting for another refresh of {name} ({}) to finish, up to {}; --no-wait fails at once",
                    holder_text(holder),
                    for_people(wait)
                ));
                said = true;
            }
            tokio::time::sleep(POLL.min(deadline - now)).await;
        }
    }
}

/// Whether a lock file naming `holder` as its holder is (until `grace`) taken to be a copy a child
/// of this process holds for a moment: the file is close-on-exec, but between a fork (any thread's,
/// a test's or a tokio task's spawn) and its exec the child shares the lock.
fn held_by_our_child(holder: Option<u32>, grace: Instant) -> bool {
    holder == Some(std::process::id()) && Instant::now() < grace
}

/// Try the lock once; when taken, the file says who holds it.
fn attempt(dir: &Path, name: &str) -> Result<Attempt> {
    let path = dir.join(format!("{name}.lock"));
    let unusable = |message: String| {
        Error::host(
            path.display().to_string(),
            message,
            format!(
                "remove {} if no strix-toolbox of yours runs, or set XDG_RUNTIME_DIR to a private directory",
                path.display()
            ),
        )
    };
    let mut file =
        open_lock_file(&path).map_err(|e| unusable(format!("cannot open the lock file {}: {e}", path.display())))?;
    match file.try_lock() {
        Ok(()) => {
            // Who holds it, for whoever waits; the lock does not depend on it.
            let _ = file.set_len(0).and_then(|()| writeln!(file, "{}", std::process::id()));
            Ok(Attempt::Taken(ToolboxLock { _file: file }))
        }
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let holder =
                file.rewind().and_then(|()| file.read_to_string(&mut text)).ok().and_then(|_| text.trim().parse().ok());
            Ok(Attempt::Busy { path, holder })
        }
        Err(TryLockError::Error(e)) => Err(unusable(format!("cannot lock {}: {e}", path.display()))),
    }
}

/// Another refresh holds the lock: at once (`waited` None) or after waiting that long.
fn busy(name: &str, path: &Path, holder: Option<u32>, waited: Option<Duration>) -> Error {
    let (message, fix) = match waited {
        None => (
            format!(
                "another strix-toolbox is already refreshing {name} ({}, lock {})",
                holder_text(holder),
                path.display()
            ),
            "wait for it to finish".to_string(),
        ),
        Some(waited) => (
            format!(
                "another strix-toolbox is still refreshing {name} after {} ({}, lock {})",
                for_people(waited),
                holder_text(holder),
                path.display()
            ),
            match holder {
                Some(pid) => {
                    format!("wait for it to finish (`--wait SECONDS` waits longer), or stop it (`kill {pid}`)")
                }
                None => "wait for it to finish (`--wait SECONDS` waits longer)".to_string(),
            },
        ),
    };
    Error::toolbox(name, message, fix)
}

fn holder_text(holder: Option<u32>) -> String {
    holder.map_or_else(|| "pid unknown".to_string(), |pid| format!("pid {pid}"))
}

/// "10 minutes", "90 s".
fn for_people(duration: Duration) -> String {
    match duration.as_secs() {
        60 => "1 minute".to_string(),
        s if s >= 60 && s % 60 == 0 => format!("{} minutes", s / 60),
        s => format!("{s} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reporter::Recorder;

    #[test]
    fn second_lock_on_the_same_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = ToolboxLock::acquire_in(dir.path(), "vllm").unwrap();
        let error = ToolboxLock::acquire_in(dir.path(), "vllm").unwrap_err();
        assert_eq!(error.kind(), crate::error::ErrorKind::Toolbox);
        let error = error.to_string();
        assert!(error.contains("already refreshing vllm") && error.ends_with("Fix: wait for it to finish"), "{error}");
        assert!(error.contains(&format!("(pid {}, lock ", std::process::id())), "the holder is named: {error}");
        let _other = ToolboxLock::acquire_in(dir.path(), "vllm-dev").unwrap();
        drop(first);
        ToolboxLock::acquire_in(dir.path(), "vllm").unwrap();
    }

    /// Another process's pid: what the lock file of another refresh names.
    const OTHER: u32 = 4_194_305;

    /// The lock for `name` in `dir`, its file naming another process as its holder.
    fn held_by_another(dir: &Path, name: &str) -> ToolboxLock {
        let lock = ToolboxLock::acquire_in(dir, name).unwrap();
        std::fs::write(dir.join(format!("{name}.lock")), format!("{OTHER}\n")).unwrap();
        lock
    }

    #[tokio::test]
    async fn a_lock_our_child_holds_a_moment_is_taken_even_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let ours = ToolboxLock::acquire_in(dir.path(), "vllm").unwrap();
        let release = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            drop(ours);
        };
        let recorder = Recorder::default();
        let (taken, ()) = tokio::join!(ToolboxLock::wait_in(dir.path(), "vllm", Duration::ZERO, &recorder), release);
        taken.expect("taken once the copy is gone");
        assert!(recorder.events().is_empty(), "no other refresh to wait for");
    }

    #[tokio::test]
    async fn a_waiting_refresh_gets_the_lock_when_the_other_one_ends_and_says_so_once() {
        let dir = tempfile::tempdir().unwrap();
        let first = held_by_another(dir.path(), "vllm");
        let recorder = Recorder::default();
        let release = async {
            tokio::time::sleep(Duration::from_millis(350)).await;
            drop(first);
        };
        let started = Instant::now();
        let (second, ()) =
            tokio::join!(ToolboxLock::wait_in(dir.path(), "vllm", Duration::from_secs(10), &recorder), release);
        second.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(350));
        let expected = format!(
            "warning: waiting for another refresh of vllm (pid {OTHER}) to finish, up to 10 s; --no-wait fails at once"
        );
        assert_eq!(recorder.events(), [expected]);
    }

    #[tokio::test]
    async fn waiting_is_bounded_and_zero_fails_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let _first = held_by_another(dir.path(), "vllm");
        let recorder = Recorder::default();
        let at_once = ToolboxLock::wait_in(dir.path(), "vllm", Duration::ZERO, &recorder).await.unwrap_err();
        assert!(at_once.to_string().contains("already refreshing vllm"), "{at_once}");
        assert!(recorder.events().is_empty(), "nothing to say when not waiting");

        let started = Instant::now();
        let waited = ToolboxLock::wait_in(dir.path(), "vllm", Duration::from_millis(300), &recorder).await.unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(waited.kind(), crate::error::ErrorKind::Toolbox);
        let waited = waited.to_string();
        assert!(waited.contains("still refreshing vllm after 0 s") && waited.contains("kill "), "{waited}");
    }

    #[test]
    fn a_lock_file_planted_as_a_link_is_refused_and_its_target_kept() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "someone's data\n").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("vllm.lock")).unwrap();
        let error = ToolboxLock::acquire_in(dir.path(), "vllm").unwrap_err().to_string();
        assert!(error.contains("symbolic link") && error.contains("Fix: remove"), "{error}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "someone's data\n", "not truncated");
    }

    #[test]
    fn the_lock_lives_in_the_private_runtime_directory() {
        let root = tempfile::tempdir().unwrap();
        let paths = Paths::under(root.path());
        let _lock = ToolboxLock::acquire(&paths, "vllm").unwrap();
        let dir = paths.runtime_path();
        assert!(dir.join("vllm.lock").is_file());
        assert_eq!(std::os::unix::fs::MetadataExt::mode(&std::fs::metadata(dir).unwrap()) & 0o777, 0o700);
    }

    #[tokio::test]
    async fn any_wait_is_bounded_and_none_overflows_the_clock() {
        let dir = tempfile::tempdir().unwrap();
        let lock = ToolboxLock::wait_in(dir.path(), "vllm", Duration::MAX, &Recorder::default()).await;
        assert!(lock.is_ok(), "a free lock is taken at once, whatever the wait");
    }

    #[test]
    fn durations_for_people() {
        assert_eq!(for_people(DEFAULT_WAIT), "10 minutes");
        assert_eq!(for_people(Duration::from_secs(60)), "1 minute");
        assert_eq!(for_people(Duration::from_secs(90)), "90 s");
    }
}
