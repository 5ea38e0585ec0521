//! The node's machine id (`/etc/machine-id`, machine-id(5): 32 lower-case hex digits, made once
//! when the system is installed and kept across boots): what keeps each node's own state apart
//! when several nodes mount one home.

use std::io::Read;

use super::HostRoot;

const MACHINE_ID: &str = "etc/machine-id";
/// The id and its newline; anything longer is not a machine id.
const MOST: u64 = 64;

/// This node's machine id; None when the file is missing, empty, "uninitialized" (systemd's
/// first boot) or not one.
pub fn machine_id(root: &HostRoot) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(root.path(MACHINE_ID)).ok()?.take(MOST).read_to_string(&mut text).ok()?;
    let id = text.trim();
    is_machine_id(id).then(|| id.to_string())
}

/// 32 lower-case hex digits, as machine-id(5) writes it.
pub fn is_machine_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_machine_id_under_the_host_root_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::open(dir.path()).unwrap();
        assert_eq!(machine_id(&root), None, "no file");
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        let file = dir.path().join(MACHINE_ID);
        std::fs::write(&file, "4b8a2f0c9d1e4f6a8b7c5d3e2f1a0b9c\n").unwrap();
        assert_eq!(machine_id(&root).as_deref(), Some("4b8a2f0c9d1e4f6a8b7c5d3e2f1a0b9c"));
        for not_one in ["uninitialized\n", "", "4B8A2F0C9D1E4F6A8B7C5D3E2F1A0B9C\n", "../../etc\n"] {
            std::fs::write(&file, not_one).unwrap();
            assert_eq!(machine_id(&root), None, "{not_one:?}");
        }
        std::fs::write(&file, "a".repeat(1 << 20)).unwrap();
        assert_eq!(machine_id(&root), None, "too long");
    }
}
