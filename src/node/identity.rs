//! Who answers at the other end of an ssh master, as the node's agent says in its hello: the boot
//! (the kernel's boot id, new at every boot) and the host keys its sshd serves now. OpenSSH never
//! checks a master again once it multiplexes over it: the host key was verified when it was
//! opened, and not since. So the head keeps what a node said over a master it had just opened
//! (`node::ssh`), and replaces a reused master whose node now says otherwise, having rebooted or
//! been given other host keys: the new master's login verifies the key against known_hosts
//! again, and a changed key fails there, as it always has.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::host::HostRoot;

/// What a node says of itself in its hello.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeIdentity {
    /// `/proc/sys/kernel/random/boot_id` (under the host root).
    #[serde(default)]
    pub boot_id: Option<String>,
    /// The SHA256 fingerprints of the host keys the node's sshd serves (`SHA256:…`, as
    /// `ssh-keygen -l` prints them), sorted; empty when they cannot be read.
    #[serde(default)]
    pub host_keys: Vec<String>,
}

/// sshd's configuration when its command line names none.
const SSHD_CONFIG: &str = "/etc/ssh/sshd_config";
/// The host keys sshd uses when its configuration names none.
const DEFAULT_HOST_KEYS: [&str; 3] =
    ["/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ecdsa_key", "/etc/ssh/ssh_host_ed25519_key"];
/// How many parents up the process tree the sshd that serves this session may be.
const ANCESTORS: usize = 16;

impl NodeIdentity {
    /// This node: its boot id from `root`, the host keys of the sshd this process runs under.
    pub fn here(root: &HostRoot) -> NodeIdentity {
        let boot_id = root.attribute("proc/sys/kernel/random/boot_id").filter(|id| !id.is_empty());
        let mut host_keys: Vec<String> = sshd_host_keys(&sshd_listener_command().unwrap_or_default())
            .iter()
            .filter_map(|key| std::fs::read_to_string(key.with_extension(extension_pub(key))).ok())
            .filter_map(|line| fingerprint(&line))
            .collect();
        host_keys.sort();
        host_keys.dedup();
        NodeIdentity { boot_id, host_keys }
    }

    /// A reused master may carry calls only when the node says exactly what it said over the
    /// master when it was opened, and says enough to tell: a boot id and at least one host key.
    pub fn vouches_for_reuse(&self, recorded: &NodeIdentity) -> bool {
        self.boot_id.is_some() && !self.host_keys.is_empty() && self == recorded
    }
}

/// `ssh_host_ed25519_key` → `ssh_host_ed25519_key.pub` (a key file may have a dot in its name).
fn extension_pub(key: &Path) -> String {
    match key.extension() {
        Some(extension) => format!("{}.pub", extension.to_string_lossy()),
        None => "pub".to_string(),
    }
}

/// The `SHA256:…` fingerprint of a public key line (`TYPE BASE64 [COMMENT]`).
pub fn fingerprint(public_key_line: &str) -> Option<String> {
    let blob = public_key_line.split_whitespace().nth(1)?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(blob).ok()?;
    let hash = base64::engine::general_purpose::STANDARD_NO_PAD.encode(Sha256::digest(bytes));
    Some(format!("SHA256:{hash}"))
}

/// The command line of the sshd listening for the connection this process came through: the
/// nearest ancestor sshd that calls itself `[listener]`, else the farthest sshd (socket
/// activation starts one per connection, with no listener above it).
fn sshd_listener_command() -> Option<Vec<String>> {
    let mut pid = parent_of("self")?;
    let mut farthest = None;
    for _ in 0..ANCESTORS {
        if pid <= 1 {
            break;
        }
        let command = command_line(pid);
        if command.first().is_some_and(|first| first == "sshd:" || first.ends_with("/sshd") || first == "sshd") {
            if command.iter().any(|word| word == "[listener]") {
                return Some(command);
            }
            farthest = Some(command);
        }
        pid = parent_of(&pid.to_string())?;
    }
    farthest
}

/// `/proc/PID/cmdline` as words: NUL-separated, or one string of words once the program set
/// its title (sshd does: `sshd: /usr/sbin/sshd -D -f FILE [listener] 0 of 10-100 startups`).
fn command_line(pid: u32) -> Vec<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&bytes).split(['\0', ' ']).filter(|word| !word.is_empty()).map(String::from).collect()
}

