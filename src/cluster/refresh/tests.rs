//! The refresh's decisions on in-process nodes over in-memory engines: one digest everywhere,
//! all-or-nothing staging, the abort, the undo after a failed swap, Ctrl-C, the spread's choices
//! and the prune. (`tests/testsuite/cluster.rs` and `spread.rs` run the same over ssh, with real
//! podman services and registries.)

use super::*;
use crate::cluster::testing::{as_nodes, digest, failing, interrupting, nodes, publish, Scripted, TestNode, REPO};
use crate::container_engine::fake::RecordedCall;
use crate::container_engine::ImageInfo;
use crate::error::ErrorKind;
use crate::node::call::NodeCall;
use crate::plan::temp_name;
use crate::reporter::{Recorder, Silent};
use crate::spread::copy::SpreadCopied;
use crate::spread::prune::SpreadPruned;
use crate::spread::registry::SpreadServed;
use crate::spread::relay_serve::{SpreadRelayEnded, SpreadRelaying};
use crate::spread::resolve::UpstreamDigest;
use crate::spread::trust::SpreadTrusted;

const NAME: &str = "vllm";

fn request() -> RefreshRequest {
    RefreshRequest::for_tests(NAME, &format!("{REPO}:latest"))
}

fn spread_off() -> SpreadSettings {
    SpreadSettings { enabled: false, ..SpreadSettings::default() }
}

async fn refresh(nodes: &[&dyn Node]) -> Result<ClusterRefreshReport> {
    refresh_nodes(nodes, &request(), &spread_off(), &Silent).await
}

/// Every node on version `digit` of the image, through a first refresh.
async fn on_version(names: &[&str], digit: char) -> Vec<TestNode> {
    let cluster = nodes(names);
    publish(&cluster, digit);
    let report = refresh(&as_nodes(&cluster)).await.unwrap();
    assert_eq!(report.outcome, ClusterOutcome::Refreshed);
    cluster
}

/// What each node runs, and the containers of the toolbox it has.
fn state(cluster: &[TestNode]) -> Vec<(Option<String>, Vec<String>)> {
    cluster.iter().map(|test| (test.runs(NAME), test.toolboxes(NAME))).collect()
}

fn on(digit: char, nodes: usize) -> Vec<(Option<String>, Vec<String>)> {
    vec![(Some(format!("sha256:id{digit}")), vec![NAME.to_string()]); nodes]
}

fn changes(test: &TestNode) -> Vec<RecordedCall> {
    test.engine
        .calls()
        .into_iter()
        .filter(|c| matches!(c, RecordedCall::Create(_) | RecordedCall::Rename { .. } | RecordedCall::Remove(_)))
        .collect()
}

#[tokio::test]
async fn every_node_gets_the_one_digest_and_a_second_refresh_changes_nothing() {
    let cluster = nodes(&["a", "b", "c"]);
    publish(&cluster, '1');
    let report = refresh(&as_nodes(&cluster)).await.unwrap();
    assert_eq!(report.outcome, ClusterOutcome::Refreshed);
    assert_eq!(report.pinned, format!("{REPO}@{}", digest('1')));
    for node in &report.nodes {
        assert_eq!((node.report.image.as_str(), node.swapped), (report.pinned.as_str(), true), "{node:?}");
    }
    assert_eq!(state(&cluster), on('1', 3));
    // The head resolved the tag; the others pulled the digest it named, never the tag.
    assert!(cluster[0].engine.calls().contains(&RecordedCall::Pull(format!("{REPO}:latest"))));
    for test in &cluster[1..] {
        assert_eq!(test.engine.calls()[0], RecordedCall::Pull(report.pinned.clone()));
    }

    let before: Vec<usize> = cluster.iter().map(|test| changes(test).len()).collect();
    let again = refresh(&as_nodes(&cluster)).await.unwrap();
    assert_eq!(again.outcome, ClusterOutcome::Unchanged);
    assert!(again.nodes.iter().all(|node| !node.swapped));
    assert_eq!(cluster.iter().map(|test| changes(test).len()).collect::<Vec<_>>(), before, "nothing changed");
}

