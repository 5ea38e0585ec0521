//! The checks only a cluster can make, over what each node reported: every node reachable and on
//! our strix-toolbox, healthy by its own doctor, an ACTIVE RoCE port, one subnet, one MTU, jumbo
//! frames end to end, the same kernel parameters, and the same image digest and RCCL everywhere.
//! Pure: facts in, a table out (checks as rows, nodes as columns).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::facts::NodeFacts;
use super::shared_home::shared_home;
use crate::doctor::Status;
use crate::image::short_digest;
use crate::serving::engine::link_ports;
use crate::serving::reach::Reached;
use crate::spec::transport::Transport;
use crate::toolbox::status::ToolboxStatus;

/// One cell of the table: a node's value for a check; no status when it was not checked there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    pub status: Option<Status>,
    pub text: String,
}

/// A problem on one node, with its fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    pub node: String,
    pub status: Status,
    pub message: String,
    pub fix: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterCheck {
    pub name: String,
    /// One per node, in the cluster's order.
    pub cells: Vec<Cell>,
    pub problems: Vec<Problem>,
}

/// `cluster doctor`'s report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterDoctorReport {
    pub ok: bool,
    pub nodes: Vec<String>,
    pub toolbox: String,
    pub checks: Vec<ClusterCheck>,
    /// Everything each node reported.
    pub facts: Vec<NodeFacts>,
}

impl ClusterDoctorReport {
    pub fn new(toolbox: &str, facts: Vec<NodeFacts>) -> ClusterDoctorReport {
        let checks = cluster_checks(&facts, toolbox);
        let ok = !checks.iter().flat_map(|c| &c.problems).any(|p| p.status == Status::Fail);
        ClusterDoctorReport {
            ok,
            nodes: facts.iter().map(|f| f.node.clone()).collect(),
            toolbox: toolbox.into(),
            checks,
            facts,
        }
    }

    pub fn exit_code(&self) -> i32 {
        i32::from(!self.ok)
    }
}

/// Builds one row.
pub(super) struct CheckRow<'a> {
    pub(super) check: ClusterCheck,
    facts: &'a [NodeFacts],
}

