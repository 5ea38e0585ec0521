//! Where strix-toolbox keeps its files on this machine, resolved once with the settings from the
//! environment as the XDG base directories say (set, non-empty and absolute, else under a
//! non-empty absolute `HOME`), and the private runtime directory its locks and ssh control sockets
//! live in: `$XDG_RUNTIME_DIR/strix-toolbox`, else `/run/strix-toolbox` for root, else
//! `$TMPDIR/strix-toolbox-EUID`. That last one has a name anyone can guess in a directory anyone
//! can write, so every runtime directory is checked the way OpenSSH checks the directories it
//! trusts before anything is put in it ([`private_dir`]).

use std::ffi::OsString;
use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

mod home_marker;

pub use home_marker::home_marker;

/// This program's directory under each base directory.
const OURS: &str = "strix-toolbox";
/// Under the state directory, each node's own (by its machine id): one home may serve many nodes.
const NODES: &str = "nodes";

/// The directories of this user that strix-toolbox reads and writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    home: Option<PathBuf>,
    config_home: Option<PathBuf>,
    state_home: Option<PathBuf>,
    data_home: Option<PathBuf>,
    cache_home: Option<PathBuf>,
    runtime: PathBuf,
    /// The node's machine id, which keeps its own state apart from other nodes' in a shared home.
    node: Option<String>,
}

impl Paths {
    /// This process's directories.
    pub fn of_this_process() -> Paths {
        Paths::from_env(|name| std::env::var_os(name), euid())
    }

    /// The directories `env` describes for the user `euid`.
    pub fn from_env(env: impl Fn(&str) -> Option<OsString>, euid: u32) -> Paths {
        let absolute = |name: &str| env(name).map(PathBuf::from).filter(|path| path.is_absolute());
        let home = absolute("HOME");
        let base = |name: &str, under_home: &str| absolute(name).or_else(|| Some(home.as_ref()?.join(under_home)));
        let runtime = match absolute("XDG_RUNTIME_DIR") {
            Some(dir) => dir.join(OURS),
            None if euid == 0 => PathBuf::from("/run").join(OURS),
            None => absolute("TMPDIR").unwrap_or_else(|| PathBuf::from("/tmp")).join(format!("{OURS}-{euid}")),
        };
        Paths {
            config_home: base("XDG_CONFIG_HOME", ".config"),
            state_home: base("XDG_STATE_HOME", ".local/state"),
            data_home: base("XDG_DATA_HOME", ".local/share"),
            cache_home: base("XDG_CACHE_HOME", ".cache"),
            home,
            runtime,
            node: None,
        }
    }