#[tokio::test]
async fn one_node_refreshes_itself_in_one_call_and_reports_its_own_error() {
    let cluster = nodes(&["solo"]);
    publish(&cluster, '1');
    let report = refresh(&as_nodes(&cluster)).await.unwrap();
    assert_eq!((report.outcome, report.pinned.clone()), (ClusterOutcome::Refreshed, format!("{REPO}@{}", digest('1'))));
    assert_eq!(report.nodes[0].report.image, format!("{REPO}:latest"), "by its tag: nothing to agree on");
    assert_eq!(state(&cluster), on('1', 1));
    assert_eq!(refresh(&as_nodes(&cluster)).await.unwrap().outcome, ClusterOutcome::Unchanged);

    // Its failure is its own: no cluster wording around it.
    publish(&cluster, '2');
    cluster[0].engine.fail(RecordedCall::Create(temp_name(NAME)));
    let error = refresh(&as_nodes(&cluster)).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::ContainerEngine, "{error}");
    assert_eq!(state(&cluster), on('1', 1));
}

#[tokio::test]
async fn a_node_that_cannot_stage_leaves_every_node_as_it_was() {
    let cluster = on_version(&["a", "b", "c"], '1').await;
    publish(&cluster, '2');
    cluster[2].engine.fail(RecordedCall::Create(temp_name(NAME)));
    let error = refresh(&as_nodes(&cluster)).await.unwrap_err();
    let message = error.to_string();
    assert_eq!(error.kind(), ErrorKind::Nodes);
    assert!(message.starts_with("cluster refresh stopped before any node swapped: c: "), "{message}");
    assert!(message.contains("Every node is as it was (staged replacement removed on a, b)"), "{message}");
    assert_eq!(state(&cluster), on('1', 3), "old toolboxes everywhere, nothing staged left");
}

#[tokio::test]
async fn a_node_lost_while_staging_aborts_the_others() {
    let cluster = on_version(&["a", "b"], '1').await;
    publish(&cluster, '2');
    let lost = failing(&cluster[1].node, |call| matches!(call, NodeCall::Refresh(_)));
    let error = refresh(&[&cluster[0].node, &lost]).await.unwrap_err().to_string();
    assert!(error.contains("b: the connection was lost") && error.contains("removed on a"), "{error}");
    assert_eq!(state(&cluster), on('1', 2));
}

#[tokio::test]
async fn a_failed_swap_puts_the_swapped_nodes_back() {
    let cluster = on_version(&["a", "b", "c"], '1').await;
    publish(&cluster, '2');
    // b cannot give the staged toolbox its name: its own swap puts its old one back.
    cluster[1].engine.fail(RecordedCall::rename(&temp_name(NAME), NAME));
    let error = refresh(&as_nodes(&cluster)).await.unwrap_err().to_string();
    assert!(error.starts_with("cluster refresh failed during the swap: b: "), "{error}");
    assert!(error.contains("Every node is as it was (previous toolbox restored on a, b, c)"), "{error}");
    assert_eq!(state(&cluster), on('1', 3), "a and c undone, b's staged replacement removed");
}

#[tokio::test]
async fn a_swap_that_took_effect_before_failing_is_undone_too() {
    let cluster = on_version(&["a", "b"], '1').await;
    publish(&cluster, '2');
    // The rename happened; the answer was lost.
    cluster[1].engine.fail_after(RecordedCall::rename(&temp_name(NAME), NAME));
    refresh(&as_nodes(&cluster)).await.unwrap_err();
    assert_eq!(state(&cluster), on('1', 2));
}