impl<'a> CheckRow<'a> {
    pub(super) fn new(name: &str, facts: &'a [NodeFacts]) -> CheckRow<'a> {
        let cells = facts.iter().map(|_| Cell { status: None, text: "-".into() }).collect();
        CheckRow { check: ClusterCheck { name: name.into(), cells, problems: Vec::new() }, facts }
    }

    pub(super) fn set(&mut self, index: usize, status: Status, text: impl Into<String>) {
        let cell = &mut self.check.cells[index];
        // A cell keeps its worst status.
        if cell.status.is_none_or(|old| rank(status) >= rank(old)) {
            cell.status = Some(status);
        }
        cell.text = text.into();
    }

    pub(super) fn problem(&mut self, index: usize, status: Status, message: impl Into<String>, fix: Option<String>) {
        let node = self.facts[index].node.clone();
        let cell = &mut self.check.cells[index];
        if cell.status.is_none_or(|old| rank(status) > rank(old)) {
            cell.status = Some(status);
        }
        self.check.problems.push(Problem { node, status, message: message.into(), fix });
    }
}

fn rank(status: Status) -> u8 {
    match status {
        Status::Pass | Status::Info | Status::Skipped => 0,
        Status::Warn => 1,
        Status::Fail => 2,
    }
}

pub fn cluster_checks(facts: &[NodeFacts], toolbox: &str) -> Vec<ClusterCheck> {
    let probed = link_ports()
        .into_iter()
        .filter(|port| facts.iter().any(|f| f.worker_ports.iter().any(|(p, _)| *p == port.port)));
    let worker_ports: Vec<ClusterCheck> =
        probed.filter_map(|port| Some(worker_port(facts, port.port, port.from_head?))).collect();
    let mut checks = vec![
        reachable(facts),
        node_doctor(facts),
        transport(facts),
        subnet(facts),
        mtu(facts),
        jumbo_path(facts),
        kernel_params(facts),
        // A locally built image has no registry digest; its id is the same on every node too.
        same_value(facts, "image", toolbox, |t| Some(t.image_identity().to_string()), "image"),
        same_value(facts, "rccl", toolbox, |t| t.rccl_sha256.clone(), "RCCL (sha256)"),
        shared_home(facts),
    ];
    checks.extend(worker_ports);
    checks
}

/// A port every worker listens on, reachable from the head on the link (a refusal counts:
/// nothing listens before a launch, but nothing drops the connection either): the row `name`.
fn worker_port(facts: &[NodeFacts], port: u16, name: &str) -> ClusterCheck {
    let mut row = CheckRow::new(name, facts);
    row.set(0, Status::Pass, "head");
    for (i, node) in facts.iter().enumerate() {
        let Some((_, reached)) = node.worker_ports.iter().find(|(p, _)| *p == port) else { continue };
        match reached {
            Reached::Answers | Reached::Refused => row.set(i, Status::Pass, "reachable"),
            Reached::Silent => row.problem(
                i,
                Status::Fail,
                format!("the head's connection to its port {port} got no answer in 3 s: a firewall drops it"),
                Some(
                    "let the port in on the link only: `sudo firewall-cmd --permanent --zone=trusted \
                     --change-interface=LINK && sudo firewall-cmd --reload` (or remove the rule that drops it)"
                        .into(),
                ),
            ),
            Reached::Failed(failure) => row.problem(
                i,
                Status::Fail,
                format!("the head cannot connect to its port {port}: {failure}"),
                Some("a firewall rejecting it, or the link down: `strix-toolbox cluster doctor`'s link rows".into()),
            ),
            Reached::Unasked(why) => row.problem(
                i,
                Status::Fail,
                format!("the head could not try its port {port}: {why}"),
                Some("`strix-toolbox cluster status` says why the head does not answer".into()),
            ),
        }
    }
    row.check
}

fn reachable(facts: &[NodeFacts]) -> ClusterCheck {
    let mut row = CheckRow::new("strix-toolbox", facts);
    for (i, node) in facts.iter().enumerate() {
        match (&node.unreachable, &node.version) {
            (Some(why), _) => row.problem(i, Status::Fail, why.clone(), None),
            (None, Some(version)) => row.set(i, Status::Pass, version.clone()),
            (None, None) => row.problem(
                i,
                Status::Fail,
                "strix-toolbox is not installed",
                Some("`strix-toolbox cluster install`".into()),
            ),
        }
        if node.unreachable.is_some() {
            row.check.cells[i].text = "unreachable".into();
        }
        for error in &node.errors {
            row.problem(i, Status::Fail, error.clone(), None);
        }
    }
    row.check
}

fn node_doctor(facts: &[NodeFacts]) -> ClusterCheck {
    let mut row = CheckRow::new("doctor", facts);
    for (i, node) in facts.iter().enumerate() {
        let Some(report) = &node.doctor else { continue };
        let status = if report.fail > 0 {
            Status::Fail
        } else if report.warn > 0 {
            Status::Warn
        } else {
            Status::Pass
        };
        row.set(i, status, format!("{} pass, {} warn, {} fail", report.pass, report.warn, report.fail));
        for check in report.checks.iter().filter(|c| matches!(c.status, Status::Warn | Status::Fail)) {
            row.problem(i, check.status, format!("{}: {}", check.name, check.message), check.fix.clone());
        }
    }
    row.check
}

/// The data plane each node will use: RoCE everywhere, or the same fallback everywhere.
fn transport(facts: &[NodeFacts]) -> ClusterCheck {
    let mut row = CheckRow::new("transport", facts);
    let kinds: std::collections::BTreeSet<&str> =
        facts.iter().filter_map(|f| f.detect.as_ref()).map(|d| d.transport.label()).collect();
    for (i, node) in facts.iter().enumerate() {
        let Some(detect) = &node.detect else { continue };
        let name = detect.transport.label();
        match &detect.transport {
            Transport::Roce { device, port, netdev, .. } => {
                row.set(i, Status::Pass, format!("RoCE {device}/{port} {netdev}"))
            }
            Transport::ThunderboltTcp { netdev } => row.problem(
                i,
                Status::Warn,
                format!("no ACTIVE RoCE port: TCP over {netdev} (~70-100 µs instead of ~5 µs)"),
                Some("`strix-toolbox doctor` on the node names the RoCE port and its fix".into()),
            ),
            Transport::EthernetTcp => row.problem(
                i,
                Status::Fail,
                "no ACTIVE RoCE port and no Thunderbolt link: tensor parallelism falls back to plain Ethernet TCP",
                Some("`strix-toolbox doctor` on the node names the port and its fix".into()),
            ),
        }
        if kinds.len() > 1 {
            row.problem(
                i,
                Status::Fail,
                format!(
                    "the nodes use different transports ({}); this one uses {name}",
                    kinds.iter().copied().collect::<Vec<_>>().join(", ")
                ),
                Some("give every node the same link (an ACTIVE RoCE port, or thunderbolt0)".into()),
            );
        }
        row.check.cells[i].text = match &detect.transport {
            Transport::Roce { device, port, netdev, .. } => format!("RoCE {device}/{port} {netdev}"),
            Transport::ThunderboltTcp { netdev } => format!("TCP {netdev}"),
            Transport::EthernetTcp => "Ethernet TCP".into(),
        };
    }
    row.check
}

fn subnet(facts: &[NodeFacts]) -> ClusterCheck {
    let mut row = CheckRow::new("roce subnet", facts);
    let subnets: Vec<_> = facts.iter().map(|f| f.roce.as_ref().and_then(|l| l.subnet())).collect();
    let head = subnets.iter().flatten().next().copied();
    for (i, node) in facts.iter().enumerate() {
        let Some(link) = &node.roce else { continue };
        let Some(subnet) = subnets[i] else {
            row.problem(
                i,
                Status::Fail,
                format!("{} has no IPv4 address", link.netdev),
                Some(format!("give {} an address in the cluster's RoCE subnet", link.netdev)),
            );
            continue;
        };
        let address = format!("{}/{}", link.address.map_or("?".into(), |a| a.to_string()), subnet.1);
        match head {
            Some(head) if head != subnet => row.problem(
                i,
                Status::Fail,
                format!("{address} is not in {}/{}, the subnet of the first node", head.0, head.1),
                Some(format!("put {} in {}/{} (or every node in one subnet)", link.netdev, head.0, head.1)),
            ),
            _ => row.set(i, Status::Pass, address),
        }
    }
    row.check
}

fn mtu(facts: &[NodeFacts]) -> ClusterCheck {
    let mut row = CheckRow::new("mtu", facts);
    let largest = facts.iter().filter_map(|f| f.roce.as_ref()?.mtu).max();
    for (i, node) in facts.iter().enumerate() {
        let Some(link) = &node.roce else { continue };
        let Some(mtu) = link.mtu else { continue };
        let fix =
            Some(format!("`sudo ip link set dev {} mtu 9000` (and persist it; the switch port too)", link.netdev));
        if largest.is_some_and(|largest| mtu < largest) {
            row.problem(
                i,
                Status::Fail,
                format!("{} MTU {mtu}, other nodes use {}", link.netdev, largest.unwrap_or(0)),
                fix,
            );
        } else if mtu < 9000 {
            row.problem(i, Status::Warn, format!("{} MTU {mtu}: RoCE wants jumbo frames (9000)", link.netdev), fix);
        }
        let status = row.check.cells[i].status.unwrap_or(Status::Pass);
        row.set(i, status, mtu.to_string());
    }
    row.check
}

fn jumbo_path(facts: &[NodeFacts]) -> ClusterCheck {
    let mut row = CheckRow::new("jumbo path", facts);
    for (i, node) in facts.iter().enumerate() {
        if node.probes.is_empty() {
            continue;
        }
        let failed: Vec<_> = node.probes.iter().filter(|p| !p.ok).collect();
        for probe in &failed {
            row.problem(
                i,
                Status::Fail,
                format!(
                    "a {}-byte unfragmented ping to {} ({}) did not arrive: {}",
                    probe.size + 28,
                    probe.peer,
                    probe.address,
                    probe.detail
                ),
                Some("set the same MTU on both ends and on every switch port between them".into()),
            );
        }
        let text = if failed.is_empty() {
            format!("ok to {}", node.probes.iter().map(|p| p.peer.as_str()).collect::<Vec<_>>().join(", "))
        } else {
            format!("FAIL to {}", failed.iter().map(|p| p.peer.as_str()).collect::<Vec<_>>().join(", "))
        };
        let status = row.check.cells[i].status.unwrap_or(Status::Pass);
        row.set(i, status, text);
    }
    row.check
}

fn kernel_params(facts: &[NodeFacts]) -> ClusterCheck {
    let mut row = CheckRow::new("kernel params", facts);
    let params: Vec<Option<&BTreeMap<String, String>>> =
        facts.iter().map(|f| f.detect.as_ref().map(|d| &d.kernel_params)).collect();
    let Some(reference) = params.iter().flatten().next().copied() else { return row.check };
    let head = facts[params.iter().position(Option::is_some).unwrap_or(0)].node.clone();
    for (i, node_params) in params.iter().enumerate() {
        let Some(node_params) = node_params else { continue };
        let differ: Vec<String> = reference
            .keys()
            .chain(node_params.keys())
            .filter(|key| reference.get(*key) != node_params.get(*key))
            .map(|key| format!("{key}={}", node_params.get(key).map_or("(unset)", String::as_str)))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if differ.is_empty() {
            row.set(i, Status::Pass, "same");
        } else {
            row.problem(
                i,
                Status::Warn,
                format!("kernel parameters differ from {head}: {}", differ.join(" ")),
                Some(format!("use {head}'s values on every node (GRUB_CMDLINE_LINUX), then reboot")),
            );
            row.check.cells[i].text = "differs".into();
        }
    }
    row.check
}

/// Every node's toolbox `toolbox` must carry the same `value` (image digest, RCCL sha).
fn same_value(
    facts: &[NodeFacts],
    name: &str,
    toolbox: &str,
    value: impl Fn(&ToolboxStatus) -> Option<String>,
    what: &str,
) -> ClusterCheck {
    let mut row = CheckRow::new(name, facts);
    let values: Vec<Option<Option<String>>> = facts
        .iter()
        .map(|f| f.status.as_ref().map(|s| s.toolboxes.iter().find(|t| t.name == toolbox).and_then(&value)))
        .collect();
    let reference = values.iter().flatten().flatten().next().cloned();
    for (i, node_value) in values.iter().enumerate() {
        let Some(node_value) = node_value else { continue };
        let has_toolbox = facts[i].status.as_ref().is_some_and(|s| s.toolboxes.iter().any(|t| t.name == toolbox));
        match (node_value, &reference) {
            _ if !has_toolbox => row.problem(
                i,
                Status::Fail,
                format!("no toolbox named {toolbox}"),
                Some("`strix-toolbox cluster refresh`".into()),
            ),
            (Some(mine), Some(reference)) if mine != reference => {
                row.problem(
                    i,
                    Status::Fail,
                    format!("{what} {} differs from the other nodes' {}", short_digest(mine), short_digest(reference)),
                    Some("`strix-toolbox cluster refresh` puts every node on one image".into()),
                );
                row.check.cells[i].text = short_digest(mine).to_string();
            }
            (Some(mine), _) => row.set(i, Status::Pass, short_digest(mine)),
            (None, Some(_)) => row.problem(
                i,
                Status::Fail,
                format!("{toolbox} records no {what} while other nodes do"),
                Some("`strix-toolbox cluster refresh` puts every node on one image".into()),
            ),
            // Nothing to compare: not a pass.
            (None, None) => row.check.cells[i].text = "not recorded".into(),
        }
    }
    row.check
}

/// The first 12 hex digits of a digest.
#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::cluster::facts::PathProbe;
    use crate::container_engine::EngineKind;
    use crate::doctor::Check;
    use crate::link::address::ClusterLink;
    use crate::ops::detect::DetectReport;
    use crate::ops::doctor::DoctorReport;
    use crate::ops::status::StatusReport;