    /// These directories for the node whose machine id is `machine_id` (None: not known, and its
    /// own state stays where it always was). Only a name of letters and digits is taken.
    pub fn for_node(self, machine_id: Option<&str>) -> Paths {
        let safe = |id: &&str| !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric());
        Paths { node: machine_id.filter(safe).map(str::to_string), ..self }
    }

    /// The machine id the node's own state is kept under.
    pub fn node(&self) -> Option<&str> {
        self.node.as_deref()
    }

    /// Every directory under `root` (`root/state`, `root/run`, ...), and no home: a unit test's
    /// own.
    #[cfg(test)]
    pub fn under(root: &Path) -> Paths {
        let env = |name: &str| {
            let dir = match name {
                "XDG_CONFIG_HOME" => "config",
                "XDG_STATE_HOME" => "state",
                "XDG_DATA_HOME" => "data",
                "XDG_CACHE_HOME" => "cache",
                "XDG_RUNTIME_DIR" => "run",
                _ => return None,
            };
            Some(root.join(dir).into_os_string())
        };
        Paths::from_env(env, euid())
    }

    /// `$HOME` (where `cluster install` puts the binary, what a native toolbox mounts).
    pub fn home(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    /// `$XDG_CACHE_HOME`, else `~/.cache` (under which vLLM and huggingface_hub keep theirs).
    pub fn cache_home(&self) -> Option<&Path> {
        self.cache_home.as_deref()
    }

    /// `$XDG_CONFIG_HOME`, else `~/.config` (where systemd reads a user's units:
    /// `systemd/user/`).
    pub fn config_home(&self) -> Option<&Path> {
        self.config_home.as_deref()
    }

    /// `$XDG_CONFIG_HOME/strix-toolbox/cluster.toml`, else `~/.config/strix-toolbox/cluster.toml`.
    pub fn cluster_file(&self) -> Option<PathBuf> {
        Some(self.config_home.as_ref()?.join(OURS).join("cluster.toml"))
    }

    /// `$XDG_STATE_HOME/strix-toolbox`, else `~/.local/state/strix-toolbox`: what a launch
    /// started, the snapshots a node was given. `keeps` says what, for the error without a home.
    pub fn state_dir(&self, keeps: &str) -> Result<PathBuf> {
        let dir = self.state_home.as_ref().ok_or_else(|| no_home("XDG_STATE_HOME", keeps))?;
        Ok(dir.join(OURS))
    }

    /// This node's own state, apart from every other node's that mounts the same home (a cluster
    /// with one NFS /home): `STATE_DIR/nodes/MACHINE-ID`, or the state directory itself when the
    /// node has no machine id. What a launch started here, and its logs.
    pub fn node_state_dir(&self, keeps: &str) -> Result<PathBuf> {
        let dir = self.state_dir(keeps)?;
        Ok(match &self.node {
            Some(id) => dir.join(NODES).join(id),
            None => dir,
        })
    }

    /// `$XDG_DATA_HOME/strix-toolbox`, else `~/.local/share/strix-toolbox`: the head's registry.
    pub fn data_dir(&self, keeps: &str) -> Result<PathBuf> {
        let dir = self.data_home.as_ref().ok_or_else(|| no_home("XDG_DATA_HOME", keeps))?;
        Ok(dir.join(OURS))
    }

    /// The private runtime directory (locks, ssh control sockets), made and checked.
    pub fn runtime_dir(&self) -> Result<PathBuf> {
        private_dir(&self.runtime)?;
        Ok(self.runtime.clone())
    }

    /// The runtime directory's path, not yet made or checked (what [`private_dir`] is given).
    pub fn runtime_path(&self) -> &Path {
        &self.runtime
    }
}

fn no_home(variable: &str, keeps: &str) -> Error {
    Error::host(
        variable,
        format!("neither {variable} nor HOME is set (to an absolute path), so there is nowhere to keep {keeps}"),
        "set HOME for the user that runs strix-toolbox (on a cluster node: the user ssh logs in as)",
    )
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// `dir`, made when missing (itself 0700), then checked the way OpenSSH checks the directories
/// it trusts: a directory and not a symbolic link, owned by this user, and private. One of ours
/// that others may enter is made private; a link, or another user's, is refused: whoever owns it
/// could plant a lock file that is a link to one of our files, or a socket that is not our ssh
/// master.
pub fn private_dir(dir: &Path) -> Result<()> {
    let unusable = |why: String| {
        Error::host(
            dir.display().to_string(),
            format!("cannot use {} as strix-toolbox's private runtime directory: {why}", dir.display()),
            format!(
                "set XDG_RUNTIME_DIR to a private directory of yours, or remove {} if nobody you trust made it",
                dir.display()
            ),
        )
    };
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| unusable(e.to_string()))?;
    }
    match DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(unusable(e.to_string())),
    }
    let metadata = std::fs::symlink_metadata(dir).map_err(|e| unusable(e.to_string()))?;
    match check_private(&metadata, euid()).map_err(unusable)? {
        Private::Yes => Ok(()),
        Private::Open => std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| unusable(format!("cannot make it private: {e}"))),
    }
}

/// What [`check_private`] found.
#[derive(Debug, PartialEq, Eq)]
enum Private {
    Yes,
    /// Ours, but others may enter it: to be made private.
    Open,
}