#[tokio::test]
async fn ctrl_c_while_staging_removes_every_staged_replacement() {
    let cluster = on_version(&["a", "b"], '1').await;
    publish(&cluster, '2');
    let interrupt = Interrupt::manual();
    let stage_on_b =
        interrupting(&cluster[1].node, &interrupt, |call| matches!(call, NodeCall::Refresh(r) if r.stage_only));
    let nodes: [&dyn Node; 2] = [&cluster[0].node, &stage_on_b];
    let error = in_phases(&nodes, &request(), &spread_off(), &Silent, &interrupt, None).await.unwrap_err();
    assert!(matches!(error, Error::Interrupted { signal: Signal::Interrupt, .. }), "{error}");
    assert_eq!(error.exit_code(), 130);
    assert_eq!(state(&cluster), on('1', 2), "the stage finished everywhere, then was undone");
}

#[tokio::test]
async fn ctrl_c_while_swapping_puts_every_node_back() {
    let cluster = on_version(&["a", "b"], '1').await;
    publish(&cluster, '2');
    let interrupt = Interrupt::manual();
    let swap_on_a =
        interrupting(&cluster[0].node, &interrupt, |call| matches!(call, NodeCall::Phase(p) if p.phase == Phase::Swap));
    let nodes: [&dyn Node; 2] = [&swap_on_a, &cluster[1].node];
    let error = in_phases(&nodes, &request(), &spread_off(), &Silent, &interrupt, None).await.unwrap_err();
    assert_eq!(error.exit_code(), 130, "{error}");
    assert_eq!(state(&cluster), on('1', 2));
}

#[tokio::test]
async fn ctrl_c_before_any_change_stops_before_staging() {
    let cluster = on_version(&["a", "b"], '1').await;
    publish(&cluster, '2');
    let interrupt = Interrupt::manual();
    let resolving = interrupting(&cluster[0].node, &interrupt, |call| matches!(call, NodeCall::Resolve(_)));
    let before = changes(&cluster[1]).len();
    let nodes: [&dyn Node; 2] = [&resolving, &cluster[1].node];
    let error = in_phases(&nodes, &request(), &spread_off(), &Silent, &interrupt, None).await.unwrap_err();
    assert!(error.to_string().contains("before any node changed"), "{error}");
    assert_eq!(changes(&cluster[1]).len(), before, "b was not even staged");
}

/// A `before_swap` that notes what it saw (each node's image and staged report's `previous`).
fn noting<'a>(
    cluster: &'a [TestNode],
    seen: &'a std::cell::RefCell<Vec<(Option<String>, Option<String>)>>,
    answer: Result<()>,
) -> BeforeSwap<'a> {
    Box::new(move |staged: &[RefreshReport]| {
        let previous: Vec<Option<String>> = staged.iter().map(|report| report.previous.clone()).collect();
        Box::pin(async move {
            let runs = cluster.iter().map(|test| test.runs(NAME));
            seen.borrow_mut().extend(runs.zip(previous));
            answer
        })
    })
}

#[tokio::test]
async fn before_the_swap_every_node_still_runs_the_image_it_replaces() {
    for names in [&["a", "b"][..], &["a"][..]] {
        let cluster = on_version(names, '1').await;
        publish(&cluster, '2');
        let seen = std::cell::RefCell::new(Vec::new());
        let hook = noting(&cluster, &seen, Ok(()));
        let report =
            refresh_nodes_then(&as_nodes(&cluster), &request(), &spread_off(), &Silent, Some(hook)).await.unwrap();
        assert_eq!(report.outcome, ClusterOutcome::Refreshed);
        let previous = Some(format!("{REPO}@{}", digest('1')));
        assert_eq!(seen.into_inner(), vec![(Some("sha256:id1".to_string()), previous); names.len()]);
        assert_eq!(state(&cluster), on('2', names.len()));

        // Nothing changes: nothing to measure before.
        let seen = std::cell::RefCell::new(Vec::new());
        let hook = noting(&cluster, &seen, Ok(()));
        let again =
            refresh_nodes_then(&as_nodes(&cluster), &request(), &spread_off(), &Silent, Some(hook)).await.unwrap();
        assert_eq!((again.outcome, seen.into_inner()), (ClusterOutcome::Unchanged, Vec::new()));
    }
}

