//! The nodes of a command that reads the cluster for long (`cluster metrics --listen`, `cluster
//! top`): each connected at the start, and connected again at the next reading when it could not
//! be, or when its answer failed (its channel may be gone: a node that rebooted, or was
//! unplugged, comes back into the readings instead of staying down until the command restarts).
//! One reading at a time: a reading holds the nodes while it asks them.

use futures_util::future::join_all;
use tokio::sync::Mutex;

use super::metrics::{read_cluster, ClusterReading, MetricsAsk};
use super::ClusterSettings;
use crate::node::remote::RemoteNode;
use crate::node::Node;

pub struct MetricsNodes {
    settings: ClusterSettings,
    /// In the cluster's order.
    slots: Mutex<Vec<Slot>>,
}

struct Slot {
    name: String,
    node: Option<RemoteNode>,
    /// Why it is not connected, when it is not.
    why: String,
}

impl MetricsNodes {
    /// Nothing is connected until the first reading.
    pub fn new(settings: &ClusterSettings) -> MetricsNodes {
        let slots = settings.nodes.iter().map(|name| Slot { name: name.clone(), node: None, why: String::new() });
        MetricsNodes { settings: settings.clone(), slots: Mutex::new(slots.collect()) }
    }

    /// Connect what is not connected, read every node, and let go of those whose answer failed;
    /// the reading's nodes in the cluster's order.
    pub async fn read(&self, ask: &MetricsAsk) -> ClusterReading {
        let mut slots = self.slots.lock().await;
        let ssh = &self.settings.ssh;
        let connecting = slots.iter_mut().filter(|slot| slot.node.is_none()).map(|slot| async move {
            match RemoteNode::connect(&slot.name, ssh).await {
                Ok(node) => slot.node = Some(node),
                Err(error) => slot.why = error.to_string(),
            }
        });
        join_all(connecting).await;
        let connected: Vec<&dyn Node> = slots.iter().filter_map(|s| s.node.as_ref()).map(|n| n as &dyn Node).collect();
        let unreachable: Vec<(String, String)> =
            slots.iter().filter(|s| s.node.is_none()).map(|s| (s.name.clone(), s.why.clone())).collect();
        let mut reading = read_cluster(&connected, &unreachable, ask).await;
        let order = |name: &str| slots.iter().position(|slot| slot.name == name).unwrap_or(usize::MAX);
        reading.nodes.sort_by_key(|seen| order(&seen.node));
        let failed: Vec<String> =
            reading.nodes.iter().filter(|seen| seen.answer.is_err()).map(|seen| seen.node.clone()).collect();
        let lost = slots.iter_mut().filter(|slot| failed.contains(&slot.name)).filter_map(|slot| slot.node.take());
        join_all(lost.map(RemoteNode::close)).await;
        reading
    }

    /// Close every connection.
    pub async fn close(self) {
        let slots = self.slots.into_inner();
        join_all(slots.into_iter().filter_map(|slot| slot.node).map(RemoteNode::close)).await;
    }
}