/// Whether a directory with `metadata` (not followed through a link) is one `euid` can trust.
fn check_private(metadata: &std::fs::Metadata, euid: u32) -> std::result::Result<Private, String> {
    if metadata.file_type().is_symlink() {
        return Err("it is a symbolic link".into());
    }
    if !metadata.is_dir() {
        return Err("it is not a directory".into());
    }
    if metadata.uid() != euid {
        return Err(format!("it belongs to uid {}, not to this user (uid {euid})", metadata.uid()));
    }
    Ok(if metadata.mode() & 0o077 == 0 { Private::Yes } else { Private::Open })
}

/// A file to take a lock on (`flock`), opened read-write and created 0600 when missing, without
/// following a symbolic link and without truncating it; refused when it is not a regular file of
/// this user's (someone else's file, reached through a hard link, must not be written).
/// Write `path`, a file of directory `dir` (made first), atomically: a temporary file in `dir`
/// renamed over it, so a reader sees the old content or the new, never half; 0600 (a temporary
/// file's mode) until changed.
pub fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| write_error(dir, e))?;
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(|e| write_error(dir, e))?;
    std::io::Write::write_all(&mut temp, bytes).map_err(|e| write_error(path, e))?;
    temp.persist(path).map_err(|e| write_error(path, e.error))?;
    Ok(())
}

/// A file or directory of the state that could not be written.
pub fn write_error(path: &Path, error: std::io::Error) -> Error {
    Error::host(
        path.display().to_string(),
        format!("cannot write {}: {error}", path.display()),
        "check that the home directory is writable and not full",
    )
}

pub fn open_lock_file(path: &Path) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => std::io::Error::other("it is a symbolic link, which strix-toolbox never follows"),
            _ => e,
        })?;
    lock_file_is_ours(&file.metadata()?, euid()).map_err(std::io::Error::other)?;
    Ok(file)
}