#[tokio::test]
async fn a_failure_before_the_swap_leaves_every_node_as_it_was() {
    let cluster = on_version(&["a", "b"], '1').await;
    publish(&cluster, '2');
    let seen = std::cell::RefCell::new(Vec::new());
    let hook = noting(&cluster, &seen, Err(Error::Internal("the measure failed".into())));
    let error =
        refresh_nodes_then(&as_nodes(&cluster), &request(), &spread_off(), &Silent, Some(hook)).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("before any node swapped") && message.contains("the measure failed"), "{message}");
    assert!(message.contains("every staged replacement was removed"), "{message}");
    assert_eq!(state(&cluster), on('1', 2), "staged replacements removed, nothing swapped");

    let interrupt = Interrupt::manual();
    let raising: BeforeSwap = Box::new(|_: &[RefreshReport]| {
        interrupt.raise(Signal::Terminate);
        Box::pin(async { Ok(()) })
    });
    let error = in_phases(&as_nodes(&cluster), &request(), &spread_off(), &Silent, &interrupt, Some(raising))
        .await
        .unwrap_err();
    assert_eq!(error.exit_code(), 143, "{error}");
    assert_eq!(state(&cluster), on('1', 2));
}

#[tokio::test]
async fn a_dry_run_changes_nothing_and_resolves_nothing() {
    let cluster = on_version(&["a", "b"], '1').await;
    publish(&cluster, '2');
    let before: Vec<Vec<RecordedCall>> = cluster.iter().map(|test| test.engine.calls()).collect();
    let dry = RefreshRequest { dry_run: true, ..request() };
    let report = refresh_nodes(&as_nodes(&cluster), &dry, &spread_off(), &Silent).await.unwrap();
    assert_eq!((report.outcome, report.pinned.as_str()), (ClusterOutcome::DryRun, dry.image_ref.as_str()));
    assert_eq!(cluster.iter().map(|test| test.engine.calls()).collect::<Vec<_>>(), before);
}

/// Where the head's copy from upstream fails, if it does.
#[derive(Clone, Copy, PartialEq)]
enum CopyFails {
    Never,
    /// Before the relay starts (upstream has no manifest for it).
    AtOnce,
    /// Once the nodes have staged from the relay.
    Midway,
}

/// The head's answers to the spread's calls, which need a registry: it resolves to version
/// `digit`, serves and relays on ports nothing listens on, copies, and prunes `pruned`.
fn head_registry<'a>(head: &'a dyn Node, digit: char, fails: CopyFails) -> Scripted<'a> {
    let dir = tempfile::tempdir().unwrap();
    let home = crate::link::home::RegistryHome { dir: dir.path().join("registry") };
    home.create().unwrap();
    let ca_pem = crate::link::ca::load_or_make(&home).unwrap().cert_pem;
    Scripted {
        inner: head,
        answer: Box::new(move |call| match call {
            NodeCall::SpreadResolve(c) => crate::cluster::testing::answer(UpstreamDigest {
                reference: c.image.clone(),
                digest: digest(digit),
                pinned: format!("{REPO}@{}", digest(digit)),
            }),
            NodeCall::SpreadServe(_) => crate::cluster::testing::answer(SpreadServed {
                address: "127.0.0.1:1".into(),
                netdev: "thunderbolt0".into(),
                ca_pem: ca_pem.clone(),
                started: true,
            }),
            NodeCall::SpreadRelay(_) if fails == CopyFails::AtOnce => {
                Some(Err(Error::Registry { reference: REPO.into(), message: "upstream is down".into(), fix: None }))
            }
            NodeCall::SpreadRelay(_) => {
                crate::cluster::testing::answer(SpreadRelaying { id: 7, relay: Some("127.0.0.1:2".into()) })
            }
            NodeCall::SpreadRelayEnd(_) if fails == CopyFails::Midway => Some(Err(Error::Registry {
                reference: REPO.into(),
                message: "upstream sent other bytes".into(),
                fix: None,
            })),
            NodeCall::SpreadRelayEnd(_) => crate::cluster::testing::answer(SpreadRelayEnded {
                copied: SpreadCopied {
                    digest: digest(digit),
                    size: 100,
                    fetched: 60,
                    blobs_copied: 2,
                    blobs_present: 1,
                },
                relayed: 0,
                requests: 0,
            }),
            NodeCall::SpreadPrune(_) => crate::cluster::testing::answer(SpreadPruned {
                deleted: vec![format!("kyuz0/vllm@{}", digest('0'))],
                disk_bytes: 4096,
                warnings: Vec::new(),
            }),
            _ => trusting(call),
        }),
    }
}