    fn detect(params: &[(&str, &str)]) -> DetectReport {
        DetectReport {
            gpu: Default::default(),
            rdma: crate::host::RdmaFacts {
                devices: vec!["/dev/infiniband/uverbs0".into()],
                ports: vec![crate::host::RdmaPort {
                    device: "rocep194s0f0".into(),
                    port: 1,
                    state: Some("4: ACTIVE".into()),
                    phys_state: Some("5: LinkUp".into()),
                    netdev: Some("enp194s0np0".into()),
                    roce_v2_gid_index: Some(3),
                    ..Default::default()
                }],
                restricted_to_gids: Default::default(),
            },
            groups: Default::default(),
            user: None,
            user_groups: Default::default(),
            memlock: None,
            kernel_params: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            interfaces: vec![],
            transport: Transport::Roce {
                device: "rocep194s0f0".into(),
                port: 1,
                netdev: "enp194s0np0".into(),
                gid_index: 3,
            },
            firewalld: None,
            os: Default::default(),
            engine: EngineKind::Podman,
            container_args: vec![],
            warnings: vec![],
        }
    }

    /// A status whose toolbox runs image `id`, pulled by `digest`.
    fn status_of(id: &str, digest: &str) -> StatusReport {
        StatusReport {
            version: "0.1.0".into(),
            engine: EngineKind::Podman,
            endpoint: "/run/podman/podman.sock".into(),
            toolboxes: vec![ToolboxStatus {
                name: "vllm".into(),
                image: "repo@sha256:x".into(),
                image_id: id.into(),
                image_digest: Some(digest.into()),
                rccl_sha256: None,
                pin: Some("20261101-100000".into()),
                manager: Some("native".into()),
                running: false,
                created: None,
                vllm: None,
            }],
        }
    }