fn lock_file_is_ours(metadata: &std::fs::Metadata, euid: u32) -> std::result::Result<(), String> {
    if !metadata.is_file() {
        return Err("it is not a regular file".into());
    }
    if metadata.uid() != euid {
        return Err(format!("it belongs to uid {}, not to this user (uid {euid})", metadata.uid()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| OsString::from(value))
    }

    #[test]
    fn xdg_directories_else_under_home_and_relative_ones_ignored() {
        let paths = Paths::from_env(env_of(&[("HOME", "/h"), ("XDG_STATE_HOME", "/s"), ("XDG_DATA_HOME", "rel")]), 7);
        assert_eq!(paths.state_dir("it").unwrap(), Path::new("/s/strix-toolbox"));
        assert_eq!(paths.data_dir("it").unwrap(), Path::new("/h/.local/share/strix-toolbox"));
        assert_eq!(paths.cluster_file().unwrap(), Path::new("/h/.config/strix-toolbox/cluster.toml"));
        assert_eq!(paths.cache_home(), Some(Path::new("/h/.cache")));
        assert_eq!(paths.home(), Some(Path::new("/h")));

        let homeless = Paths::from_env(env_of(&[("HOME", ""), ("XDG_CONFIG_HOME", "/c")]), 7);
        assert_eq!(homeless.cluster_file().unwrap(), Path::new("/c/strix-toolbox/cluster.toml"));
        let error = homeless.state_dir("what was launched").unwrap_err().to_string();
        assert!(error.contains("nowhere to keep what was launched") && error.contains("set HOME"), "{error}");
        assert_eq!(homeless.home(), None);
    }

    #[test]
    fn each_node_keeps_its_own_state_under_its_machine_id() {
        let paths = Paths::from_env(env_of(&[("HOME", "/h")]), 7);
        let state = Path::new("/h/.local/state/strix-toolbox");
        assert_eq!(paths.node_state_dir("it").unwrap(), state, "no machine id: where it always was");
        let node = paths.clone().for_node(Some("4b8a2f0c9d1e4f6a8b7c5d3e2f1a0b9c"));
        assert_eq!(node.node_state_dir("it").unwrap(), state.join("nodes/4b8a2f0c9d1e4f6a8b7c5d3e2f1a0b9c"));
        assert_eq!(node.state_dir("it").unwrap(), state, "what the nodes share stays shared");
        for unsafe_id in ["", "../x", "a/b", ".."] {
            assert_eq!(paths.clone().for_node(Some(unsafe_id)).node(), None, "{unsafe_id:?}");
        }
    }

    #[test]
    fn the_runtime_directory_is_xdg_s_else_run_for_root_else_the_temp_dir_s_per_user() {
        let runtime = |pairs: &[(&str, &str)], euid| Paths::from_env(env_of(pairs), euid).runtime;
        assert_eq!(runtime(&[("XDG_RUNTIME_DIR", "/run/user/7")], 7), Path::new("/run/user/7/strix-toolbox"));
        assert_eq!(runtime(&[], 0), Path::new("/run/strix-toolbox"));
        assert_eq!(runtime(&[("TMPDIR", "/var/tmp")], 7), Path::new("/var/tmp/strix-toolbox-7"));
        assert_eq!(runtime(&[("TMPDIR", "")], 7), Path::new("/tmp/strix-toolbox-7"));
    }

    #[test]
    fn a_private_directory_is_made_0700_and_an_open_one_of_ours_is_closed() {
        let dir = tempfile::tempdir().unwrap();
        let made = dir.path().join("a/strix-toolbox");
        private_dir(&made).unwrap();
        assert_eq!(std::fs::metadata(&made).unwrap().mode() & 0o777, 0o700);
        std::fs::set_permissions(&made, std::fs::Permissions::from_mode(0o777)).unwrap();
        private_dir(&made).unwrap();
        assert_eq!(std::fs::metadata(&made).unwrap().mode() & 0o777, 0o700);
    }

    #[test]
    fn a_link_or_a_file_in_its_place_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o755)).unwrap();
        let planted = dir.path().join("strix-toolbox-7");
        std::os::unix::fs::symlink(&elsewhere, &planted).unwrap();
        let error = private_dir(&planted).unwrap_err().to_string();
        assert!(error.contains("symbolic link") && error.contains("XDG_RUNTIME_DIR"), "{error}");
        assert_eq!(std::fs::metadata(&elsewhere).unwrap().mode() & 0o777, 0o755, "the link's target is untouched");
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(private_dir(&file).unwrap_err().to_string().contains("not a directory"));
    }

    #[test]
    fn another_user_s_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let metadata = std::fs::symlink_metadata(dir.path()).unwrap();
        let other = metadata.uid() + 1;
        let error = check_private(&metadata, other).unwrap_err();
        assert!(error.contains(&format!("belongs to uid {}", metadata.uid())), "{error}");
        assert_eq!(check_private(&metadata, metadata.uid()), Ok(Private::Yes));
    }

    #[test]
    fn a_lock_file_is_never_followed_through_a_link_nor_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let lock = dir.path().join("vllm.lock");
        std::os::unix::fs::symlink(&victim, &lock).unwrap();
        let error = open_lock_file(&lock).unwrap_err().to_string();
        assert!(error.contains("symbolic link"), "{error}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");

        let ours = dir.path().join("ours.lock");
        std::fs::write(&ours, "1234\n").unwrap();
        open_lock_file(&ours).unwrap();
        assert_eq!(std::fs::read_to_string(&ours).unwrap(), "1234\n", "opening truncates nothing");
        let made = dir.path().join("made.lock");
        open_lock_file(&made).unwrap();
        let metadata = std::fs::metadata(&made).unwrap();
        assert_eq!(metadata.mode() & 0o777, 0o600);
        let error = lock_file_is_ours(&metadata, metadata.uid() + 1).unwrap_err();
        assert!(error.contains(&format!("belongs to uid {}", metadata.uid())), "{error}");
        assert!(lock_file_is_ours(&std::fs::metadata(dir.path()).unwrap(), metadata.uid()).is_err(), "a directory");
    }
}