/// Every node's engine trusts the head's registry (the CA is installed), without writing
/// anything to this machine's /etc.
fn trusting(call: &NodeCall) -> Option<Result<serde_json::Value>> {
    match call {
        NodeCall::SpreadTrust(_) => {
            crate::cluster::testing::answer(SpreadTrusted { files: Vec::new(), changed: true, signing_request: None })
        }
        _ => None,
    }
}

#[tokio::test]
async fn the_spread_fills_the_head_once_for_the_nodes_that_lack_the_image() {
    let cluster = on_version(&["a", "b", "c"], '1').await;
    publish(&cluster, '2');
    // c has version 2 already: it gets nothing.
    cluster[2].engine.add_image(ImageInfo {
        id: "sha256:id2".into(),
        repo_digests: vec![format!("{REPO}@{}", digest('2'))],
        ..Default::default()
    });
    let head = head_registry(&cluster[0].node, '2', CopyFails::Never);
    let b = Scripted { inner: &cluster[1].node, answer: Box::new(trusting) };
    let c = Scripted { inner: &cluster[2].node, answer: Box::new(trusting) };
    let recorder = Recorder::default();
    let report = refresh_nodes(&[&head, &b, &c], &request(), &SpreadSettings::default(), &recorder).await.unwrap();
    let spread = report.spread.expect("spread");
    assert_eq!(spread.registry.as_deref(), Some("127.0.0.1:1"));
    assert_eq!(spread.relay.as_deref(), Some("127.0.0.1:2"), "the nodes pull from the relay");
    assert_eq!((spread.size, spread.fetched), (100, 60));
    assert_eq!(spread.had_it, ["c"]);
    // Nothing listens on the head's port here: the lacking nodes pull from upstream, and say why.
    assert_eq!(spread.from_upstream, ["a", "b"]);
    for node in &report.nodes[..2] {
        assert!(node.warnings.iter().any(|w| w.contains("cannot reach the head's registry")), "{node:?}");
    }
    assert_eq!(spread.pruned, [format!("kyuz0/vllm@{}", digest('0'))], "the head's registry pruned after the swap");
    assert_eq!(spread.disk_bytes, Some(4096));
    assert_eq!(state(&cluster), on('2', 3));
    assert!(recorder.events().iter().any(|e| e.contains("copying")), "{:?}", recorder.events());
}

#[tokio::test]
async fn a_node_whose_engine_cannot_trust_the_head_pulls_from_upstream_and_says_why() {
    let cluster = on_version(&["a", "b"], '1').await;
    publish(&cluster, '2');
    let head = head_registry(&cluster[0].node, '2', CopyFails::Never);
    let distrusting = Scripted {
        inner: &cluster[1].node,
        answer: Box::new(|call| match call {
            NodeCall::SpreadTrust(_) => Some(Err(Error::Usage("no certs.d here".into()))),
            _ => None,
        }),
    };
    let report = refresh_nodes(&[&head, &distrusting], &request(), &SpreadSettings::default(), &Silent).await.unwrap();
    let warnings = &report.nodes[1].warnings;
    assert!(warnings.iter().any(|w| w.contains("cannot make its engine trust the head's registry")), "{warnings:?}");
    assert!(report.spread.expect("spread").from_upstream.contains(&"b".to_string()));
    assert_eq!(state(&cluster), on('2', 2));
}

