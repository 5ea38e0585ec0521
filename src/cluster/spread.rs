//! The spread, head side: bytes from outside cross the uplink once. The nodes that lack the image
//! are found; the head starts its registry on the cluster link and starts copying the image into
//! it from upstream, once, relaying it to the nodes as it comes (`spread::relay_serve`, on
//! `--spread-relay-port`; when the registry has the image whole, the nodes pull from the registry);
//! those nodes install the cluster CA where their engines look, with a client certificate the
//! head signs for each (`spread::trust`), then stage from the relay (`spread::pull`) while the
//! copy still runs; [`finish`] waits for the copy after the stage. A node whose engine cannot be
//! made to trust the head pulls from upstream itself, and the report says why. Any other failure
//! of the spread, the copy's included, stops the refresh before any node swaps: a failed spread
//! is a failed stage.

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::node::{Node, NodeCalls};
use crate::reporter::{Bytes, Reporter};
use crate::spread::pull::{PulledFrom, SpreadSource};
use crate::spread::registry::SpreadServe;
use crate::spread::relay_serve::{SpreadRelay, SpreadRelayEnd};
use crate::spread::trust::{SigningRequest, SpreadSign, SpreadTrust, SpreadTrusted};

/// The port the head's registry listens on by default, on its cluster-link address.
pub const DEFAULT_PORT: u16 = 5443;
/// The port the head's relay listens on by default, on the same address.
pub const DEFAULT_RELAY_PORT: u16 = 5444;
/// The registry the head runs by default: the CNCF distribution registry.
pub const DEFAULT_REGISTRY_IMAGE: &str = "docker.io/library/registry:2";

/// How `cluster refresh` gets the image to the nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpreadSettings {
    /// Spread at all (`--spread off`: every node pulls from upstream).
    pub enabled: bool,
    pub port: u16,
    /// The relay's port, on the same address.
    pub relay_port: u16,
    pub registry_image: String,
}

impl Default for SpreadSettings {
    fn default() -> SpreadSettings {
        SpreadSettings {
            enabled: true,
            port: DEFAULT_PORT,
            relay_port: DEFAULT_RELAY_PORT,
            registry_image: DEFAULT_REGISTRY_IMAGE.to_string(),
        }
    }
}

/// What the spread did, in the cluster refresh's report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadReport {
    /// The head's registry, `IP:PORT` on the cluster link (None: every node had the image).
    pub registry: Option<String>,
    /// The relay the nodes pulled from while the head copied, `IP:PORT` on the cluster link (None:
    /// the head's registry had the image whole, the nodes pulled from there).
    #[serde(default)]
    pub relay: Option<String>,
    /// Blob bytes the relay sent to the nodes.
    #[serde(default)]
    pub relayed: u64,
    /// The image's size: its manifests and blobs.
    pub size: u64,
    /// What the head fetched from upstream for it (the blobs its registry lacked).
    pub fetched: u64,
    pub blobs_copied: usize,
    pub blobs_present: usize,
    /// Nodes that had the image already.
    pub had_it: Vec<String>,
    /// Nodes that pulled it from the head's registry, over the cluster link.
    pub from_head: Vec<String>,
    /// Nodes that pulled it from upstream themselves (their warnings say why).
    pub from_upstream: Vec<String>,
    /// Manifests pruned from the head's registry after the refresh (`path@sha256:…`).
    pub pruned: Vec<String>,
    /// What the head's registry takes on disk after the refresh.
    pub disk_bytes: Option<u64>,
}

/// What the stage takes from the spread, per node in the cluster's order.
#[derive(Debug, Default)]
pub struct Prepared {
    /// Where each node's stage pulls from (None: upstream, or nowhere when it has the image).
    pub sources: Vec<Option<SpreadSource>>,
    /// What each node's report should say (why it pulls from upstream).
    pub warnings: Vec<Vec<String>>,
    pub report: SpreadReport,
    /// The head's copy and relay, until [`finish`] ends them.
    relaying: Option<u64>,
}

impl Prepared {
    /// Record where each node's image came from, from its stage's report.
    pub fn pulled(&mut self, node: &str, pulled: Option<&PulledFrom>) {
        match pulled {
            Some(PulledFrom::Head { .. }) => self.report.from_head.push(node.to_string()),
            Some(PulledFrom::Upstream) => self.report.from_upstream.push(node.to_string()),
            None => {}
        }
    }
}

/// Whether each node lacks `pinned`, from the digests each said its images carry
/// ([`ImageDigests`](crate::spread::pull::ImageDigests)). A node that could not say lacks it:
/// it stages all the same, and fails there with its own error.
pub fn lacking(pinned: &str, held: &[Result<Vec<String>>]) -> Vec<bool> {
    let digest = pinned.rsplit_once('@').map_or("", |(_, digest)| digest);
    held.iter().map(|digests| !matches!(digests, Ok(digests) if digests.iter().any(|d| d == digest))).collect()
}

