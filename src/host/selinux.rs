//! SELinux as a container meets it. Enforcing, it lets a container open /dev/kfd and /dev/dri
//! only when the `container_use_devices` boolean is on (Fedora's default is off). Read from
//! selinuxfs: `/sys/fs/selinux/enforce` (absent when SELinux is off) and the boolean's file, which
//! holds its current and pending value ("1 1").

use serde::{Deserialize, Serialize};

use super::HostRoot;

const ENFORCE: &str = "/sys/fs/selinux/enforce";
const CONTAINER_USE_DEVICES: &str = "/sys/fs/selinux/booleans/container_use_devices";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelinuxFacts {
    /// Enforcing (true) or permissive (false).
    pub enforcing: bool,
    /// The `container_use_devices` boolean; None when the policy has no such boolean.
    pub container_use_devices: Option<bool>,
}

/// None when SELinux is off (no selinuxfs).
pub fn read(root: &HostRoot, warnings: &mut Vec<String>) -> Option<SelinuxFacts> {
    let enforce = root.attribute(ENFORCE)?;
    let enforcing = match enforce.as_str() {
        "1" => true,
        "0" => false,
        other => {
            warnings.push(format!("{ENFORCE}: expected 0 or 1, found {other:?}"));
            return None;
        }
    };
    let container_use_devices =
        root.attribute(CONTAINER_USE_DEVICES).and_then(|text| match text.split_whitespace().next() {
            Some("1") => Some(true),
            Some("0") => Some(false),
            _ => {
                warnings.push(format!("{CONTAINER_USE_DEVICES}: expected \"0 0\" or \"1 1\", found {text:?}"));
                None
            }
        });
    Some(SelinuxFacts { enforcing, container_use_devices })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> (tempfile::TempDir, HostRoot) {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let root = HostRoot::open(dir.path()).unwrap();
        (dir, root)
    }

    #[test]
    fn reads_the_mode_and_the_boolean() {
        let mut warnings = Vec::new();
        let (_dir, root) = tree(&[(ENFORCE, "1"), (CONTAINER_USE_DEVICES, "0 1")]);
        assert_eq!(
            read(&root, &mut warnings),
            Some(SelinuxFacts { enforcing: true, container_use_devices: Some(false) }),
            "the current value counts, not the pending one"
        );
        let (_dir, root) = tree(&[(ENFORCE, "0")]);
        assert_eq!(read(&root, &mut warnings), Some(SelinuxFacts { enforcing: false, container_use_devices: None }));
        let (_dir, root) = tree(&[]);
        assert_eq!(read(&root, &mut warnings), None, "SELinux off");
        assert!(warnings.is_empty(), "{warnings:?}");

        let (_dir, root) = tree(&[(ENFORCE, "yes"), (CONTAINER_USE_DEVICES, "x")]);
        assert_eq!(read(&root, &mut warnings), None);
        assert_eq!(warnings, [format!("{ENFORCE}: expected 0 or 1, found \"yes\"")]);
    }
}