#[tokio::test]
async fn a_spread_that_fails_stages_no_node() {
    let cluster = on_version(&["a", "b"], '1').await;
    publish(&cluster, '2');
    let head = head_registry(&cluster[0].node, '2', CopyFails::AtOnce);
    let b = Scripted { inner: &cluster[1].node, answer: Box::new(trusting) };
    let before = changes(&cluster[1]).len();
    let error = refresh_nodes(&[&head, &b], &request(), &SpreadSettings::default(), &Silent).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("the spread failed") && message.contains("upstream is down"), "{message}");
    assert!(message.contains("--spread off"), "{message}");
    assert_eq!(changes(&cluster[1]).len(), before, "b was not staged");
    assert_eq!(state(&cluster), on('1', 2));
}

/// The nodes stage from the relay while the head copies; the copy then fails (upstream's bytes
/// were not the blob): the staged replacements are removed and no node swaps.
#[tokio::test]
async fn a_copy_that_fails_after_the_nodes_staged_swaps_no_node() {
    let cluster = on_version(&["a", "b"], '1').await;
    publish(&cluster, '2');
    let head = head_registry(&cluster[0].node, '2', CopyFails::Midway);
    let b = Scripted { inner: &cluster[1].node, answer: Box::new(trusting) };
    let error = refresh_nodes(&[&head, &b], &request(), &SpreadSettings::default(), &Silent).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("the spread failed") && message.contains("upstream sent other bytes"), "{message}");
    assert!(message.contains("No node was changed"), "{message}");
    assert!(!changes(&cluster[1]).is_empty(), "b staged before the copy ended");
    assert_eq!(state(&cluster), on('1', 2), "staged replacements removed");
}

#[tokio::test]
async fn every_node_having_the_image_spreads_nothing() {
    let cluster = on_version(&["a", "b"], '1').await;
    let head = head_registry(&cluster[0].node, '1', CopyFails::AtOnce);
    let report =
        refresh_nodes(&[&head, &cluster[1].node], &request(), &SpreadSettings::default(), &Silent).await.unwrap();
    assert_eq!(report.outcome, ClusterOutcome::Unchanged);
    let spread = report.spread.expect("spread");
    assert_eq!((spread.registry, spread.had_it), (None, vec!["a".to_string(), "b".to_string()]));
}

/// What a canary does when the new image serves wrong: every node back to the image each ran
/// before, all or nothing, through the same pipeline (the previous image is still pinned on every
/// node, so nothing is pulled).
#[tokio::test]
async fn every_node_goes_back_to_the_previous_image_by_refreshing_to_it() {
    let cluster = on_version(&["a", "b"], '1').await;
    publish(&cluster, '2');
    let forward = refresh(&as_nodes(&cluster)).await.unwrap();
    assert_eq!(state(&cluster), on('2', 2));
    let previous = forward.nodes[0].report.previous.clone().expect("the image it replaced");
    assert_eq!(previous, format!("{REPO}@{}", digest('1')));
    assert!(forward.nodes.iter().all(|node| node.report.previous.as_ref() == Some(&previous)));

    let pulls_before: Vec<usize> = cluster
        .iter()
        .map(|t| t.engine.calls().iter().filter(|c| matches!(c, RecordedCall::Pull(_))).count())
        .collect();
    let back = RefreshRequest { image_ref: previous.clone(), ..request() };
    let report = refresh_nodes(&as_nodes(&cluster), &back, &spread_off(), &Silent).await.unwrap();
    assert_eq!((report.outcome, report.pinned.as_str()), (ClusterOutcome::Refreshed, previous.as_str()));
    assert_eq!(state(&cluster), on('1', 2));
    let pulls_after: Vec<usize> = cluster
        .iter()
        .map(|t| t.engine.calls().iter().filter(|c| matches!(c, RecordedCall::Pull(_))).count())
        .collect();
    assert_eq!(pulls_after, pulls_before, "the previous image was still here: nothing pulled");
}