/// Start filling the head's registry with `pinned` (`repo@sha256:…`, for toolbox `toolbox`) and
/// relaying it for the nodes that lack it (`lacking`, in the nodes' order), and make those nodes
/// trust the head. `nodes[0]` is the head. [`finish`] ends what this started.
pub async fn prepare(
    nodes: &[&dyn Node],
    lacking: &[bool],
    reporter: &dyn Reporter,
    settings: &SpreadSettings,
    pinned: &str,
    toolbox: &str,
) -> Result<Prepared> {
    let mut prepared = Prepared {
        sources: vec![None; nodes.len()],
        warnings: vec![Vec::new(); nodes.len()],
        report: SpreadReport::default(),
        relaying: None,
    };
    prepared.report.had_it =
        nodes.iter().zip(lacking).filter(|(_, lacks)| !**lacks).map(|(node, _)| node.name().to_string()).collect();
    if !lacking.contains(&true) {
        return Ok(prepared);
    }

    let head = nodes[0];
    reporter.step_started(head.name(), &format!("starting the cluster registry (port {})", settings.port));
    let served = head.call(SpreadServe { port: settings.port, image: settings.registry_image.clone() }).await?;
    reporter
        .step_finished(head.name(), &format!("the cluster registry answers at {} ({})", served.address, served.netdev));
    reporter.step_started(head.name(), &format!("copying {pinned} from upstream, relaying it to the nodes"));
    let relay = SpreadRelay {
        image: pinned.to_string(),
        registry: served.address.clone(),
        port: settings.relay_port,
        toolbox: toolbox.to_string(),
    };
    let relaying = head.call(relay).await?;
    prepared.relaying = Some(relaying.id);
    prepared.report.registry = Some(served.address.clone());
    prepared.report.relay = relaying.relay.clone();
    let source = relaying.relay.unwrap_or_else(|| served.address.clone());
    match trust(nodes, lacking, reporter, &source, &served.ca_pem, &mut prepared).await {
        Ok(()) => Ok(prepared),
        Err(error) => {
            let _ = finish(head, &mut prepared, reporter, true).await;
            Err(error)
        }
    }
}

/// After the stage: the head's copy waited for (stopped when `cancel`), its relay stopped, and
/// what they did in the report. The copy's error is the spread's.
pub async fn finish(head: &dyn Node, prepared: &mut Prepared, reporter: &dyn Reporter, cancel: bool) -> Result<()> {
    let Some(id) = prepared.relaying.take() else { return Ok(()) };
    let ended = head.call(SpreadRelayEnd { id, cancel }).await?;
    let copied = ended.copied;
    reporter.step_finished(
        head.name(),
        &format!(
            "fetched {} of {} from upstream; relayed {} to the nodes",
            Bytes(copied.fetched),
            Bytes(copied.size),
            Bytes(ended.relayed)
        ),
    );
    prepared.report = SpreadReport {
        size: copied.size,
        fetched: copied.fetched,
        blobs_copied: copied.blobs_copied,
        blobs_present: copied.blobs_present,
        relayed: ended.relayed,
        ..std::mem::take(&mut prepared.report)
    };
    Ok(())
}

/// The nodes that lack the image made to trust the head at `source` (`IP:PORT`).
async fn trust(
    nodes: &[&dyn Node],
    lacking: &[bool],
    reporter: &dyn Reporter,
    source: &str,
    ca_pem: &str,
    prepared: &mut Prepared,
) -> Result<()> {
    let head = nodes[0];
    // The CA and each node's key; a node without a valid certificate asks, the head signs, the
    // node installs it. A node whose engines cannot be made to trust the registry pulls upstream.
    let trust = SpreadTrust { registry: source.to_string(), ca_pem: ca_pem.to_string(), certificate: None };
    let mut trusted = join_all(nodes.iter().zip(lacking).map(|(node, lacks)| {
        let trust = trust.clone();
        async move {
            if *lacks {
                Some(node.call(trust).await)
            } else {
                None
            }
        }
    }))
    .await;
    let asking: Vec<usize> = (0..nodes.len())
        .filter(|index| matches!(&trusted[*index], Some(Ok(SpreadTrusted { signing_request: Some(_), .. }))))
        .collect();
    if !asking.is_empty() {
        let requests = asking
            .iter()
            .map(|index| SigningRequest {
                node: nodes[*index].name().to_string(),
                csr_pem: match &trusted[*index] {
                    Some(Ok(SpreadTrusted { signing_request: Some(csr), .. })) => csr.clone(),
                    _ => String::new(),
                },
            })
            .collect();
        let signed = head.call(SpreadSign { requests }).await?;
        let installs = asking.iter().zip(signed.certificates).map(|(index, certificate)| {
            let trust = SpreadTrust { certificate: Some(certificate), ..trust.clone() };
            async move { (*index, nodes[*index].call(trust).await) }
        });
        for (index, installed) in join_all(installs).await {
            trusted[index] = Some(installed);
        }
    }
    for (index, trusted) in trusted.into_iter().enumerate() {
        match trusted {
            Some(Ok(_)) => {
                prepared.sources[index] =
                    Some(SpreadSource { registry: source.to_string(), ca_pem: ca_pem.to_string() })
            }
            Some(Err(error)) => {
                let warning = format!(
                    "cannot make its engine trust the head's registry ({}): pulls the image from upstream instead",
                    error.report().message
                );
                reporter.warning(&format!("{}: {warning}", nodes[index].name()));
                prepared.warnings[index].push(warning);
            }
            None => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn a_node_lacks_the_image_unless_it_says_it_carries_the_digest() {
        let (x, y) = (format!("sha256:{}", "1".repeat(64)), format!("sha256:{}", "2".repeat(64)));
        let pinned = format!("docker.io/kyuz0/vllm@{x}");
        let held = vec![
            Ok(vec![y.clone(), x.clone()]),
            Ok(vec![y]),
            Ok(vec![]),
            Err(Error::engine("podman", "list images", "down")),
        ];
        assert_eq!(lacking(&pinned, &held), [false, true, true, true]);
    }
}