    fn node(name: &str, address: [u8; 4], mtu: u32, digest: &str) -> NodeFacts {
        NodeFacts {
            node: name.into(),
            version: Some("0.1.0".into()),
            doctor: Some(DoctorReport::new(vec![Check {
                name: "gpu".into(),
                status: Status::Pass,
                message: "gfx1151".into(),
                fix: None,
            }])),
            detect: Some(detect(&[("amdgpu.gttsize", "126976")])),
            status: Some(status_of(&format!("{digest}-id"), digest)),
            roce: Some(ClusterLink {
                netdev: "enp194s0np0".into(),
                address: Some(Ipv4Addr::from(address)),
                prefix: Some(30),
                mtu: Some(mtu),
            }),
            ..Default::default()
        }
    }

    fn probe(peer: &str, ok: bool) -> PathProbe {
        PathProbe { peer: peer.into(), address: Ipv4Addr::new(192, 168, 100, 2), size: 8972, ok, detail: "x".into() }
    }

    fn problems<'a>(report: &'a ClusterDoctorReport, check: &str) -> Vec<&'a Problem> {
        report.checks.iter().filter(|c| c.name == check).flat_map(|c| &c.problems).collect()
    }

    #[test]
    fn a_healthy_pair_passes_every_row() {
        let mut one = node("node1", [192, 168, 100, 1], 9000, "sha256:aaa");
        let mut two = node("node2", [192, 168, 100, 2], 9000, "sha256:aaa");
        one.probes = vec![probe("node2", true)];
        two.probes = vec![probe("node1", true)];
        two.worker_ports = vec![(50052, Reached::Refused)];
        let report = ClusterDoctorReport::new("vllm", vec![one, two]);
        assert!(report.ok, "{report:#?}");
        for check in report.checks.iter().filter(|c| c.name != "rccl" && c.name != "home") {
            assert!(check.cells.iter().all(|c| c.status == Some(Status::Pass)), "{check:?}");
        }
        // No node records an RCCL, nor says where its home is: nothing was compared, so nothing passes.
        for unchecked in ["rccl", "home"] {
            let row = report.checks.iter().find(|c| c.name == unchecked).unwrap();
            assert!(row.cells.iter().all(|c| c.status.is_none()), "{row:?}");
        }
    }

    #[test]
    fn a_worker_whose_rpc_port_is_dropped_is_named() {
        let one = node("node1", [192, 168, 100, 1], 9000, "sha256:aaa");
        let mut two = node("node2", [192, 168, 100, 2], 9000, "sha256:aaa");
        let mut three = node("node3", [192, 168, 100, 3], 9000, "sha256:aaa");
        two.worker_ports = vec![(50052, Reached::Silent)];
        three.worker_ports = vec![(50052, Reached::Answers)];
        let report = ClusterDoctorReport::new("llama", vec![one, two, three]);
        assert!(!report.ok);
        let rpc = problems(&report, "rpc port");
        assert_eq!((rpc.len(), rpc[0].node.as_str()), (1, "node2"), "{rpc:?}");
        assert!(rpc[0].message.contains("50052") && rpc[0].fix.as_deref().unwrap().contains("zone=trusted"));
        let without = ClusterDoctorReport::new("vllm", vec![node("node1", [192, 168, 100, 1], 9000, "sha256:aaa")]);
        assert!(!without.checks.iter().any(|c| c.name == "rpc port"), "one node: no row");
    }

    #[test]
    fn one_end_at_1500_fails_mtu_and_the_jumbo_path() {
        let mut one = node("node1", [192, 168, 100, 1], 9000, "sha256:aaa");
        let mut two = node("node2", [192, 168, 100, 2], 1500, "sha256:aaa");
        one.probes = vec![probe("node2", false)];
        two.probes = vec![probe("node1", false)];
        let report = ClusterDoctorReport::new("vllm", vec![one, two]);
        assert!(!report.ok);
        let mtu = problems(&report, "mtu");
        assert_eq!(mtu.len(), 1, "{mtu:?}");
        assert_eq!(mtu[0].node, "node2");
        assert!(mtu[0].message.contains("1500") && mtu[0].fix.as_deref().unwrap().contains("mtu 9000"));
        assert_eq!(problems(&report, "jumbo path").len(), 2);
    }

    #[test]
    fn different_images_subnets_and_parameters_are_named_per_node() {
        let one = node("node1", [192, 168, 100, 1], 9000, "sha256:aaa");
        let mut two = node("node2", [192, 168, 101, 2], 9000, "sha256:bbb");
        two.detect = Some(detect(&[("amdgpu.gttsize", "65536")]));
        let report = ClusterDoctorReport::new("vllm", vec![one, two]);
        for check in ["image", "roce subnet"] {
            let found = problems(&report, check);
            assert_eq!(found.len(), 1, "{check}: {found:?}");
            assert_eq!((found[0].node.as_str(), found[0].status), ("node2", Status::Fail));
        }
        let params = problems(&report, "kernel params");
        assert!(params[0].message.contains("amdgpu.gttsize=65536"), "{params:?}");
        assert_eq!(params[0].status, Status::Warn);
    }

    #[test]
    fn an_unreachable_node_fails_and_is_otherwise_unchecked() {
        let one = node("node1", [192, 168, 100, 1], 9000, "sha256:aaa");
        let two = NodeFacts {
            node: "node2".into(),
            unreachable: Some("node2: connection timed out".into()),
            ..Default::default()
        };
        let report = ClusterDoctorReport::new("vllm", vec![one, two]);
        assert!(!report.ok);
        let row = &report.checks[0];
        assert_eq!(row.cells[1].text, "unreachable");
        assert_eq!(row.problems[0].node, "node2");
        // Rows it could not take part in stay unchecked there.
        assert!(report.checks[1..].iter().all(|c| c.cells[1].status.is_none()));
    }

    #[test]
    fn one_image_pulled_by_two_digests_is_one_image() {
        // The index's digest on one node, its platform manifest's on another: one image id.
        let one = NodeFacts {
            status: Some(status_of("sha256:id", "sha256:index")),
            ..node("node1", [192, 168, 100, 1], 9000, "x")
        };
        let two = NodeFacts {
            status: Some(status_of("sha256:id", "sha256:platform")),
            ..node("node2", [192, 168, 100, 2], 9000, "x")
        };
        let report = ClusterDoctorReport::new("vllm", vec![one, two]);
        assert!(problems(&report, "image").is_empty(), "{:?}", problems(&report, "image"));
    }

    #[test]
    fn a_node_without_the_toolbox_fails_the_image_row() {
        let one = node("node1", [192, 168, 100, 1], 9000, "sha256:aaa");
        let mut two = node("node2", [192, 168, 100, 2], 9000, "sha256:aaa");
        two.status.as_mut().unwrap().toolboxes.clear();
        let report = ClusterDoctorReport::new("vllm", vec![one, two]);
        assert!(problems(&report, "image")[0].message.contains("no toolbox named vllm"));
    }
}
