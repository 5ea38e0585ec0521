//! Room on a node for one more service, by the plan's figures: what the service's launch plans to
//! take there (the model-aware plan's weights, KV cache and runtime), what the node has for
//! serving, and what the services already there hold (each record's own planned figure). A launch
//! onto a node is allowed beside others only when these add up ([`fits_beside`], the one place
//! they are compared); a start on demand first stops, of the services that may be stopped for
//! it, the ones idle longest until they do ([`to_stop`]).

use serde::{Deserialize, Serialize};

use crate::reporter::Bytes;

/// What the plan says of one node for one service: the GPU memory it takes there, and what the
/// node has for serving in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Room {
    pub planned: u64,
    pub usable: u64,
}

/// Whether `room.planned` fits on a node beside `held` (each other service's recorded figure).
pub fn fits_beside(room: Room, held: &[u64]) -> bool {
    held.iter().try_fold(room.planned, |sum, bytes| sum.checked_add(*bytes)).is_some_and(|sum| sum <= room.usable)
}

/// A service found running on a node, with what its record says it holds there (None: its
/// launch had no plan figure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub node: String,
    pub service: String,
    pub bytes: Option<u64>,
}

/// Why no room can be made: the nodes where the services that may not be stopped (or whose
/// memory no plan gives) leave too little, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoRoom(pub String);

/// Which services to stop, in order, so that a service taking `needs` (per node: its name and
/// room there) fits beside what stays of `held`: of `stoppable` (the services that may be stopped
/// for it, idle longest first), those on a node that lacks room, one at a time, until every node
/// has it. A service held without a figure counts as filling its node. None to stop: it fits.
pub fn to_stop(needs: &[(String, Room)], held: &[Held], stoppable: &[String]) -> Result<Vec<String>, NoRoom> {
    let mut stopped: Vec<String> = Vec::new();
    loop {
        let lacking: Vec<&String> =
            needs.iter().filter(|(node, room)| !fits_on(node, *room, held, &stopped)).map(|(node, _)| node).collect();
        if lacking.is_empty() {
            return Ok(stopped);
        }
        let next = stoppable.iter().find(|service| {
            !stopped.contains(service) && held.iter().any(|h| &h.service == *service && lacking.contains(&&h.node))
        });
        match next {
            Some(service) => stopped.push(service.clone()),
            None => return Err(no_room(needs, held, &stopped, &lacking)),
        }
    }
}

/// Whether `room` fits on `node` beside what `held` has there, but for `stopped`.
fn fits_on(node: &str, room: Room, held: &[Held], stopped: &[String]) -> bool {
    let staying: Option<Vec<u64>> =
        held.iter().filter(|h| h.node == node && !stopped.contains(&h.service)).map(|h| h.bytes).collect();
    staying.is_some_and(|bytes| fits_beside(room, &bytes))
}

fn no_room(needs: &[(String, Room)], held: &[Held], stopped: &[String], lacking: &[&String]) -> NoRoom {
    let each: Vec<String> = lacking
        .iter()
        .map(|node| {
            let room =
                needs.iter().find(|(n, _)| n == *node).map(|(_, room)| *room).unwrap_or(Room { planned: 0, usable: 0 });
            let staying: Vec<&Held> =
                held.iter().filter(|h| &h.node == *node && !stopped.contains(&h.service)).collect();
            let names: Vec<String> = staying
                .iter()
                .map(|h| match h.bytes {
                    Some(bytes) => format!("{} ({})", h.service, Bytes(bytes)),
                    None => format!("{} (no plan figure)", h.service),
                })
                .collect();
            format!(
                "{node} has {} for serving and needs {} for it beside {}",
                Bytes(room.usable),
                Bytes(room.planned),
                names.join(", ")
            )
        })
        .collect();
    NoRoom(each.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn held(node: &str, service: &str, gib: Option<u64>) -> Held {
        Held { node: node.into(), service: service.into(), bytes: gib.map(|g| g * GIB) }
    }

    fn needs(nodes: &[&str], planned: u64) -> Vec<(String, Room)> {
        nodes.iter().map(|n| (n.to_string(), Room { planned: planned * GIB, usable: 100 * GIB })).collect()
    }

    #[test]
    fn a_service_fits_when_every_figure_adds_up_to_what_the_node_has() {
        let room = Room { planned: 40 << 30, usable: 100 << 30 };
        assert!(fits_beside(room, &[]));
        assert!(fits_beside(room, &[60 << 30]));
        assert!(!fits_beside(room, &[60 << 30, 1]));
        assert!(!fits_beside(Room { planned: u64::MAX, usable: u64::MAX }, &[1]), "no overflow");
    }

    #[test]
    fn nothing_is_stopped_when_it_fits() {
        let running = [held("node1", "a", Some(30))];
        assert_eq!(to_stop(&needs(&["node1"], 60), &running, &["a".into()]), Ok(vec![]));
    }

    #[test]
    fn the_idle_longest_on_a_lacking_node_go_first_and_no_more_than_needed() {
        // b (idle longest) and a hold node1; c holds node2, which has room anyway.
        let running = [held("node1", "a", Some(40)), held("node1", "b", Some(40)), held("node2", "c", Some(90))];
        let order: Vec<String> = ["c", "b", "a"].map(String::from).into();
        assert_eq!(to_stop(&needs(&["node1"], 50), &running, &order), Ok(vec!["b".to_string()]));
        assert_eq!(to_stop(&needs(&["node1"], 90), &running, &order), Ok(vec!["b".to_string(), "a".to_string()]));
        // Across two nodes: c goes for node2, b for node1.
        assert_eq!(to_stop(&needs(&["node1", "node2"], 50), &running, &order), Ok(vec!["c".into(), "b".into()]));
    }

    #[test]
    fn a_service_that_may_not_be_stopped_or_has_no_figure_is_named() {
        let running = [held("node1", "pinned", Some(70)), held("node1", "a", Some(20))];
        let refused = to_stop(&needs(&["node1"], 40), &running, &["a".into()]).unwrap_err();
        assert_eq!(refused.0, "node1 has 100.00 GiB for serving and needs 40.00 GiB for it beside pinned (70.00 GiB)");
        let unknown = [held("node1", "old", None)];
        let refused = to_stop(&needs(&["node1"], 1), &unknown, &[]).unwrap_err();
        assert!(refused.0.contains("old (no plan figure)"), "{}", refused.0);
        // One without a figure that may be stopped: stopped.
        assert_eq!(to_stop(&needs(&["node1"], 1), &unknown, &["old".into()]), Ok(vec!["old".to_string()]));
    }
}
