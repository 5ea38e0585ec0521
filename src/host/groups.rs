//! Groups from /etc/group (and /etc/passwd for primary groups): gids of video, render, rdma, and
//! whether the invoking user is in each.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::HostRoot;
use crate::error::Result;

/// The groups whose members may open the GPU and RDMA device nodes.
pub const DEVICE_GROUPS: [&str; 3] = ["video", "render", "rdma"];

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupFacts {
    /// Group name → gid, for the device groups that exist.
    pub gids: BTreeMap<String, u32>,
    /// The user the checks are about (SUDO_USER, else USER, else LOGNAME; under another machine's
    /// tree, its first login user when that one has no account there).
    pub user: Option<String>,
    /// Group name → whether that user is a member (by list or as primary group).
    pub member: BTreeMap<String, bool>,
}

pub fn read(root: &HostRoot, user: Option<String>, warnings: &mut Vec<String>) -> Result<GroupFacts> {
    let group_file = root.read("/etc/group")?.unwrap_or_default();
    let passwd_file = root.read("/etc/passwd")?.unwrap_or_default();
    let mut user = user.or_else(|| user_of_uid(&passwd_file, current_uid()));
    // A tree of another machine (`examples/hosts/`): whoever runs us may have no account there,
    // so its checks are about the tree's own login user.
    if !root.is_system() && user.as_deref().is_none_or(|u| u != "root" && primary_gid_of(&passwd_file, u).is_none()) {
        user = first_login_user(&passwd_file).or(user);
    }
    let primary_gid = user.as_deref().and_then(|u| primary_gid_of(&passwd_file, u));

    let mut facts = GroupFacts { user: user.clone(), ..Default::default() };
    for (number, line) in group_file.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(entry) = parse_group_line(line) else {
            warnings.push(format!("/etc/group line {}: malformed entry {line:?}", number + 1));
            continue;
        };
        if !DEVICE_GROUPS.contains(&entry.name) {
            continue;
        }
        facts.gids.insert(entry.name.to_string(), entry.gid);
        if let Some(user) = &user {
            let listed = entry.members.iter().any(|m| m == user);
            let primary = primary_gid == Some(entry.gid);
            facts.member.insert(entry.name.to_string(), listed || primary || user == "root");
        }
    }
    Ok(facts)
}

/// Who ran us: under sudo, the user who typed sudo.
pub fn invoking_user() -> Option<String> {
    ["SUDO_USER", "USER", "LOGNAME"].iter().find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
}

fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// The name /etc/passwd gives a uid (root is root even in a tree without a passwd file).
fn user_of_uid(passwd: &str, uid: u32) -> Option<String> {
    passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.len() >= 3 && fields[2].parse() == Ok(uid)).then(|| fields[0].to_string())
        })
        .or_else(|| (uid == 0).then(|| "root".to_string()))
}

struct GroupEntry<'a> {
    name: &'a str,
    gid: u32,
    members: Vec<&'a str>,
}

/// `name:password:gid:member,member`
fn parse_group_line(line: &str) -> Option<GroupEntry<'_>> {
    let fields: Vec<&str> = line.split(':').collect();
    if fields.len() != 4 || fields[0].is_empty() {
        return None;
    }
    let gid = fields[2].parse().ok()?;
    let members = fields[3].split(',').map(str::trim).filter(|m| !m.is_empty()).collect();
    Some(GroupEntry { name: fields[0], gid, members })
}

/// `name:password:uid:gid:gecos:home:shell`
fn primary_gid_of(passwd: &str, user: &str) -> Option<u32> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 4 && fields[0] == user).then(|| fields[3].parse().ok()).flatten()
    })
}

/// The first account with a login uid (1000 and up, below `nobody`'s 65534).
fn first_login_user(passwd: &str) -> Option<String> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        let uid: u32 = fields.get(2)?.parse().ok()?;
        ((1000..65534).contains(&uid) && !fields[0].is_empty()).then(|| fields[0].to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_group_lines() {
        let entry = parse_group_line("render:x:105:alice,bob").unwrap();
        assert_eq!((entry.name, entry.gid, entry.members), ("render", 105, vec!["alice", "bob"]));
        assert!(parse_group_line("render:x:notanumber:").is_none());
        assert!(parse_group_line("render:x").is_none());
        assert_eq!(parse_group_line("video:x:44:").unwrap().members, Vec::<&str>::new());
    }

    #[test]
    fn finds_primary_gid() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:44::/home/alice:/bin/bash\n";
        assert_eq!(primary_gid_of(passwd, "alice"), Some(44));
        assert_eq!(primary_gid_of(passwd, "bob"), None);
    }

    #[test]
    fn another_machines_tree_is_about_its_own_user() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        let passwd = "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534::/:/sbin/nologin\n\
                      alice:x:1000:1000::/home/alice:/bin/bash\n";
        std::fs::write(dir.path().join("etc/passwd"), passwd).unwrap();
        std::fs::write(dir.path().join("etc/group"), "render:x:105:alice\n").unwrap();
        let root = HostRoot::open(dir.path()).unwrap();
        let read_as = |user: &str| read(&root, Some(user.into()), &mut Vec::new()).unwrap();
        let bob = read_as("bob");
        assert_eq!((bob.user.as_deref(), bob.member.get("render")), (Some("alice"), Some(&true)));
        assert_eq!(read_as("root").user.as_deref(), Some("root"), "root is root everywhere");
        assert_eq!(read_as("alice").user.as_deref(), Some("alice"));
        assert_eq!(first_login_user("root:x:0:0::/:/bin/sh\n"), None);
    }
}