/// The parent pid, from `/proc/PID/stat` (the field after the `(comm)`, which may hold spaces).
fn parent_of(pid: &str) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// The private host key files sshd started with `command` serves: `-h FILE`, else the
/// configuration's `HostKey` lines (`-f FILE`, else /etc/ssh/sshd_config; those before any
/// `Match`), else OpenSSH's defaults.
fn sshd_host_keys(command: &[String]) -> Vec<PathBuf> {
    let option = |flag: &str| {
        command.windows(2).filter(|pair| pair[0] == flag).map(|pair| PathBuf::from(&pair[1])).collect::<Vec<_>>()
    };
    let given = option("-h");
    if !given.is_empty() {
        return given;
    }
    let config = option("-f").pop().unwrap_or_else(|| PathBuf::from(SSHD_CONFIG));
    let configured = configured_host_keys(&std::fs::read_to_string(config).unwrap_or_default());
    if configured.is_empty() {
        DEFAULT_HOST_KEYS.iter().map(PathBuf::from).collect()
    } else {
        configured
    }
}

/// The `HostKey` lines of an sshd configuration, up to its first `Match` block.
fn configured_host_keys(config: &str) -> Vec<PathBuf> {
    let mut keys = Vec::new();
    for line in config.lines() {
        let line = line.trim();
        let (keyword, value) = match line.split_once(|c: char| c.is_whitespace() || c == '=') {
            Some((keyword, value)) => (keyword, value.trim_start_matches(|c: char| c.is_whitespace() || c == '=')),
            None => (line, ""),
        };
        if keyword.eq_ignore_ascii_case("match") {
            break;
        }
        if keyword.eq_ignore_ascii_case("hostkey") && !value.is_empty() {
            keys.push(PathBuf::from(value.trim().trim_matches('"')));
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_the_ones_ssh_keygen_prints() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("ssh_host_ed25519_key");
        let made = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&key)
            .status()
            .expect("ssh-keygen (scripts/test-deps.sh installs openssh-client)");
        assert!(made.success());
        let listed = std::process::Command::new("ssh-keygen").arg("-l").arg("-f").arg(&key).output().unwrap();
        let listed = String::from_utf8(listed.stdout).unwrap();
        let public = std::fs::read_to_string(key.with_extension(extension_pub(&key))).unwrap();
        assert_eq!(fingerprint(&public).as_deref(), listed.split_whitespace().nth(1), "{listed}");
        assert_eq!(fingerprint("ssh-ed25519"), None);
        assert_eq!(fingerprint("ssh-ed25519 not*base64"), None);
    }

    #[test]
    fn host_keys_come_from_h_then_the_configuration_then_the_defaults() {
        let words = |line: &str| line.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            sshd_host_keys(&words("sshd: /usr/sbin/sshd -h /k1 -h /k2 [listener]")),
            [PathBuf::from("/k1"), PathBuf::from("/k2")]
        );
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("sshd_config");
        std::fs::write(
            &config,
            "# keys\nPort 22\nHostKey /etc/a_key\nhostkey=\"/etc/b key\"\nMatch User alice\n  HostKey /etc/c_key\n",
        )
        .unwrap();
        let command =
            words(&format!("sshd: /usr/sbin/sshd -D -f {} [listener] 0 of 10-100 startups", config.display()));
        assert_eq!(sshd_host_keys(&command), [PathBuf::from("/etc/a_key"), PathBuf::from("/etc/b key")]);
        std::fs::write(&config, "Port 22\n").unwrap();
        assert_eq!(sshd_host_keys(&command).len(), DEFAULT_HOST_KEYS.len());
    }

    #[test]
    fn reuse_needs_the_same_boot_and_keys_and_both_known() {
        let id = |boot: Option<&str>, keys: &[&str]| NodeIdentity {
            boot_id: boot.map(String::from),
            host_keys: keys.iter().map(|k| k.to_string()).collect(),
        };
        let opened = id(Some("b1"), &["SHA256:a"]);
        assert!(id(Some("b1"), &["SHA256:a"]).vouches_for_reuse(&opened));
        assert!(!id(Some("b2"), &["SHA256:a"]).vouches_for_reuse(&opened), "rebooted");
        assert!(!id(Some("b1"), &["SHA256:c"]).vouches_for_reuse(&opened), "other host keys");
        assert!(!id(None, &[]).vouches_for_reuse(&id(None, &[])), "a node that says nothing");
        assert!(!id(Some("b1"), &[]).vouches_for_reuse(&id(Some("b1"), &[])), "no host key to compare");
    }

    #[test]
    fn a_key_s_public_half_is_beside_it() {
        assert_eq!(extension_pub(Path::new("/etc/ssh/ssh_host_ed25519_key")), "pub");
        assert_eq!(extension_pub(Path::new("/k/host.key")), "key.pub");
    }

    #[test]
    fn the_boot_id_comes_from_the_host_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::open(dir.path()).unwrap();
        assert_eq!(NodeIdentity::here(&root).boot_id, None);
        std::fs::create_dir_all(dir.path().join("proc/sys/kernel/random")).unwrap();
        std::fs::write(dir.path().join("proc/sys/kernel/random/boot_id"), "2f0e\n").unwrap();
        assert_eq!(NodeIdentity::here(&root).boot_id.as_deref(), Some("2f0e"));
    }
}
