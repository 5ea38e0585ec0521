//! Nodes that mount one home (one NFS /home on every node): each node's doctor reports its home's
//! marker, and nodes with the same marker share a home. What follows is said: each keeps its own
//! serving state apart under its machine id (so two with one machine id, cloned systems, would
//! write each other's records, and one without a machine id keeps its state with everyone's), and
//! their Hugging Face cache is one directory, so a model downloaded once is on all of them and
//! needs no spread between them.

use std::collections::BTreeMap;

use super::checks::{CheckRow, ClusterCheck};
use super::facts::NodeFacts;
use crate::doctor::Status;
use crate::ops::home::NodeHome;

/// The `home` row.
pub fn shared_home(facts: &[NodeFacts]) -> ClusterCheck {
    let mut row = CheckRow::new("home", facts);
    let homes: Vec<Option<&NodeHome>> =
        facts.iter().map(|f| f.doctor.as_ref().and_then(|doctor| doctor.home.as_ref())).collect();
    let mut by_marker: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (index, home) in homes.iter().enumerate() {
        match home {
            Some(NodeHome { marker: Some(marker), .. }) => by_marker.entry(marker.as_str()).or_default().push(index),
            Some(NodeHome { error: Some(error), .. }) => {
                row.problem(index, Status::Warn, format!("cannot tell whether it shares its home: {error}"), None)
            }
            // A node that said nothing of its home: not checked.
            _ => {}
        }
    }
    for members in by_marker.values() {
        if let [only] = members.as_slice() {
            row.set(*only, Status::Pass, "its own");
            continue;
        }
        let names: Vec<&str> = members.iter().map(|&i| facts[i].node.as_str()).collect();
        for &index in members {
            let others: Vec<&str> = names.iter().copied().filter(|name| *name != facts[index].node).collect();
            row.set(index, Status::Info, format!("shared with {}", others.join(", ")));
        }
        say_what_follows(&mut row, facts, &homes, members, &names);
    }
    row.check
}

/// The nodes `members` (named `names`) share a home: say what follows, once, on the first of them,
/// and fail or warn each whose state would not be kept apart.
fn say_what_follows(
    row: &mut CheckRow<'_>,
    facts: &[NodeFacts],
    homes: &[Option<&NodeHome>],
    members: &[usize],
    names: &[&str],
) {
    let home = |index: usize| homes[index].cloned().unwrap_or_default();
    let first = home(members[0]);
    let hub_caches: Vec<Option<String>> = members.iter().map(|&i| home(i).hub_cache).collect();
    let cache = match (hub_caches.first().cloned().flatten(), hub_caches.windows(2).all(|pair| pair[0] == pair[1])) {
        (Some(cache), true) => format!(
            "; their Hugging Face cache ({cache}) is one directory: a model downloaded once is on all of them, and \
             needs no spread between them"
        ),
        _ => "; their Hugging Face caches are set apart (HF_HOME or HF_HUB_CACHE differ): a model is spread to each"
            .to_string(),
    };
    row.problem(
        members[0],
        Status::Info,
        format!(
            "{} share one home ({}): each keeps its own serving state apart, under its machine id{cache}",
            names.join(", "),
            first.state_dir.as_deref().unwrap_or("its state directory")
        ),
        None,
    );
    let mut by_machine: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for &index in members {
        match home(index).machine_id {
            Some(id) => by_machine.entry(id).or_default().push(index),
            None => row.problem(
                index,
                Status::Warn,
                "it has no machine id (/etc/machine-id), so its serving state is kept with that of the nodes it \
                 shares its home with, and a launch across them fails",
                Some("`sudo systemd-machine-id-setup` makes one".into()),
            ),
        }
    }
    for clones in by_machine.values().filter(|clones| clones.len() > 1) {
        let named: Vec<&str> = clones.iter().map(|&i| facts[i].node.as_str()).collect();
        for &index in clones {
            row.problem(
                index,
                Status::Fail,
                format!(
                    "{} have one machine id (cloned systems): in their shared home they write each other's serving \
                     state, and a launch across them fails",
                    named.join(" and ")
                ),
                Some("on each clone: `sudo rm /etc/machine-id && sudo systemd-machine-id-setup`, then reboot".into()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::doctor::DoctorReport;

    fn node(name: &str, marker: &str, machine_id: Option<&str>) -> NodeFacts {
        let home = NodeHome {
            marker: Some(marker.into()),
            machine_id: machine_id.map(String::from),
            state_dir: Some("/home/alice/.local/state/strix-toolbox".into()),
            hub_cache: Some("/home/alice/.cache/huggingface/hub".into()),
            ..NodeHome::default()
        };
        let doctor = DoctorReport { home: Some(home), ..DoctorReport::new(Vec::new()) };
        NodeFacts { node: name.into(), doctor: Some(doctor), ..NodeFacts::default() }
    }

    #[test]
    fn nodes_with_their_own_homes_pass() {
        let row = shared_home(&[node("node1", "a", Some("1")), node("node2", "b", Some("2"))]);
        assert!(row.problems.is_empty(), "{row:?}");
        assert!(row.cells.iter().all(|cell| cell.status == Some(Status::Pass) && cell.text == "its own"));
    }

    #[test]
    fn a_shared_home_is_said_once_with_what_follows() {
        let row =
            shared_home(&[node("node1", "a", Some("1")), node("node2", "a", Some("2")), node("node3", "c", None)]);
        let texts: Vec<&str> = row.cells.iter().map(|cell| cell.text.as_str()).collect();
        assert_eq!(texts, ["shared with node2", "shared with node1", "its own"]);
        assert_eq!(row.problems.len(), 1, "{row:?}");
        let said = &row.problems[0];
        assert_eq!((said.node.as_str(), said.status), ("node1", Status::Info));
        assert_eq!(
            said.message,
            "node1, node2 share one home (/home/alice/.local/state/strix-toolbox): each keeps its own serving state \
             apart, under its machine id; their Hugging Face cache (/home/alice/.cache/huggingface/hub) is one \
             directory: a model downloaded once is on all of them, and needs no spread between them"
        );
    }

    #[test]
    fn clones_fail_and_a_node_without_a_machine_id_warns() {
        let row =
            shared_home(&[node("node1", "a", Some("1")), node("node2", "a", Some("1")), node("node3", "a", None)]);
        let failed: Vec<&str> =
            row.problems.iter().filter(|p| p.status == Status::Fail).map(|p| p.node.as_str()).collect();
        assert_eq!(failed, ["node1", "node2"]);
        assert!(row.problems.iter().any(|p| p.node == "node3" && p.status == Status::Warn));
        assert!(row.problems[0].message.starts_with("node1, node2, node3 share one home"));
    }
}
