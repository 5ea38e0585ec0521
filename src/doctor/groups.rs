//! Group membership: render and video open the GPU; rdma, on a node with RDMA, the verbs devices.

use super::{check, Check, Status};
use crate::host::HostFacts;

pub(super) fn checks(facts: &HostFacts, checks: &mut Vec<Check>) {
    let groups = &facts.groups;
    let Some(user) = &groups.user else {
        checks.push(check("groups", Status::Warn, "cannot tell who the user is (USER unset)", Some("set USER".into())));
        return;
    };
    let mut needed = vec!["render", "video"];
    if facts.rdma.present() {
        needed.push("rdma");
    }
    for name in needed {
        let check_name = format!("group:{name}");
        let join = Some(format!("`sudo usermod -aG {name} {user}`, then log in again"));
        match (groups.gids.get(name), groups.member.get(name)) {
            (None, _) => {
                let fix = (name == "rdma").then(|| "install rdma-core, which creates the group".to_string());
                checks.push(check(check_name, Status::Warn, format!("group {name} does not exist in /etc/group"), fix))
            }
            (Some(_), Some(true)) => checks.push(check(check_name, Status::Pass, format!("{user} is in {name}"), None)),
            // Fedora's rdma-core leaves the verbs nodes open to all: the guide's membership then
            // only guards against a stricter udev rule.
            (Some(gid), _) if name == "rdma" && !facts.rdma.restricted_to_gids.contains(gid) => checks.push(check(
                check_name,
                Status::Info,
                format!(
                    "{user} is not in rdma (gid {gid}); the RDMA device nodes are open to everyone here, so it is \
                     not needed yet, but the guide adds it"
                ),
                join,
            )),
            (Some(gid), _) => checks.push(check(
                check_name,
                Status::Fail,
                format!("{user} is not in {name} (gid {gid}): the device nodes it guards stay closed in the toolbox"),
                join,
            )),
        }
    }
}
