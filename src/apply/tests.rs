//! What apply decides when a step fails, against the in-memory engine: the working toolbox is
//! never lost, the temporary one never left behind, a pin still in use is kept.

use super::*;
use crate::container_engine::fake::{FakeEngine, RecordedCall};
use crate::container_engine::{ContainerInfo, CreateRequest, ImageInfo};
use crate::labels;
use crate::manager::Native;
use crate::plan::{temp_name, Action};
use crate::reporter::{Recorder, Silent};

const REPO: &str = "registry.test/vllm";

/// An engine with the image `REPO:latest` and a working toolbox `name` made from an older one.
fn engine_with_toolbox(name: &str) -> FakeEngine {
    let engine = FakeEngine::new();
    engine.add_image(ImageInfo {
        id: "sha256:old".into(),
        repo_tags: vec![format!("{REPO}:20260101-000000")],
        ..Default::default()
    });
    engine.add_image(ImageInfo {
        id: "sha256:new".into(),
        repo_tags: vec![format!("{REPO}:latest")],
        ..Default::default()
    });
    let mut old =
        ContainerInfo { id: "old-id".into(), name: name.into(), image_id: "sha256:old".into(), ..Default::default() };
    old.labels.insert(labels::MANAGED.into(), "true".into());
    old.running = true;
    engine.add_container(old);
    engine
}

/// Create the replacement under its temporary name, then swap it in for `old-id`.
fn replace_plan(name: &str) -> RefreshPlan {
    let request = CreateRequest { name: temp_name(name), image: format!("{REPO}:latest"), ..Default::default() };
    RefreshPlan {
        action: Action::Recreated,
        reason: "the image changed".into(),
        steps: vec![
            Step::Create { request: Box::new(request) },
            Step::Swap { temp: temp_name(name), name: name.into(), old_id: Some("old-id".into()) },
        ],
        replaces_running: true,
    }
}

/// The calls that touched the container `id` or `name`.
fn touching(engine: &FakeEngine, id: &str, name: &str) -> Vec<RecordedCall> {
    engine
        .calls()
        .into_iter()
        .filter(|call| match call {
            RecordedCall::Rename { from, to } => [from, to].iter().any(|n| *n == id || *n == name),
            RecordedCall::Remove(n) | RecordedCall::Start(n) | RecordedCall::Stop(n) => n == id || n == name,
            _ => false,
        })
        .collect()
}

#[tokio::test]
async fn a_replacement_takes_the_name_and_the_old_toolbox_goes() {
    let engine = engine_with_toolbox("vllm");
    let reporter = Recorder::default();
    let applied = apply("vllm", &replace_plan("vllm"), &engine, &Native { home: None }, &reporter).await.unwrap();
    assert!(applied.warnings.is_empty(), "{:?}", applied.warnings);
    assert_eq!(engine.container("vllm").unwrap().image_id, "sha256:new");
    assert_eq!(engine.container("old-id"), None);
    assert_eq!(engine.container(&temp_name("vllm")), None);
    assert_eq!(
        reporter.events(),
        [
            "vllm: create vllm-strix-new from registry.test/vllm:latest",
            "vllm: swap vllm-strix-new in as vllm and remove the old vllm",
            "vllm finished: swap vllm-strix-new in as vllm and remove the old vllm: done",
        ]
    );
}

#[tokio::test]
async fn a_failing_create_removes_the_temporary_container_and_never_touches_the_old_one() {
    let engine = engine_with_toolbox("vllm");
    let old = engine.container("vllm").unwrap();
    // The engine made the container, then the call failed (a connection lost after it acted).
    engine.fail_after(RecordedCall::Create(temp_name("vllm")));
    let reporter = Recorder::default();
    let error = apply("vllm", &replace_plan("vllm"), &engine, &Native { home: None }, &reporter).await.unwrap_err();
    assert!(error.to_string().contains("injected failure"), "{error}");
    assert_eq!(engine.container(&temp_name("vllm")), None, "the temporary container is removed");
    assert_eq!(engine.container("vllm"), Some(old), "the old toolbox is as it was");
    assert_eq!(touching(&engine, "old-id", "vllm"), [], "nothing touched the old toolbox");
    let failed = "vllm finished: create vllm-strix-new from registry.test/vllm:latest: failed";
    assert_eq!(reporter.events().last().map(String::as_str), Some(failed));
}

#[tokio::test]
async fn a_failing_swap_puts_the_old_toolbox_back() {
    let engine = engine_with_toolbox("vllm");
    let old = engine.container("vllm").unwrap();
    engine.fail(RecordedCall::rename(&temp_name("vllm"), "vllm"));
    let error = apply("vllm", &replace_plan("vllm"), &engine, &Native { home: None }, &Silent).await.unwrap_err();
    assert!(error.to_string().contains("injected failure"), "{error}");
    assert_eq!(engine.container("vllm"), Some(old), "the old toolbox is back under its name");
    assert_eq!(engine.container(&old_name("vllm")), None);
    assert_eq!(engine.container(&temp_name("vllm")), None, "the replacement is removed");
}

#[tokio::test]
async fn a_swap_that_cannot_put_the_old_toolbox_back_says_how() {
    let engine = engine_with_toolbox("vllm");
    engine.fail(RecordedCall::rename(&temp_name("vllm"), "vllm"));
    engine.fail(RecordedCall::rename("old-id", "vllm"));
    let error =
        apply("vllm", &replace_plan("vllm"), &engine, &Native { home: None }, &Silent).await.unwrap_err().to_string();
    assert!(error.contains("putting the old toolbox back failed too"), "{error}");
    assert!(error.contains("podman rename vllm-strix-old vllm"), "{error}");
    assert_eq!(engine.container(&old_name("vllm")).unwrap().id, "old-id", "parked, intact");
}

#[tokio::test]
async fn prune_keeps_a_pin_still_in_use_with_a_warning() {
    let engine = engine_with_toolbox("vllm");
    engine.add_image(ImageInfo {
        id: "sha256:older".into(),
        repo_tags: vec![format!("{REPO}:20250101-000000")],
        ..Default::default()
    });
    let in_use = format!("{REPO}:20260101-000000");
    let unused = format!("{REPO}:20250101-000000");
    let plan = RefreshPlan {
        action: Action::Unchanged,
        reason: "image and spec unchanged".into(),
        steps: vec![Step::Prune { references: vec![in_use.clone(), unused.clone()] }],
        replaces_running: false,
    };
    let applied = apply("vllm", &plan, &engine, &Native { home: None }, &Silent).await.unwrap();
    assert_eq!(applied.warnings.len(), 1, "{:?}", applied.warnings);
    assert!(applied.warnings[0].starts_with(&format!("kept {in_use}: ")), "{:?}", applied.warnings);
    assert!(applied.warnings[0].contains("in use"), "{:?}", applied.warnings);
    assert!(engine.image(&in_use).is_some());
    assert_eq!(engine.image(&unused), None);
}

#[tokio::test]
async fn an_empty_plan_changes_and_reports_nothing() {
    let engine = engine_with_toolbox("vllm");
    let plan = RefreshPlan { action: Action::Unchanged, reason: String::new(), steps: vec![], replaces_running: false };
    let reporter = Recorder::default();
    apply("vllm", &plan, &engine, &Native { home: None }, &reporter).await.unwrap();
    assert_eq!(engine.calls(), []);
    assert_eq!(reporter.events(), Vec::<String>::new());
}
